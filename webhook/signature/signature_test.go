package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	secret := "whsec_test"
	body := []byte(`{"id":"evt_1","type":"webhook.test","created_at":"2026-11-23T10:00:00Z","account":"acme","data":{}}`)
	at := time.Unix(1_795_000_000, 0)
	h := Sign(secret, at, body)

	// The header is exactly t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>.
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("1795000000." + string(body)))
	if want := "t=1795000000,v1=" + hex.EncodeToString(m.Sum(nil)); h != want {
		t.Fatalf("Sign = %q, want %q", h, want)
	}

	tests := []struct {
		name   string
		secret string
		header string
		body   []byte
		now    time.Time
		want   error
	}{
		{"valid", secret, h, body, at.Add(time.Minute), nil},
		{"tampered body", secret, h, []byte(strings.Replace(string(body), "acme", "acm3", 1)), at, ErrBadSignature},
		{"wrong secret", "whsec_other", h, body, at, ErrBadSignature},
		{"too old", secret, h, body, at.Add(6 * time.Minute), ErrExpired},
		{"from the future", secret, h, body, at.Add(-6 * time.Minute), ErrExpired},
		{"no header", secret, "", body, at, ErrNoSignature},
		{"no v1", secret, "t=1795000000", body, at, ErrNoSignature},
		{"bad t", secret, strings.Replace(h, "t=1795000000", "t=soon", 1), body, at, ErrNoSignature},
		{"rotated: second v1 matches", secret, "t=1795000000,v1=00ff," + h[len("t=1795000000,"):], body, at, nil},
		{"changed t", secret, strings.Replace(h, "t=1795000000", "t=1795000001", 1), body, at, ErrBadSignature},
	}
	for _, tc := range tests {
		if err := verifyAt(tc.secret, tc.header, tc.body, 5*time.Minute, tc.now); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := Verify(secret, Sign(secret, time.Now(), body), body, time.Minute); err != nil {
		t.Fatalf("Verify now: %v", err)
	}
}

// TestOpenSSLAgrees checks the shell recipe of the package doc.
func TestOpenSSLAgrees(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("openssl is required in CI (.ci/run installs it)")
		}
		t.Skip("SKIPPING: openssl not installed (apt-get install openssl)")
	}
	body := `{"id":"evt_2","data":{}}`
	h := Sign("s3cret", time.Unix(1_795_000_123, 0), []byte(body))
	cmd := exec.Command("sh", "-c", `printf '%s.' "$T" | cat - "$BODY" | openssl dgst -sha256 -hmac "$SECRET" -hex`)
	dir := t.TempDir()
	path := dir + "/body.json"
	if err := writeFile(path, body); err != nil {
		t.Fatal(err)
	}
	cmd.Env = []string{"T=1795000123", "BODY=" + path, "SECRET=s3cret", "PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(string(out))
	got = got[strings.LastIndex(got, " ")+1:]
	if want := h[strings.Index(h, "v1=")+3:]; got != want {
		t.Fatalf("openssl %q, Sign %q", got, want)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }
