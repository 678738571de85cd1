package metrics_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leashd/leash/metrics"
)

// TestGRPCObserver: each unary call is timed under its full method and status code, and a
// call of a known series allocates nothing.
func TestGRPCObserver(t *testing.T) {
	m := metrics.New()
	o := m.GRPC()
	ok := func(context.Context, any) (any, error) { return nil, nil }
	fail := func(context.Context, any) (any, error) { return nil, status.Error(codes.Unavailable, "down") }
	plain := func(context.Context, any) (any, error) { return nil, errors.New("not a status") }
	info := &grpc.UnaryServerInfo{FullMethod: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"}
	ctx := context.Background()
	for _, h := range []grpc.UnaryHandler{ok, ok, fail, plain} {
		_, _ = o.Unary(ctx, nil, info, h)
	}
	got := map[string]uint64{}
	for _, mt := range families(t, m)["leash_grpc_request_duration_seconds"].GetMetric() {
		l := labels(mt)
		if l["method"] != info.FullMethod {
			t.Errorf("method label %q", l["method"])
		}
		got[l["code"]] = mt.GetHistogram().GetSampleCount()
	}
	want := map[string]uint64{"OK": 2, "Unavailable": 1, "Unknown": 1}
	for code, n := range want {
		if got[code] != n {
			t.Errorf("code %s: %d calls, want %d (all %v)", code, got[code], n, got)
		}
	}
	if n := testing.AllocsPerRun(1000, func() { _, _ = o.Unary(ctx, nil, info, ok) }); n != 0 {
		t.Errorf("a timed call allocates %v times", n)
	}
}
