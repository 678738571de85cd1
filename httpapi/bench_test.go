package httpapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
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
