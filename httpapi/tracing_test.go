package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/httpapi"
	"github.com/leashd/leash/metrics"
	"github.com/leashd/leash/tracing"
)

// TestTracingSpans: with tracing on, each request is one server span named by its route
// pattern, carrying the decision (outcome, algorithm, namespace, account) or the error
// code, with the store operations as child spans; neither the lease id (it encodes the
// key) nor the key nor the API key appears in any attribute (spec §12.8).
func TestTracingSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := tracing.NewWithProcessor(rec, tracing.Options{SamplingRatio: 1})
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	met := metrics.New()
	e := newEnv(t, func(s engine.Store) engine.Store { return met.InstrumentTraced(s, tr.Tracer()) })
	e.api = httpapi.New(httpapi.Options{Engine: e.eng, Metrics: met, Tracing: tr})

	check := `{"namespace":"shop","key":"secret-user-key","algorithm":"token_bucket","limit":1,"window_ms":60000}`
	e.post("/v1/limit", keyAcme, check)
	e.post("/v1/limit", keyAcme, check)
	e.post("/v1/limit", keyAcme, `{"namespace":"shop","key":"k","limit":0}`)
	lease := e.post("/v1/leases", keyAcme, `{"namespace":"jobs","key":"secret-lease-key","limit":1,"window_ms":60000}`)
	id, _ := lease.obj(t)["lease_id"].(string)
	if id == "" {
		t.Fatalf("no lease: %s", lease.body)
	}
	e.del("/v1/leases/"+id, keyAcme)
	e.do(req{method: http.MethodGet, path: "/v1/nowhere", key: keyAcme})
	e.get("/v1/namespaces/shop/stats", keyAcme)

	type want struct {
		name  string
		attrs map[string]string
	}
	wants := []want{
		{"POST /v1/limit", map[string]string{"leash.outcome": "allowed", "leash.algorithm": "token_bucket", "leash.namespace": "shop", "leash.account": "acme", "http.response.status_code": "200"}},
		{"POST /v1/limit", map[string]string{"leash.outcome": "denied", "leash.algorithm": "token_bucket"}},
		{"POST /v1/limit", map[string]string{"leash.error_code": "invalid_request", "http.response.status_code": "400"}},
		{"POST /v1/leases", map[string]string{"leash.outcome": "allowed", "leash.algorithm": "concurrent_limit", "leash.namespace": "jobs", "leash.edge": "leases"}},
		{"DELETE /v1/leases/{lease_id}", map[string]string{"http.route": "DELETE /v1/leases/{lease_id}", "leash.account": "acme"}},
		{"unmatched", map[string]string{"http.response.status_code": "404"}},
		{"GET /v1/namespaces/{ns}/stats", map[string]string{"leash.namespace": "shop", "leash.account": "acme"}},
	}
	var servers []int
	ended := rec.Ended()
	for i, s := range ended {
		for _, kv := range s.Attributes() {
			v := kv.Value.Emit()
			for _, secret := range []string{id, "secret-user-key", "secret-lease-key", keyAcme} {
				if strings.Contains(v, secret) {
					t.Errorf("span %q attribute %s=%q carries %q", s.Name(), kv.Key, v, secret)
				}
			}
		}
		if !s.Parent().IsValid() {
			servers = append(servers, i)
		}
	}
	if len(servers) != len(wants) {
		t.Fatalf("%d server spans, want %d", len(servers), len(wants))
	}
	for n, i := range servers {
		s, w := ended[i], wants[n]
		if s.Name() != w.name {
			t.Errorf("span %d = %q, want %q", n, s.Name(), w.name)
		}
		got := map[string]string{}
		for _, kv := range s.Attributes() {
			got[string(kv.Key)] = kv.Value.Emit()
		}
		for k, v := range w.attrs {
			if got[k] != v {
				t.Errorf("span %d (%s) %s = %q, want %q; all %v", n, s.Name(), k, got[k], v, got)
			}
		}
	}
	// The first check's store operations are its children.
	first := ended[servers[0]].SpanContext().SpanID()
	spends := 0
	for _, s := range ended {
		if s.Parent().SpanID() == first && s.Name() == "store.spend" {
			spends++
		}
	}
	if spends != 1 {
		t.Errorf("the first check has %d store.spend children, want 1", spends)
	}
}

// TestTracingOffAddsNoAllocation: with tracing off, a /v1/limit request through the timed
// store decorator allocates no more than over the bare store; with tracing on but the
// request unsampled, it allocates no more than with tracing off apart from starting the
// (non-recording) server span itself: no attribute is built for a span that does not
// record (spec §12.8). Requests that the engine refuses (an error code to annotate) are
// measured too.
func TestTracingOffAddsNoAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under -race (sync.Pool drops items at random)")
	}
	allocs := func(wrap func(engine.Store) engine.Store, tr *tracing.Tracing, payload string) float64 {
		e := newEnv(t, wrap)
		if tr != nil {
			e.api = httpapi.New(httpapi.Options{Engine: e.eng, Tracing: tr})
		}
		r := httptest.NewRequest(http.MethodPost, "/v1/limit", nil)
		r.Header.Set("Authorization", "Bearer "+keyScale)
		r.Header.Set("Content-Type", "application/json")
		body := rewindBody{bytes.NewReader([]byte(payload))}
		r.Body, r.ContentLength = body, int64(len(payload))
		w := &benchWriter{h: make(http.Header)}
		return testing.AllocsPerRun(200, func() {
			_, _ = body.Seek(0, 0)
			clear(w.h)
			e.api.ServeHTTP(w, r)
		})
	}
	allowed := `{"namespace":"bench","key":"user-42","algorithm":"fixed_window","limit":1000000000,"window_ms":60000}`
	bare := allocs(nil, nil, allowed)
	met := metrics.New()
	if timed := allocs(func(s engine.Store) engine.Store { return met.InstrumentTraced(s, nil) }, nil, allowed); timed > bare {
		t.Fatalf("a request allocates %v times through the decorator with tracing off, %v without", timed, bare)
	}

	tr := tracing.NewWithProcessor(tracetest.NewSpanRecorder(), tracing.Options{SamplingRatio: 0})
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	r := httptest.NewRequest(http.MethodPost, "/v1/limit", nil)
	start := testing.AllocsPerRun(200, func() {
		_, span := tr.StartHTTP(r)
		span.End()
	})
	for _, c := range []struct{ name, payload string }{
		{"allowed", allowed},
		{"invalid", `{"namespace":"bench","key":"user-42","limit":0}`},
	} {
		off := allocs(nil, nil, c.payload)
		unsampled := allocs(nil, tr, c.payload)
		if unsampled > off+start {
			t.Errorf("%s: an unsampled request allocates %v times, %v with tracing off plus %v to start its span", c.name, unsampled, off, start)
		}
	}
}

// abortStore aborts the request (http.ErrAbortHandler) on rule reads.
type abortStore struct{ engine.Store }

func (abortStore) Rules(context.Context, string, string) (engine.Rules, error) {
	panic(http.ErrAbortHandler)
}

// TestTracingAbortEndsSpan: a handler aborting with http.ErrAbortHandler still ends the
// request's span (marked failed) before the panic reaches the server.
func TestTracingAbortEndsSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := tracing.NewWithProcessor(rec, tracing.Options{SamplingRatio: 1})
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	e := newEnv(t, func(s engine.Store) engine.Store { return abortStore{s} })
	e.api = httpapi.New(httpapi.Options{Engine: e.eng, Tracing: tr})
	r := httptest.NewRequest(http.MethodGet, pRules, nil)
	r.Header.Set("Authorization", "Bearer "+keyAcme)
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Fatalf("recovered %v, want http.ErrAbortHandler", v)
			}
		}()
		e.api.ServeHTTP(httptest.NewRecorder(), r)
	}()
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want the request's one", len(ended))
	}
	if s := ended[0]; s.Name() != "GET /v1/namespaces/{ns}/rules" || s.Status().Code != codes.Error {
		t.Fatalf("span %q status %v, want the route's, failed", s.Name(), s.Status())
	}
}
