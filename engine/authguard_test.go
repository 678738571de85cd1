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

// TestAuthGuardFullTableFailsClosed: while the table is full of addresses that are still
// slowed, new addresses are not let through untracked: their failures share one overflow
// allowance, and once it is spent every untracked address waits; tracked ones keep their
// own count. When entries are forgotten, new addresses are tracked again on their own.
func TestAuthGuardFullTableFailsClosed(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	g := engine.NewAuthGuard(engine.AuthGuardOptions{Burst: 2, Every: time.Second, MaxAddrs: 4, Now: func() time.Time { return now }})
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}) }
	for i := range 4 { // fill the table with slowed addresses
		g.Failed(addr(i))
		g.Failed(addr(i))
	}
	// New addresses, each trying once: together they get one burst, then are refused.
	for i := 10; i < 12; i++ {
		if _, ok := g.Check(addr(i)); !ok {
			t.Fatalf("new address %d refused before the overflow allowance was spent", i)
		}
		g.Failed(addr(i))
	}
	for i := 12; i < 20; i++ {
		if wait, ok := g.Check(addr(i)); ok || wait < 1 {
			t.Fatalf("new address %d allowed while the table is full and the overflow spent: %d %v", i, wait, ok)
		}
	}
	// A tracked address keeps its own count: refused now, allowed after its interval.
	if _, ok := g.Check(addr(0)); ok {
		t.Fatal("a slowed tracked address allowed")
	}
	now = now.Add(time.Minute) // every entry could fail a burst again: forgotten
	if _, ok := g.Check(addr(13)); !ok {
		t.Fatal("a new address still refused once the table emptied")
	}
	for i := 20; i < 24; i++ {
		g.Failed(addr(i))
		if _, ok := g.Check(addr(i)); !ok {
			t.Fatalf("address %d refused after one failure: it should have a count of its own", i)
		}
	}
}
