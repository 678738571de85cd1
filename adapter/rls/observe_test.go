package rls_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/leashd/leash/adapter/rls"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/tracing"
)

// edgeCounts are what rls.Counters counted.
type edgeCounts struct{ allowed, denied, shadow atomic.Int64 }

func (c *edgeCounts) want(t *testing.T, after string, allowed, denied, shadow int64) {
	t.Helper()
	if a, d, s := c.allowed.Load(), c.denied.Load(), c.shadow.Load(); a != allowed || d != denied || s != shadow {
		t.Errorf("after %s: allowed %d denied %d shadow %d, want %d, %d and %d", after, a, d, s, allowed, denied, shadow)
	}
}

// observedEdge is a service counted in c and served both ways the binary serves it: gRPC
// (NewServerWith, under tracing's interceptors, every span recorded) and /json.
type observedEdge struct {
	h      *harness
	counts *edgeCounts
	spans  *tracetest.SpanRecorder
	client rlsv3.RateLimitServiceClient
	json   string // the /json URL
}

func newObservedEdge(t *testing.T, plan engine.Plan) *observedEdge {
	t.Helper()
	e := &observedEdge{counts: &edgeCounts{}, spans: tracetest.NewSpanRecorder()}
	c := e.counts
	e.h = newHarnessWith(t, plan, map[string]string{"edge.yaml": "domain: edge\ndescriptors:\n" +
		"  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1}\n" +
		"  - key: shadow\n    shadow_mode: true\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"}, harnessOptions{
		adapter: func(o *rls.Options) {
			o.Trace = true
			o.Counters = rls.Counters{
				Decision: func(allowed bool) {
					if allowed {
						c.allowed.Add(1)
					} else {
						c.denied.Add(1)
					}
				},
				ShadowDenial: func() { c.shadow.Add(1) },
			}
		},
	})
	tr := tracing.NewWithProcessor(e.spans, tracing.Options{SamplingRatio: 1})
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	srv, _ := rls.NewServerWith(e.h.svc, nil, rls.Limits{}, tr.ServerOptions()...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	e.client = rlsv3.NewRateLimitServiceClient(conn)
	js := httptest.NewServer(rls.NewJSONHandler(e.h.svc, rls.JSONOptions{}))
	t.Cleanup(js.Close)
	e.json = js.URL + "/json"
	return e
}

// postJSON sends req to /json and returns the HTTP status.
func (e *observedEdge) postJSON(t *testing.T, req *rlsv3.RateLimitRequest) int {
	t.Helper()
	body, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(e.json, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// lastSpan returns the attributes of the last span ended, and how many have ended.
func (e *observedEdge) lastSpan(t *testing.T) (map[string]string, int) {
	t.Helper()
	ended := e.spans.Ended()
	if len(ended) == 0 {
		t.Fatal("no span ended")
	}
	return spanAttrs(ended[len(ended)-1]), len(ended)
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

func wantAttrs(t *testing.T, call string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: span %s = %q, want %q (all: %v)", call, k, got[k], v, got)
		}
	}
}

func twoDescriptors(user, shadow string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", user), desc("shadow", shadow)}}
}

// TestEveryCallPathCounted: a ShouldRateLimit call is counted whichever way it comes, gRPC
// or /json, each decided descriptor once (spec §12.2), and a gRPC call's span carries its
// outcome (spec §12.8); a call refused before a decision counts nothing, and one the
// store fails carries its error code.
func TestEveryCallPathCounted(t *testing.T) {
	e := newObservedEdge(t, scalePlan())
	ctx := context.Background()

	// gRPC: both descriptors allowed, then user denied and shadow denied but answered OK.
	for _, want := range []rlsv3.RateLimitResponse_Code{ok, over} {
		resp, err := e.client.ShouldRateLimit(ctx, twoDescriptors("grpc", "grpc"))
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("gRPC: %v %v, want %v", resp, err, want)
		}
	}
	e.counts.want(t, "two gRPC calls", 2, 2, 1)
	attrs, spans := e.lastSpan(t)
	wantAttrs(t, "the denied gRPC call", attrs, map[string]string{"leash.edge": "envoy", "leash.domain": "edge", "leash.account": "acme",
		"leash.outcome": "denied", "leash.algorithm": "fixed_window", "leash.descriptors": "2", "leash.denied": "2"})

	// /json: the same on its own counters.
	for _, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		if code := e.postJSON(t, twoDescriptors("json", "json")); code != want {
			t.Fatalf("/json answered %d, want %d", code, want)
		}
	}
	e.counts.want(t, "two /json calls", 4, 4, 2)

	// A domain with no account: OK, counted nowhere, its span unannotated.
	if _, err := e.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "stray", Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "x")}}); err != nil {
		t.Fatal(err)
	}
	e.counts.want(t, "a call of an unmapped domain", 4, 4, 2)
	if attrs, n := e.lastSpan(t); n != spans+1 || attrs["leash.domain"] != "" || attrs["leash.outcome"] != "" {
		t.Errorf("the unmapped domain's span: %v (%d spans ended, want %d)", attrs, n, spans+1)
	}

	// The store down: UNAVAILABLE, counted nowhere, the span carries the code.
	e.h.store.down.Store(true)
	if _, err := e.client.ShouldRateLimit(ctx, twoDescriptors("down", "down")); status.Code(err) != codes.Unavailable {
		t.Fatalf("store down: %v, want UNAVAILABLE", err)
	}
	if code := e.postJSON(t, twoDescriptors("down", "down")); code != http.StatusServiceUnavailable {
		t.Fatalf("/json with the store down: %d", code)
	}
	e.counts.want(t, "calls the store failed", 4, 4, 2)
	attrs, _ = e.lastSpan(t)
	wantAttrs(t, "the failed call", attrs, map[string]string{"leash.error_code": "unavailable"})
}

// TestHardCapCounted: a call the hard cap refuses counts every descriptor denied, through
// gRPC and /json, and its span says why (spec §9.9, §12.8).
func TestHardCapCounted(t *testing.T) {
	plan := scalePlan()
	plan.HardCap = testkit.Ptr(int64(0)) // refuses every call
	e := newObservedEdge(t, plan)
	resp, err := e.client.ShouldRateLimit(context.Background(), twoDescriptors("a", "a"))
	if err != nil || resp.GetOverallCode() != over {
		t.Fatalf("gRPC: %v %v, want OVER_LIMIT", resp, err)
	}
	e.counts.want(t, "a hard-capped gRPC call", 0, 2, 0)
	attrs, _ := e.lastSpan(t)
	wantAttrs(t, "the hard-capped call", attrs, map[string]string{"leash.edge": "envoy", "leash.domain": "edge", "leash.account": "acme",
		"leash.outcome": "denied", "leash.error_code": "hard_cap_exceeded"})
	if code := e.postJSON(t, twoDescriptors("a", "a")); code != http.StatusTooManyRequests {
		t.Fatalf("/json answered %d, want 429", code)
	}
	e.counts.want(t, "a hard-capped /json call", 0, 4, 0)
}
