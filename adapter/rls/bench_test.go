package rls_test

import (
	"context"
	"strconv"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"

	"github.com/leashd/leash/adapter/rls"

	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/metrics"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/tracing"
)

// BenchmarkShouldRateLimit decides one descriptor in process on the memory store (no
// network): the service's own cost per request.
//
//	go test -run='^$' -bench=ShouldRateLimit -benchmem -cpu 2 ./adapter/
func BenchmarkShouldRateLimit(b *testing.B) {
	h := newHarness(b, scalePlan(), map[string]string{"edge.yaml": "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n"})
	reqs := make([]*rlsv3.RateLimitRequest, 1000)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "u"+strconv.Itoa(i))}}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := h.svc.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchmarkShouldRateLimitTracing decides one descriptor through the tracing interceptor
// and the service's observing one, as the gRPC server runs them, with the store timed by
// the metrics decorator: tracing off (no tracing interceptor) and on at sampling ratio 1
// and 0.01 for calls without a caller trace, every span exported through a batch
// processor to a discarding exporter (docs/performance.md):
//
//	go test -run='^$' -bench=ShouldRateLimitTracing -benchmem ./adapter/
func BenchmarkShouldRateLimitTracing(b *testing.B) {
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
			ms := memstore.New(memstore.Options{})
			b.Cleanup(func() { _ = ms.Close() })
			store := met.Instrument(ms)
			if tr != nil {
				store = met.InstrumentTraced(ms, tr.Tracer())
			}
			dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: scalePlan()}})
			if err != nil {
				b.Fatal(err)
			}
			eng := wiring.New(engine.RolesOf(store), dir, wiring.Options{Observer: met.Observer(nil, 0.8)})
			cfg := &domains.Config{Routing: domains.Routing{Domains: map[string]string{"edge": "acme"}},
				Descriptors: loadFiles(b, map[string]string{"edge.yaml": "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n"})}
			svc := rls.NewService(cfg, rls.Options{Engine: eng, Accounts: eng.Accounts.Account, Rules: met.Rules(), Trace: tr != nil})
			info := &grpc.UnaryServerInfo{FullMethod: "/" + rls.ServiceName + "/ShouldRateLimit"}
			decide := func(ctx context.Context, req any) (any, error) {
				return svc.ShouldRateLimit(ctx, req.(*rlsv3.RateLimitRequest))
			}
			// The service's observer counts and annotates the call, inside tracing's.
			call := func(ctx context.Context, req any) (any, error) { return svc.UnaryInterceptor(ctx, req, info, decide) }
			if tr != nil {
				observed := call
				call = func(ctx context.Context, req any) (any, error) { return tr.UnaryInterceptor(ctx, req, info, observed) }
			}
			reqs := make([]*rlsv3.RateLimitRequest, 1000)
			for i := range reqs {
				reqs[i] = &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "u"+strconv.Itoa(i))}}
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := call(ctx, reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
