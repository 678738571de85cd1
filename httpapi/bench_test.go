package httpapi_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/httpapi"
	"github.com/leashd/leash/metrics"
	"github.com/leashd/leash/tracing"
)

// benchWriter is a reusable, allocation-free http.ResponseWriter.
type benchWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }
func (w *benchWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }

// rewindBody is a request body that can be replayed.
type rewindBody struct{ *bytes.Reader }

func (rewindBody) Close() error { return nil }

// BenchmarkLimitHandler measures POST /v1/limit through ServeHTTP, on the memory store,
// with one reused request and writer: what the handler itself costs per call.
func BenchmarkLimitHandler(b *testing.B) {
	e := newEnv(b, nil)
	payload := []byte(`{"namespace":"bench","key":"user-42","algorithm":"fixed_window","limit":1000000000,"window_ms":60000}`)
	body := rewindBody{bytes.NewReader(payload)}
	r := httptest.NewRequest(http.MethodPost, "/v1/limit", nil)
	r.Header.Set("Authorization", "Bearer "+keyScale)
	r.Header.Set("Content-Type", "application/json")
	r.Body, r.ContentLength = body, int64(len(payload))
	w := &benchWriter{h: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = body.Seek(0, 0)
		clear(w.h)
		w.code = 0
		e.api.ServeHTTP(w, r)
	}
	if w.code != http.StatusOK {
		b.Fatalf("status %d", w.code)
	}
}

// BenchmarkLimitHandlerParallel is BenchmarkLimitHandler on every P, each with its own
// request and key.
func BenchmarkLimitHandlerParallel(b *testing.B) {
	e := newEnv(b, nil)
	payload := []byte(`{"namespace":"bench","key":"user-42","algorithm":"fixed_window","limit":1000000000,"window_ms":60000}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		body := rewindBody{bytes.NewReader(payload)}
		r := httptest.NewRequest(http.MethodPost, "/v1/limit", nil)
		r.Header.Set("Authorization", "Bearer "+keyScale)
		r.Header.Set("Content-Type", "application/json")
		r.Body, r.ContentLength = body, int64(len(payload))
		w := &benchWriter{h: make(http.Header)}
		for pb.Next() {
			_, _ = body.Seek(0, 0)
			clear(w.h)
			e.api.ServeHTTP(w, r)
		}
	})
}

// BenchmarkLimitHandlerTracing is BenchmarkLimitHandler with the store timed by the
// metrics decorator, tracing off and on (every span exported through a batch processor
// to a discarding exporter), at sampling ratio 1 and 0.01 for requests without a caller
// trace (docs/performance.md):
//
//	go test -run='^$' -bench=LimitHandlerTracing -benchmem ./httpapi/
func BenchmarkLimitHandlerTracing(b *testing.B) {
	for _, bc := range []struct {
		name  string
		ratio float64 // < 0: tracing off
	}{{"off", -1}, {"ratio=1", 1}, {"ratio=0.01", 0.01}} {
		b.Run(bc.name, func(b *testing.B) {
			var tr *tracing.Tracing
			if bc.ratio >= 0 {
				tr = tracing.NewWithProcessor(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()), tracing.Options{SamplingRatio: bc.ratio})
				b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
			}
			met := metrics.New()
			e := newEnv(b, func(s engine.Store) engine.Store {
				if tr == nil {
					return met.Instrument(s)
				}
				return met.InstrumentTraced(s, tr.Tracer())
			})
			api := httpapi.New(httpapi.Options{Engine: e.eng, Metrics: met, Logger: slog.New(slog.DiscardHandler), Tracing: tr})
			payload := []byte(`{"namespace":"bench","key":"user-42","algorithm":"fixed_window","limit":1000000000,"window_ms":60000}`)
			body := rewindBody{bytes.NewReader(payload)}
			r := httptest.NewRequest(http.MethodPost, "/v1/limit", nil)
			r.Header.Set("Authorization", "Bearer "+keyScale)
			r.Header.Set("Content-Type", "application/json")
			r.Body, r.ContentLength = body, int64(len(payload))
			w := &benchWriter{h: make(http.Header)}
			b.ReportAllocs()
			for b.Loop() {
				_, _ = body.Seek(0, 0)
				clear(w.h)
				w.code = 0
				api.ServeHTTP(w, r)
			}
			if w.code != http.StatusOK {
				b.Fatalf("status %d", w.code)
			}
		})
	}
}
