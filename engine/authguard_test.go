package engine_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
)

// TestAuthGuard: an address may fail a burst, then once per interval; other addresses are
// not affected; once an address could fail a whole burst again it is forgotten, and the
// guard tracks nothing (the lock-free path).
func TestAuthGuard(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	g := engine.NewAuthGuard(engine.AuthGuardOptions{Burst: 3, Every: time.Second, Now: func() time.Time { return now }})
	a, b := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("2001:db8::1")
	if g.Tracking() {
		t.Fatal("a new guard tracks an address")
	}
	for i := range 3 {
		if _, ok := g.Check(a); !ok {
			t.Fatalf("failure %d refused within the burst", i+1)
		}
		g.Failed(a)
	}
	if wait, ok := g.Check(a); ok || wait != 1 {
		t.Fatalf("after the burst: Check = %d, %v; want refused, retry after 1 s", wait, ok)
	}
	if _, ok := g.Check(b); !ok {
		t.Fatal("another address is refused")
	}
	now = now.Add(time.Second)
	if _, ok := g.Check(a); !ok {
		t.Fatal("one more try is not allowed after 1 s")
	}
	g.Failed(a)
	if _, ok := g.Check(a); ok {
		t.Fatal("two tries allowed after 1 s")
	}
	if g.Failures() != 4 || g.Refused() != 2 {
		t.Errorf("Failures %d, Refused %d; want 4, 2", g.Failures(), g.Refused())
	}
	now = now.Add(time.Minute) // the whole burst is back, and a sweep is due
	if _, ok := g.Check(a); !ok || g.Tracking() {
		t.Fatalf("a minute later: allowed %v, still tracking %v", ok, g.Tracking())
	}
}
