package setup

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/leashd/leash/config"
)

// RedisTLS is the TLS of the Redis connections (store.redis.tls): nil when no file is set;
// else TLS 1.2 or later, verifying the servers against ca_file (the system's roots when
// empty) and presenting cert_file and key_file when set. The files are read now.
func RedisTLS(t config.RedisTLS) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("store.redis.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("store.redis.tls.ca_file: no PEM certificate in %s", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("store.redis.tls.cert_file and key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
