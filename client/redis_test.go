package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/leashd/leash/client"
	"github.com/leashd/leash/testkit/redistest"
)

// TestLeasesAcrossInstances: two leash instances on one Redis share leases. A lease kept
// alive through one instance outlives its TTL, renewed again and again, and keeps the
// other's acquisition denied; once released, AcquireWait on the other gets the slot at
// once. When Redis stops, a read answers 503 unavailable, retried, then returned
// (IsUnavailable).
func TestLeasesAcrossInstances(t *testing.T) {
	r := redistest.StartServer(t, false)
	env := []string{"LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL=" + r.URL(),
		"LEASH_STORE_REDIS_READ_TIMEOUT=300ms", "LEASH_STORE_REDIS_DIAL_TIMEOUT=300ms"}
	a, b := newClient(t, startLeash(t, env...).URL, keyScale), newClient(t, startLeash(t, env...).URL, keyScale)
	ctx := context.Background()
	const window = time.Second // renewals every 333 ms, so one may come 667 ms late
	opts := []client.Option{client.WithLimit(1), client.WithWindow(window)}

	l, err := a.Acquire(ctx, "jobs", "shared", opts...)
	if err != nil {
		t.Fatal(err)
	}
	got := time.Now()
	lost := l.KeepAlive(ctx)
	renewedPastTTL(t, b, "shared", got, window)
	if rel, err := l.Release(ctx); err != nil || !rel.Released {
		t.Fatalf("Release = %+v, %v", rel, err)
	}
	if err, ok := <-lost; ok {
		t.Fatalf("KeepAlive reported %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	l2, err := b.AcquireWait(wctx, "jobs", "shared", opts...)
	if err != nil || time.Since(start) > 300*time.Millisecond {
		t.Fatalf("AcquireWait after the release = %v after %v", err, time.Since(start))
	}
	l2.Release(ctx)

	r.Stop()
	if _, err = a.Stats(ctx, "jobs"); !client.IsUnavailable(err) || !client.IsCode(err, client.CodeUnavailable) {
		t.Fatalf("Stats with Redis down = %v", err)
	}
}
