package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
)

// otlpReceiver is an OTLP/gRPC trace receiver: the collector's TraceService, keeping
// every span it is sent with its resource's service.name.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu      sync.Mutex
	spans   []*tracepb.Span
	service map[string]bool
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				r.service[kv.GetValue().GetStringValue()] = true
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) all() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

func startOTLPReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rcv := &otlpReceiver{service: map[string]bool{}}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, rcv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return rcv, ln.Addr().String()
}

func attrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.GetAttributes() {
		m[kv.GetKey()] = anyValue(kv.GetValue())
	}
	return m
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	}
	return v.String()
}

// TestTracingOTLPEndToEnd: a real `leash serve` with tracing.exporter otlp_grpc exports
// to a receiver the test runs. An HTTP check sent with a W3C traceparent and an Envoy
// ShouldRateLimit call sent with B3 headers arrive as server spans of the callers' traces
// (parented to the callers' span ids), carrying the decision, with store operations as
// child spans; with sampling_ratio 0 a call without a trace context makes no span; no
// attribute carries the API key, the request key or a descriptor value; and the spans
// still buffered at SIGTERM are flushed before the process exits (spec §12.8).
func TestTracingOTLPEndToEnd(t *testing.T) {
	rcv, endpoint := startOTLPReceiver(t)
	dir := t.TempDir()
	descDir := filepath.Join(dir, "ratelimit")
	if err := os.Mkdir(descDir, 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.ReplaceFile(t, filepath.Join(descDir, "edge.yaml"), "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")
	cfgFile := filepath.Join(dir, "leash.yaml")
	testkit.ReplaceFile(t, cfgFile, fmt.Sprintf(`accounts:
  - {id: acme, plan: pro, api_keys: [secret-api-key-1]}
envoy:
  config_paths: [%s]
  domains: {edge: {account: acme}}
tracing:
  exporter: otlp_grpc
  endpoint: %s
  insecure: true
  sampling_ratio: 0
  service_name: leash-e2e
`, descDir, endpoint))
	// The batch processor's default delay (5 s) outlasts the test: what arrives is what
	// the shutdown flushed.
	p := leashproc.Start(t, binary, []string{"--config", cfgFile}, "LEASH_SHUTDOWN_DRAIN_DELAY=100ms")

	const (
		httpTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
		httpParent = "00f067aa0ba902b7"
		grpcTrace  = "463ac35c9f6413ad48485a3953bb6124"
		grpcParent = "0020000000000001"
	)
	req, _ := http.NewRequest("POST", p.URL+"/v1/limit",
		strings.NewReader(`{"namespace":"shop","key":"request-key-xyz","algorithm":"fixed_window","limit":5,"window_ms":60000}`))
	req.Header.Set("Authorization", "Bearer secret-api-key-1")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+httpTrace+"-"+httpParent+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("traced check = %d", resp.StatusCode)
	}
	// Not sampled: no trace context, and sampling_ratio 0.
	if code, _ := leashproc.Call(t, "POST", p.URL+"/v1/limit", "secret-api-key-1", `{"namespace":"untraced","key":"k","limit":5,"window_ms":60000}`); code != 200 {
		t.Fatalf("untraced check = %d", code)
	}

	c := leashproc.DialRLS(t, p.GRPC)
	ctx := metadata.AppendToOutgoingContext(context.Background(),
		"x-b3-traceid", grpcTrace, "x-b3-spanid", grpcParent, "x-b3-sampled", "1")
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		r, err := c.ShouldRateLimit(ctx, leashproc.Request("edge", leashproc.Entry("user", "descriptor-value-abc")))
		if err != nil || r.OverallCode != want {
			t.Fatalf("traced ShouldRateLimit %d = %v, %v; want %v", i, r, err, want)
		}
	}

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.Exited:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("leash did not exit after SIGTERM")
	}

	spans := rcv.all()
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[hex.EncodeToString(s.GetSpanId())] = s
		for k, v := range attrs(s) {
			for _, secret := range []string{"secret-api-key-1", "request-key-xyz", "descriptor-value-abc"} {
				if strings.Contains(v, secret) || strings.Contains(s.GetName(), secret) {
					t.Errorf("span %q attribute %s=%q carries %q", s.GetName(), k, v, secret)
				}
			}
		}
	}
	rcv.mu.Lock()
	if !rcv.service["leash-e2e"] {
		t.Errorf("no resource with service.name leash-e2e: %v", rcv.service)
	}
	rcv.mu.Unlock()

	find := func(trace, name string) []*tracepb.Span {
		var out []*tracepb.Span
		for _, s := range spans {
			if hex.EncodeToString(s.GetTraceId()) == trace && s.GetName() == name {
				out = append(out, s)
			}
		}
		return out
	}
	children := func(parent *tracepb.Span, name string) int {
		n := 0
		for _, s := range spans {
			if s.GetName() == name && string(s.GetParentSpanId()) == string(parent.GetSpanId()) {
				n++
			}
		}
		return n
	}
	names := func() []string {
		var out []string
		for _, s := range spans {
			out = append(out, s.GetName()+"@"+hex.EncodeToString(s.GetTraceId()))
		}
		return out
	}

	hs := find(httpTrace, "POST /v1/limit")
	if len(hs) != 1 {
		t.Fatalf("HTTP spans of trace %s: %d; all spans: %v", httpTrace, len(hs), names())
	}
	h := hs[0]
	if got := hex.EncodeToString(h.GetParentSpanId()); got != httpParent {
		t.Errorf("HTTP span parent = %s, want the caller's %s", got, httpParent)
	}
	if h.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("HTTP span kind = %v", h.GetKind())
	}
	want := map[string]string{"leash.outcome": "allowed", "leash.namespace": "shop", "leash.algorithm": "fixed_window",
		"leash.account": "acme", "leash.edge": "limit", "http.route": "POST /v1/limit", "http.response.status_code": "200"}
	for k, v := range want {
		if got := attrs(h)[k]; got != v {
			t.Errorf("HTTP span %s = %q, want %q (all: %v)", k, got, v, attrs(h))
		}
	}
	if children(h, "store.spend") != 1 {
		t.Errorf("HTTP span has no store.spend child; spans: %v", names())
	}
	for _, s := range spans {
		if s.GetName() == "POST /v1/limit" && hex.EncodeToString(s.GetTraceId()) != httpTrace {
			t.Errorf("an unsampled request made a span (trace %x)", s.GetTraceId())
		}
	}

	gs := find(grpcTrace, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
	if len(gs) != 2 {
		t.Fatalf("gRPC spans of trace %s: %d; all spans: %v", grpcTrace, len(gs), names())
	}
	outcomes := map[string]bool{}
	for _, g := range gs {
		if got := hex.EncodeToString(g.GetParentSpanId()); got != grpcParent {
			t.Errorf("gRPC span parent = %s, want the caller's %s", got, grpcParent)
		}
		a := attrs(g)
		for k, v := range map[string]string{"leash.domain": "edge", "leash.account": "acme", "leash.algorithm": "fixed_window",
			"rpc.system.name": "grpc", "rpc.response.status_code": "OK", "leash.descriptors": "1"} {
			if a[k] != v {
				t.Errorf("gRPC span %s = %q, want %q (all: %v)", k, a[k], v, a)
			}
		}
		outcomes[a["leash.outcome"]] = true
		if children(g, "store.spend") != 1 {
			t.Errorf("gRPC span has no store.spend child; spans: %v", names())
		}
	}
	if !outcomes["allowed"] || !outcomes["denied"] {
		t.Errorf("gRPC span outcomes = %v, want allowed and denied", outcomes)
	}
}
