package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestEndpoints(t *testing.T) {
	var storeDown atomic.Bool
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "leash_test_total", Help: "t"})
	reg.MustRegister(c)
	c.Inc()
	h := New(Options{Gatherer: reg, Ping: func(context.Context) error {
		if storeDown.Load() {
			return errors.New("down")
		}
		return nil
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz = %d", code)
	}
	if code, _ := get("/readyz"); code != 200 || !h.Ready(context.Background()) {
		t.Fatalf("readyz with store up = %d", code)
	}
	storeDown.Store(true)
	if code, body := get("/readyz"); code != 503 || strings.Contains(body, "down") || h.Ready(context.Background()) {
		t.Fatalf("readyz with store down = %d %q", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz must not depend on the store, got %d", code)
	}
	storeDown.Store(false)
	h.Drain()
	if code, _ := get("/readyz"); code != 503 || h.Ready(context.Background()) {
		t.Fatalf("readyz while draining = %d", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "leash_test_total 1") {
		t.Fatalf("metrics = %d %q", code, body)
	}
	if code, _ := get("/debug/pprof/"); code != 404 {
		t.Fatalf("pprof must be off by default, got %d", code)
	}
}

func TestPprofWhenEnabled(t *testing.T) {
	srv := httptest.NewServer(New(Options{Gatherer: prometheus.NewRegistry(), Pprof: true, Ping: func(context.Context) error { return nil }}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("pprof enabled = %d", resp.StatusCode)
	}
}
