package config_test

import (
	"strings"
	"testing"

	"github.com/leashd/leash/config"
)

func TestRedisTLS(t *testing.T) {
	cfg, err := config.Load(nil, []string{"LEASH_STORE_REDIS_TLS_CA_FILE=/ca.pem", "LEASH_STORE_REDIS_TLS_CERT_FILE=/c.pem", "LEASH_STORE_REDIS_TLS_KEY_FILE=/k.pem"})
	if err != nil {
		t.Fatal(err)
	}
	if tl := cfg.Store.Redis.TLS; !tl.Enabled() || tl.CAFile != "/ca.pem" || tl.CertFile != "/c.pem" || tl.KeyFile != "/k.pem" {
		t.Fatalf("store.redis.tls = %+v", tl)
	}
	if cfg, err := config.Load(nil, nil); err != nil || cfg.Store.Redis.TLS.Enabled() {
		t.Fatalf("default store.redis.tls: %+v, %v", cfg.Store.Redis.TLS, err)
	}
	_, err = config.Load(nil, []string{"LEASH_STORE_REDIS_TLS_CERT_FILE=/c.pem"})
	if err == nil || !strings.Contains(err.Error(), "store.redis.tls: cert_file and key_file must be set together") {
		t.Fatalf("a certificate without its key: %v", err)
	}
}
