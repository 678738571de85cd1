package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/leashd/leash/config"
	"github.com/leashd/leash/httpapi"
)

// TestHTTPTimeoutDefaults: with no config the /v1 server gets the documented bounds.
func TestHTTPTimeoutDefaults(t *testing.T) {
	cfg, err := config.Load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := httpapi.NewServerWith(cfg.HTTP.Addr, http.NotFoundHandler(), httpTimeouts(cfg.HTTP))
	if s.ReadHeaderTimeout != 5*time.Second || s.ReadTimeout != 30*time.Second ||
		s.WriteTimeout != 30*time.Second || s.IdleTimeout != 120*time.Second || s.MaxHeaderBytes != httpapi.TransportHeaderBytes {
		t.Fatalf("default /v1 server: header %v read %v write %v idle %v max header bytes %d",
			s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes)
	}
	cfg, err = config.Load(nil, []string{"LEASH_HTTP_READ_HEADER_TIMEOUT=1s", "LEASH_HTTP_READ_TIMEOUT=2s",
		"LEASH_HTTP_WRITE_TIMEOUT=3s", "LEASH_HTTP_IDLE_TIMEOUT=4s"})
	if err != nil {
		t.Fatal(err)
	}
	s = httpapi.NewServerWith(cfg.HTTP.Addr, http.NotFoundHandler(), httpTimeouts(cfg.HTTP))
	if s.ReadHeaderTimeout != time.Second || s.ReadTimeout != 2*time.Second || s.WriteTimeout != 3*time.Second || s.IdleTimeout != 4*time.Second {
		t.Fatalf("configured /v1 server: %v %v %v %v", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout)
	}
}
