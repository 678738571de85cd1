package rls_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/leashd/leash/adapter/rls"
	"github.com/leashd/leash/testkit"
)

// TestWatchHealthCoversQuota: a registered quota service's health follows the store like
// the rate-limit service's (spec §14.1); without one, health does not report it.
func TestWatchHealthCoversQuota(t *testing.T) {
	h := newHarness(t, scalePlan(), nil)
	srv, hs := rls.NewServer(h.svc, nil)
	defer srv.Stop()
	if _, err := hs.Check(context.Background(), &healthpb.HealthCheckRequest{Service: rls.QuotaServiceName}); status.Code(err) != codes.NotFound {
		t.Fatalf("health of an unregistered quota service: %v", err)
	}
	rls.RegisterQuota(srv, hs, rlqsv3.UnimplementedRateLimitQuotaServiceServer{})
	var down atomic.Bool
	down.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rls.WatchHealth(ctx, hs, func(context.Context) error {
			if down.Load() {
				return errors.New("down")
			}
			return nil
		}, 10*time.Millisecond, 100*time.Millisecond, discardLogger())
	}()
	wait := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		testkit.Eventually(t, "quota health "+want.String(), 2*time.Second, func() bool {
			st, err := hs.Check(context.Background(), &healthpb.HealthCheckRequest{Service: rls.QuotaServiceName})
			return err == nil && st.Status == want
		})
	}
	wait(healthpb.HealthCheckResponse_NOT_SERVING)
	down.Store(false)
	wait(healthpb.HealthCheckResponse_SERVING)
	cancel()
	<-done
}
