package rls_test

import (
	"context"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"

	"github.com/leashd/leash/adapter/rls"

	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/tracing"
)

// TestTracingUnsampledAddsNoAllocation: with tracing on but the call unsampled, a
// ShouldRateLimit call (through the service's observing interceptor, as the server runs it)
// allocates no more than with tracing off apart from the tracing interceptor's own
// (non-recording) span: no attribute is built, and no result walked,
// for a span that does not record (spec §12.8). Both a decided call and one the hard cap
// refuses are measured.
func TestTracingUnsampledAddsNoAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under -race (sync.Pool drops items at random)")
	}
	tr := tracing.NewWithProcessor(tracetest.NewSpanRecorder(), tracing.Options{SamplingRatio: 0})
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	info := &grpc.UnaryServerInfo{FullMethod: "/" + rls.ServiceName + "/ShouldRateLimit"}
	ctx := context.Background()
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "u1")}}
	noop := func(context.Context, any) (any, error) { return nil, nil }
	start := testing.AllocsPerRun(200, func() { _, _ = tr.UnaryInterceptor(ctx, req, info, noop) })

	capped := scalePlan()
	capped.HardCap = testkit.Ptr(int64(0)) // refuses every call
	files := map[string]string{"edge.yaml": "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n"}
	allocs := func(plan engine.Plan, traced bool) float64 {
		ms := memstore.New(memstore.Options{})
		t.Cleanup(func() { _ = ms.Close() })
		dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: plan}})
		if err != nil {
			t.Fatal(err)
		}
		eng := wiring.New(engine.RolesOf(ms), dir, wiring.Options{})
		cfg := &domains.Config{Routing: domains.Routing{Domains: map[string]string{"edge": "acme"}}, Descriptors: loadFiles(t, files)}
		svc := rls.NewService(cfg, rls.Options{Engine: eng, Accounts: eng.Accounts.Account, Trace: traced})
		decide := func(ctx context.Context, req any) (any, error) {
			return svc.ShouldRateLimit(ctx, req.(*rlsv3.RateLimitRequest))
		}
		// As the server chains them: tracing outside, the service's observer inside.
		observed := func(ctx context.Context, req any) (any, error) { return svc.UnaryInterceptor(ctx, req, info, decide) }
		call := func() { _, _ = observed(ctx, req) }
		if traced {
			call = func() { _, _ = tr.UnaryInterceptor(ctx, req, info, observed) }
		}
		call()
		return testing.AllocsPerRun(200, call)
	}
	for _, c := range []struct {
		name string
		plan engine.Plan
	}{{"decided", scalePlan()}, {"hard cap", capped}} {
		off, unsampled := allocs(c.plan, false), allocs(c.plan, true)
		if unsampled > off+start {
			t.Errorf("%s: an unsampled call allocates %v times, %v with tracing off plus %v to start its span", c.name, unsampled, off, start)
		}
	}
}
