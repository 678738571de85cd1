package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/testcert"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client certificate,
// written as PEM files.
type testPKI struct {
	dir                string
	caFile             string
	serverCert, srvKey string
	clientCert         tls.Certificate
	pool               *x509.CertPool
	otherCAClientCert  tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), pool: x509.NewCertPool()}
	ca, caKey := testcert.New(t, nil, nil, "test CA", true)
	p.pool.AddCert(ca)
	p.caFile = testcert.WriteCert(t, p.dir, "ca.pem", ca)
	srv, srvKey := testcert.New(t, ca, caKey, "leash", false)
	p.serverCert = testcert.WriteCert(t, p.dir, "server.pem", srv)
	p.srvKey = testcert.WriteKey(t, p.dir, "server.key", srvKey)
	cli, cliKey := testcert.New(t, ca, caKey, "envoy", false)
	p.clientCert = tls.Certificate{Certificate: [][]byte{cli.Raw}, PrivateKey: cliKey}
	other, otherKey := testcert.New(t, nil, nil, "stranger", true)
	p.otherCAClientCert = tls.Certificate{Certificate: [][]byte{other.Raw}, PrivateKey: otherKey}
	return p
}

// TestTLS: HTTPS on the /v1 listener, and mTLS on gRPC: a client certificate from the
// configured CA is served, none or another CA's is refused.
func TestTLS(t *testing.T) {
	pki := newTestPKI(t)
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=k",
		"LEASH_HTTP_TLS_CERT_FILE="+pki.serverCert, "LEASH_HTTP_TLS_KEY_FILE="+pki.srvKey,
		"LEASH_GRPC_TLS_CERT_FILE="+pki.serverCert, "LEASH_GRPC_TLS_KEY_FILE="+pki.srvKey,
		"LEASH_GRPC_TLS_CLIENT_CA_FILE="+pki.caFile)

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}}
	resp, err := hc.Get("https://" + p.HTTP + "/v1/namespaces/n/rules")
	if err != nil {
		t.Fatalf("HTTPS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 { // no API key: the TLS handshake and routing worked
		t.Fatalf("HTTPS status %d", resp.StatusCode)
	}

	try := func(certs []tls.Certificate) error {
		creds := credentials.NewTLS(&tls.Config{RootCAs: pki.pool, Certificates: certs})
		conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, leashproc.Request("n", leashproc.Entry("k", "v")))
		return err
	}
	if err := try([]tls.Certificate{pki.clientCert}); err != nil {
		t.Fatalf("mTLS with the CA's client certificate: %v", err)
	}
	if err := try(nil); err == nil {
		t.Fatal("gRPC without a client certificate was served")
	}
	if err := try([]tls.Certificate{pki.otherCAClientCert}); err == nil {
		t.Fatal("gRPC with another CA's client certificate was served")
	}
}
