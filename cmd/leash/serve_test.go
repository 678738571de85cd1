package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
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

// TestFailedStartClosesWhatItOpened: when a start-up step fails (here the /json
// listener's port is taken), newServer names the step and closes what the steps before it
// opened: the /v1, admin and gRPC ports are free again.
func TestFailedStartClosesWhatItOpened(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var addrs []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		ln.Close()
	}
	env := []string{"LEASH_HTTP_ADDR=" + addrs[0], "LEASH_ADMIN_ADDR=" + addrs[1], "LEASH_GRPC_ADDR=" + addrs[2],
		"LEASH_ENVOY_JSON_ADDR=" + taken.Addr().String(), "LEASH_DEV_API_KEY=k",
		"LEASH_STORE_DISK_PATH=" + t.TempDir()} // the default disk store's folder, not ./leash-data in the repository
	cfg, err := config.Load(nil, env)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newServer(context.Background(), cfg, nil, env, io.Discard, slog.New(slog.DiscardHandler))
	var failed *startError
	if srv != nil || !errors.As(err, &failed) || failed.msg != "cannot listen" || !slices.Contains(failed.attrs, any("json")) {
		t.Fatalf("newServer with the /json port taken = %v, %v; want the json listener's start error", srv, err)
	}
	for _, addr := range addrs {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s is still bound after the failed start: %v", addr, err)
			continue
		}
		ln.Close()
	}
}
