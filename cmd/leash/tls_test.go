package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
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
	ca, caKey := makeCert(t, nil, nil, "test CA", true)
	p.pool.AddCert(ca)
	p.caFile = writePEM(t, p.dir, "ca.pem", "CERTIFICATE", ca.Raw)
	srv, srvKey := makeCert(t, ca, caKey, "leash", false)
	p.serverCert = writePEM(t, p.dir, "server.pem", "CERTIFICATE", srv.Raw)
	p.srvKey = writePEM(t, p.dir, "server.key", "PRIVATE KEY", mustPKCS8(t, srvKey))
	cli, cliKey := makeCert(t, ca, caKey, "envoy", false)
	p.clientCert = tls.Certificate{Certificate: [][]byte{cli.Raw}, PrivateKey: cliKey}
	other, otherKey := makeCert(t, nil, nil, "stranger", true)
	p.otherCAClientCert = tls.Certificate{Certificate: [][]byte{other.Raw}, PrivateKey: otherKey}
	return p
}

func makeCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:         isCA, BasicConstraintsValid: true,
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func mustPKCS8(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	b, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTLS: HTTPS on the /v1 listener, and mTLS on gRPC: a client certificate from the
// configured CA is served, none or another CA's is refused.
func TestTLS(t *testing.T) {
	pki := newTestPKI(t)
	p := startLeash(t, "LEASH_DEV_API_KEY=k",
		"LEASH_HTTP_TLS_CERT_FILE="+pki.serverCert, "LEASH_HTTP_TLS_KEY_FILE="+pki.srvKey,
		"LEASH_GRPC_TLS_CERT_FILE="+pki.serverCert, "LEASH_GRPC_TLS_KEY_FILE="+pki.srvKey,
		"LEASH_GRPC_TLS_CLIENT_CA_FILE="+pki.caFile)

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}}
	resp, err := hc.Get("https://" + p.http + "/v1/namespaces/n/rules")
	if err != nil {
		t.Fatalf("HTTPS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 { // no API key: the TLS handshake and routing worked
		t.Fatalf("HTTPS status %d", resp.StatusCode)
	}

	try := func(certs []tls.Certificate) error {
		creds := credentials.NewTLS(&tls.Config{RootCAs: pki.pool, Certificates: certs})
		conn, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, rlsReq("n", entry("k", "v")))
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
