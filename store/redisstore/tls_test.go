package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strconv"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit/redistest"
	"github.com/leashd/leash/testkit/testcert"
)

// TestTLSClientCertificate: Options.TLS carries a private CA and a client certificate to a
// Redis that requires one (Envoy Gateway's REDIS_TLS_CLIENT_CERT, spec §9.18); the
// decisions, on the pipe, and the rest, on go-redis's pool, both use it. Without the
// client certificate the server refuses the connection.
func TestTLSClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caKey := testcert.New(t, nil, nil, "redis-ca", true)
	srvCert, srvKey := testcert.New(t, ca, caKey, "redis", false)
	cliCert, cliKey := testcert.New(t, ca, caKey, "leash", false)
	caFile := testcert.WriteCert(t, dir, "ca.pem", ca)
	_, tlsPort := redistest.StartTLSServer(t, testcert.WriteCert(t, dir, "server.pem", srvCert), testcert.WriteKey(t, dir, "server-key.pem", srvKey),
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "yes")
	url := "redis://127.0.0.1:" + strconv.Itoa(tlsPort) + "/0"
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool,
		Certificates: []tls.Certificate{{Certificate: [][]byte{cliCert.Raw}, PrivateKey: cliKey}}}

	s := openStore(t, Options{URL: url, TLS: tc})
	ctx := context.Background()
	sp := engine.Spend{Counter: engine.Counter{Account: "a", Namespace: "ns", Key: "k", Algorithm: engine.FixedWindow, WindowMS: 60_000}, Limit: 2, Cost: 1}
	for want := int64(1); want >= 0; want-- {
		if d, err := s.Spend(ctx, sp); err != nil || !d.Allowed || d.Remaining != want {
			t.Fatalf("Spend over TLS: %+v, %v", d, err)
		}
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping over TLS: %v", err)
	}

	// The CA alone: the server asks for a certificate and gets none.
	ctx2, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if s2, err := Open(ctx2, Options{URL: url, TLS: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, Prefix: uniquePrefix(), Logger: quietLogger()}); err == nil {
		_ = s2.Close()
		t.Fatal("Open without the client certificate succeeded")
	}
}
