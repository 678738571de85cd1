package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leashd/leash/client"
)

// TestKeepAlive: a kept-alive lease outlives several TTLs; Release stops the renewals and
// frees the slot; the channel closes without an error.
func TestKeepAlive(t *testing.T) {
	p := startLeash(t)
	c := newClient(t, p.URL, keyScale)
	ctx := context.Background()
	ttl := client.WithWindow(500 * time.Millisecond)
	l, err := c.Acquire(ctx, "jobs", "k", client.WithLimit(1), ttl)
	if err != nil {
		t.Fatal(err)
	}
	lost := l.KeepAlive(ctx)
	if l.KeepAlive(ctx) != lost {
		t.Fatal("a second KeepAlive started another renewer")
	}
	time.Sleep(1700 * time.Millisecond) // more than three TTLs
	if _, err := c.Acquire(ctx, "jobs", "k", client.WithLimit(1), ttl); !client.IsDenied(err) {
		t.Fatalf("the kept-alive lease expired: second acquire = %v", err)
	}
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
	time.Sleep(600 * time.Millisecond) // the last renewal's TTL, and then some
	l2, err := c.Acquire(context.Background(), "jobs", "k", opts...)
	if err != nil {
		t.Fatalf("lease still held after KeepAlive stopped and its TTL passed: %v", err)
	}
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
