// Package admin serves the operator endpoints: /healthz, /readyz, /metrics and, when
// enabled, /debug/pprof/. None of them needs an API key (spec §12.1).
package admin

import (
	"context"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadyTimeout bounds the store ping behind /readyz.
const ReadyTimeout = 500 * time.Millisecond

// Options configures the admin handler.
type Options struct {
	// Ping reports whether the store answers; /readyz is 200 only while it does.
	Ping func(ctx context.Context) error
	// Gatherer is the Prometheus registry /metrics serves.
	Gatherer prometheus.Gatherer
	// Pprof serves /debug/pprof/ when true.
	Pprof bool
}

// Handler is the admin listener's handler; Drain turns /readyz to 503 for shutdown.
type Handler struct {
	mux      *http.ServeMux
	ping     func(ctx context.Context) error
	draining atomic.Bool
}

// New builds the admin handler.
func New(opts Options) *Handler {
	h := &Handler{mux: http.NewServeMux(), ping: opts.Ping}
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeStatus(w, http.StatusOK, "ok")
	})
	h.mux.HandleFunc("GET /readyz", h.readyz)
	h.mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}))
	if opts.Pprof {
		h.mux.HandleFunc("/debug/pprof/", pprof.Index)
		h.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		h.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		h.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		h.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return h
}

// Drain makes /readyz answer 503 from now on, so load balancers stop sending traffic.
func (h *Handler) Drain() { h.draining.Store(true) }

// Ready reports what /readyz would answer: not draining, and the store answers a ping
// within ReadyTimeout.
func (h *Handler) Ready(ctx context.Context) bool {
	return h.readiness(ctx) == "ready"
}

// readiness is the /readyz status: ready, draining or store unavailable.
func (h *Handler) readiness(ctx context.Context) string {
	if h.draining.Load() {
		return "draining"
	}
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	if err := h.ping(ctx); err != nil {
		return "store unavailable"
	}
	return "ready"
}

func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	st := h.readiness(r.Context())
	if st != "ready" {
		writeStatus(w, http.StatusServiceUnavailable, st)
		return
	}
	writeStatus(w, http.StatusOK, st)
}

func writeStatus(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(`{"status":"` + status + `"}` + "\n"))
}

// ServeHTTP serves the admin endpoints.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }
