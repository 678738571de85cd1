package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leashd/leash/client"
	"github.com/leashd/leash/testkit"
)

// renewedPastTTL polls an acquisition of jobs/key through c, denied every time, until the
// lease holding the slot ends more than two TTLs after got (when its Acquire returned):
// then it was renewed after its first TTL had run out, held all along. Each probe's own
// send time bounds the lease's end from below, so no fixed sleep races the renewals.
func renewedPastTTL(t *testing.T, c *client.Client, key string, got time.Time, ttl time.Duration) {
	t.Helper()
	testkit.Eventually(t, "a renewal after the lease's first TTL", 5*ttl, func() bool {
		sent := time.Now()
		_, err := c.Acquire(context.Background(), "jobs", key, client.WithLimit(1), client.WithWindow(ttl))
		var d *client.DeniedError
		if !errors.As(err, &d) {
			t.Fatalf("the kept-alive lease expired: second acquire = %v", err)
		}
		return sent.Add(d.Reset).Sub(got) > 2*ttl
	})
}

// TestKeepAlive: a kept-alive lease outlives its TTL, renewed again and again; Release
// stops the renewals and frees the slot; the channel closes without an error.
func TestKeepAlive(t *testing.T) {
	p := startLeash(t)
	c := newClient(t, p.URL, keyScale)
	ctx := context.Background()
	// A TTL of 1 s renews every 333 ms: a renewal may come 667 ms late on a loaded machine.
	const window = time.Second
	ttl := client.WithWindow(window)
	l, err := c.Acquire(ctx, "jobs", "k", client.WithLimit(1), ttl)
	if err != nil {
		t.Fatal(err)
	}
	got := time.Now()
	lost := l.KeepAlive(ctx)
	if l.KeepAlive(ctx) != lost {
		t.Fatal("a second KeepAlive started another renewer")
	}
	renewedPastTTL(t, c, "k", got, window)
	rel, err := l.Release(ctx)
	if err != nil || !rel.Released {
		t.Fatalf("Release = %+v, %v", rel, err)
	}
	select {
	case err, ok := <-lost:
		if ok {
			t.Fatalf("KeepAlive reported %v after Release", err)
		}
	case <-time.After(time.Second):
		t.Fatal("KeepAlive's channel not closed after Release")
	}
	l2, err := c.Acquire(ctx, "jobs", "k", client.WithLimit(1), ttl)
	if err != nil {
		t.Fatalf("slot not free after Release: %v", err)
	}
	l2.Release(ctx)
}

// TestKeepAliveReportsLoss: a lease released behind KeepAlive's back is reported lost.
func TestKeepAliveReportsLoss(t *testing.T) {
	p := startLeash(t)
	c := newClient(t, p.URL, keyScale)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "jobs", "k", client.WithLimit(1), client.WithWindow(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	lost := l.KeepAlive(ctx)
	if _, err := c.Release(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lost:
		if !errors.Is(err, client.ErrLeaseLost) {
			t.Fatalf("KeepAlive reported %v, want ErrLeaseLost", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the lost lease was not reported")
	}
	if _, ok := <-lost; ok {
		t.Fatal("channel not closed after the report")
	}
	if rel, err := l.Release(ctx); err != nil || rel.Released {
		t.Fatalf("Release of a lost lease = %+v, %v", rel, err)
	}
}

// TestKeepAliveStopsWithContext: ending KeepAlive's context stops the renewals; the lease
// then expires.
func TestKeepAliveStopsWithContext(t *testing.T) {
	p := startLeash(t)
	c := newClient(t, p.URL, keyScale)
	ctx, cancel := context.WithCancel(context.Background())
	opts := []client.Option{client.WithLimit(1), client.WithWindow(300 * time.Millisecond)}
	l, err := c.Acquire(ctx, "jobs", "k", opts...)
	if err != nil {
		t.Fatal(err)
	}
	lost := l.KeepAlive(ctx)
	cancel()
	if _, ok := <-lost; ok {
		t.Fatal("an error reported on cancel")
	}
	// No renewal comes once the channel is closed, so the slot frees within the TTL.
	var l2 *client.Lease
	testkit.Eventually(t, "the slot free after KeepAlive stopped and the lease's TTL passed", 3*time.Second, func() bool {
		l2, err = c.Acquire(context.Background(), "jobs", "k", opts...)
		if err != nil && !client.IsDenied(err) {
			t.Fatal(err)
		}
		return err == nil
	})
	l2.Release(context.Background())
}

// TestAcquireWait: waits for the holder's lease to end; gives up with the denial when the
// deadline comes first.
func TestAcquireWait(t *testing.T) {
	p := startLeash(t)
	c := newClient(t, p.URL, keyScale)
	opts := []client.Option{client.WithLimit(1), client.WithWindow(500 * time.Millisecond)}
	if _, err := c.Acquire(context.Background(), "jobs", "k", opts...); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.AcquireWait(short, "jobs", "k", opts...); !client.IsDenied(err) || time.Since(start) > 300*time.Millisecond {
		t.Fatalf("AcquireWait with a short deadline = %v after %v", err, time.Since(start))
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel2()
	l, err := c.AcquireWait(ctx, "jobs", "k", opts...)
	if err != nil {
		t.Fatalf("AcquireWait = %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 2*time.Second {
		t.Fatalf("slot came after %v; the first lease's TTL is 500 ms", d)
	}
	l.Release(ctx)
}
