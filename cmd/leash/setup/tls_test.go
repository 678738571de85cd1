package setup_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leashd/leash/cmd/leash/setup"
	"github.com/leashd/leash/config"
	"github.com/leashd/leash/testkit/testcert"
)

func TestRedisTLS(t *testing.T) {
	if tc, err := setup.RedisTLS(config.RedisTLS{}); tc != nil || err != nil {
		t.Fatalf("no files: %v, %v", tc, err)
	}
	dir := t.TempDir()
	ca, caKey := testcert.New(t, nil, nil, "ca", true)
	c, k := testcert.New(t, ca, caKey, "leash", false)
	files := config.RedisTLS{CAFile: testcert.WriteCert(t, dir, "ca.pem", ca), CertFile: testcert.WriteCert(t, dir, "c.pem", c),
		KeyFile: testcert.WriteKey(t, dir, "k.pem", k)}
	tc, err := setup.RedisTLS(files)
	if err != nil || tc.RootCAs == nil || len(tc.Certificates) != 1 {
		t.Fatalf("files: %+v, %v", tc, err)
	}
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := setup.RedisTLS(config.RedisTLS{CAFile: bad}); err == nil || !strings.Contains(err.Error(), "store.redis.tls.ca_file") {
		t.Fatalf("a bad CA file: %v", err)
	}
	if _, err := setup.RedisTLS(config.RedisTLS{CertFile: files.CertFile, KeyFile: bad}); err == nil || !strings.Contains(err.Error(), "cert_file and key_file") {
		t.Fatalf("a bad key file: %v", err)
	}
}
