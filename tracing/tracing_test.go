package tracing_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/tracing"
)

const (
	traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentID = "00f067aa0ba902b7"
)

func recorded(t *testing.T, ratio float64) (*tracing.Tracing, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tr := tracing.NewWithProcessor(rec, tracing.Options{SamplingRatio: ratio, ServiceName: "svc"})
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, rec
}

func TestNewNoneIsOff(t *testing.T) {
	for _, exp := range []string{"", tracing.ExporterNone} {
		tr, err := tracing.New(context.Background(), tracing.Options{Exporter: exp})
		if tr != nil || err != nil {
			t.Fatalf("exporter %q: %v, %v; want nil, nil", exp, tr, err)
		}
		if tr.ServerOptions() != nil || tr.Shutdown(context.Background()) != nil {
			t.Fatal("a nil Tracing must add no server options and shut down cleanly")
		}
	}
	if _, err := tracing.New(context.Background(), tracing.Options{Exporter: "zipkin"}); err == nil {
		t.Fatal("an unknown exporter must be an error")
	}
	for _, exp := range []string{tracing.ExporterOTLPGRPC, tracing.ExporterOTLPHTTP} {
		tr, err := tracing.New(context.Background(), tracing.Options{Exporter: exp, Endpoint: "127.0.0.1:1", Insecure: true, SamplingRatio: 1})
		if err != nil || tr == nil {
			t.Fatalf("%s: %v", exp, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = tr.Shutdown(ctx) // nothing to flush; the receiver need not exist
		cancel()
	}
}

// TestHTTPPropagation: a request continues the caller's trace from W3C traceparent, B3
// single header or B3 multiple headers; without one a new trace starts unless the ratio
// is 0.
func TestHTTPPropagation(t *testing.T) {
	cases := []struct {
		name    string
		headers map[string]string
		ratio   float64
		want    bool // a span is recorded, in the caller's trace
	}{
		{"traceparent", map[string]string{"traceparent": "00-" + traceID + "-" + parentID + "-01"}, 0, true},
		{"b3 single", map[string]string{"b3": traceID + "-" + parentID + "-1"}, 0, true},
		{"b3 multi", map[string]string{"X-B3-TraceId": traceID, "X-B3-SpanId": parentID, "X-B3-Sampled": "1"}, 0, true},
		{"caller not sampled", map[string]string{"traceparent": "00-" + traceID + "-" + parentID + "-00"}, 1, false},
		{"no context, ratio 0", nil, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, rec := recorded(t, tc.ratio)
			r := httptest.NewRequest("POST", "/v1/leases/l1.secret/renew", nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			_, span := tr.StartHTTP(r)
			tracing.EndHTTP(span, "POST /v1/leases/{lease_id}/renew", 503)
			ended := rec.Ended()
			if !tc.want {
				if len(ended) != 0 {
					t.Fatalf("%d spans recorded, want none", len(ended))
				}
				return
			}
			if len(ended) != 1 {
				t.Fatalf("%d spans recorded, want 1", len(ended))
			}
			s := ended[0]
			if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != parentID {
				t.Fatalf("span in trace %s under %s, want %s under %s", s.SpanContext().TraceID(), s.Parent().SpanID(), traceID, parentID)
			}
			if s.Name() != "POST /v1/leases/{lease_id}/renew" || s.SpanKind() != trace.SpanKindServer || s.Status().Code.String() != "Error" {
				t.Fatalf("span %q kind %v status %v", s.Name(), s.SpanKind(), s.Status())
			}
			for _, kv := range s.Attributes() {
				if v := kv.Value.Emit(); v == r.URL.Path {
					t.Fatalf("attribute %s carries the path (lease ids encode keys)", kv.Key)
				}
			}
		})
	}
}

// TestChildOnlyUnderRecordingSpan: store operations get a span only inside a sampled
// request.
func TestChildOnlyUnderRecordingSpan(t *testing.T) {
	tr, rec := recorded(t, 1)
	if _, span := tracing.StartChild(context.Background(), tr.Tracer(), "store.spend"); span != nil {
		t.Fatal("a child span without a parent")
	}
	ctx, parent := tr.Tracer().Start(context.Background(), "req")
	_, span := tracing.StartChild(ctx, tr.Tracer(), "store.spend")
	tracing.EndChild(span, errors.New("redis: key user-42 unreachable"))
	parent.End()
	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Name() != "store.spend" || ended[0].Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("spans %v", ended)
	}
	if d := ended[0].Status().Description; d != "error" {
		t.Fatalf("status description %q: an error's text may name a key", d)
	}
	tracing.EndChild(nil, nil) // nil-safe
}

// TestGRPCInterceptors: every service of a server gets spans, unary and streaming, in the
// caller's trace from B3 or traceparent metadata, with the status code.
func TestGRPCInterceptors(t *testing.T) {
	tr, rec := recorded(t, 0)
	srv := grpc.NewServer(tr.ServerOptions()...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
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
	c := healthpb.NewHealthClient(conn)

	b3 := metadata.AppendToOutgoingContext(context.Background(), "x-b3-traceid", traceID, "x-b3-spanid", parentID, "x-b3-sampled", "1")
	if _, err := c.Check(b3, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	w3c := metadata.AppendToOutgoingContext(context.Background(), "traceparent", "00-"+traceID+"-"+parentID+"-01")
	if _, err := c.Check(w3c, &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown service: %v", err)
	}
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil { // unsampled: ratio 0
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b3)
	stream, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	testkit.Eventually(t, "three spans ended", 5*time.Second, func() bool { return len(rec.Ended()) >= 3 })
	ended := rec.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans, want 3 (two Checks, one Watch)", len(ended))
	}
	got := map[string]string{}
	for _, s := range ended {
		if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != parentID {
			t.Fatalf("span %q not in the caller's trace", s.Name())
		}
		for _, kv := range s.Attributes() {
			if kv.Key == "rpc.response.status_code" {
				got[s.Name()+" "+kv.Value.AsString()] = ""
			}
		}
	}
	for _, want := range []string{"grpc.health.v1.Health/Check OK", "grpc.health.v1.Health/Check NOT_FOUND", "grpc.health.v1.Health/Watch CANCELLED"} {
		if _, ok := got[want]; !ok {
			t.Errorf("no span %q; got %v", want, got)
		}
	}
}

// TestOTLPHTTPExporter: with otlp_http, finished spans reach an OTLP/HTTP receiver at
// /v1/traces (protobuf) when the provider shuts down, for an endpoint given as host:port
// and as a URL.
func TestOTLPHTTPExporter(t *testing.T) {
	for _, form := range []string{"host:port", "url"} {
		t.Run(form, func(t *testing.T) {
			got := make(chan *coltracepb.ExportTraceServiceRequest, 4)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				req := &coltracepb.ExportTraceServiceRequest{}
				if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, req) != nil {
					http.Error(w, "bad export", http.StatusBadRequest)
					return
				}
				got <- req
				w.Header().Set("Content-Type", "application/x-protobuf")
				b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
				_, _ = w.Write(b)
			}))
			defer srv.Close()
			endpoint := strings.TrimPrefix(srv.URL, "http://")
			if form == "url" {
				endpoint = srv.URL + "/v1/traces"
			}
			tr, err := tracing.New(context.Background(), tracing.Options{Exporter: tracing.ExporterOTLPHTTP, Endpoint: endpoint,
				Insecure: true, SamplingRatio: 1, ServiceName: "leash-http"})
			if err != nil {
				t.Fatal(err)
			}
			_, span := tr.Tracer().Start(context.Background(), "op")
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tr.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case req := <-got:
				rs := req.GetResourceSpans()
				if len(rs) != 1 || len(rs[0].GetScopeSpans()) != 1 || rs[0].GetScopeSpans()[0].GetSpans()[0].GetName() != "op" {
					t.Fatalf("export %v", req)
				}
			default:
				t.Fatal("nothing exported")
			}
		})
	}
}
