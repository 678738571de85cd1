package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leashd/leash/testkit"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock engine.Clock) engine.Store {
		s := New(Options{Clock: clock})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestConformanceOneShard runs the suite again with every key in one shard.
func TestConformanceOneShard(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock engine.Clock) engine.Store {
		s := New(Options{Clock: clock, Shards: 1, MaxEntries: 100_000})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

var ctx = context.Background()

const t0 = 1_800_057_600_000 // a multiple of one day

func newTestStore(t *testing.T, opts Options) (*Store, *testkit.FakeClock) {
	t.Helper()
	clock := testkit.NewFakeClock(time.UnixMilli(t0))
	opts.Clock = clock
	s := New(opts)
	t.Cleanup(func() { s.Close() })
	return s, clock
}

func counter(key string) engine.Counter {
	return engine.Counter{Account: "acct", Namespace: "ns", Key: key, Algorithm: engine.FixedWindow, WindowMS: 60_000}
}

func mustSpend(t testing.TB, s *Store, c engine.Counter, limit, cost int64) engine.Decision {
	t.Helper()
	d, err := s.Spend(ctx, engine.Spend{Counter: c, Limit: limit, Cost: cost})
	if err != nil {
		t.Fatalf("Spend(%q): %v", c.Key, err)
	}
	return d
}

func TestShardCount(t *testing.T) {
	for _, tt := range []struct{ max, shards, want int }{
		{0, 0, 256},
		{1_000_000, 0, 256},
		{100_000, 0, 64},
		{3, 0, 1},
		{1_000_000, 100, 64},
		{1_000_000, 1, 1},
	} {
		s := New(Options{MaxEntries: tt.max, Shards: tt.shards})
		if len(s.shards) != tt.want {
			t.Errorf("MaxEntries %d, Shards %d: %d shards, want %d", tt.max, tt.shards, len(s.shards), tt.want)
		}
		total := 0
		for i := range s.shards {
			total += s.shards[i].capacity
		}
		if want := tt.max; want > 0 && total != want {
			t.Errorf("MaxEntries %d: capacities sum to %d", tt.max, total)
		}
		s.Close()
	}
}

// TestSweeperReclaimsExpired runs in a synctest bubble: the sweeper's ticker keeps the
// bubble's fake time, so "six rounds of the sweeper" and "one round after the expiry" are
// exact, whatever the machine's load.
func TestSweeperReclaimsExpired(t *testing.T) {
	synctest.Test(t, testSweeperReclaimsExpired)
}

func testSweeperReclaimsExpired(t *testing.T) {
	s, clock := newTestStore(t, Options{SweepInterval: 5 * time.Millisecond, Shards: 2})
	for i := range 5000 {
		mustSpend(t, s, counter("k"+strconv.Itoa(i)), 10, 1)
	}
	set := engine.LeaseSet{Account: "acct", Namespace: "ns", Key: "leases"}
	if _, err := s.Acquire(ctx, set, "tok", 1, 1000); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 5001 {
		t.Fatalf("Len = %d, want 5001", n)
	}
	time.Sleep(30 * time.Millisecond) // six of the sweeper's rounds, in the bubble's fake time
	synctest.Wait()
	if n := s.Len(); n != 5001 {
		t.Fatalf("the sweeper reclaimed live state: Len = %d", n)
	}
	clock.Advance(time.Minute) // every window ends, the lease expires
	// Two rounds: a round examines up to sweepBudget counters per shard, and each of the
	// two shards holds about 2500.
	time.Sleep(10 * time.Millisecond)
	synctest.Wait()
	if n := s.Len(); n != 0 {
		t.Fatalf("two rounds of the sweeper left %d expired entries", n)
	}
	if s.Evictions() != 0 {
		t.Fatalf("expiry counted as %d evictions", s.Evictions())
	}
	// The slabs were compacted.
	slots := 0
	for i := range s.shards {
		s.shards[i].mu.Lock()
		slots += len(s.shards[i].entries)
		s.shards[i].mu.Unlock()
	}
	if slots > 1024 {
		t.Fatalf("%d counter slots kept after everything expired", slots)
	}
	// Dead keys are fresh again.
	if d := mustSpend(t, s, counter("k1"), 10, 1); d.Remaining != 9 {
		t.Fatalf("remaining %d after expiry, want 9", d.Remaining)
	}
}

func TestSweepKeepsLiveAndReusesSlots(t *testing.T) {
	s, clock := newTestStore(t, Options{Shards: 1, SweepInterval: time.Hour})
	short := engine.Counter{Account: "a", Namespace: "ns", Key: "short", Algorithm: engine.TokenBucket, WindowMS: 1000}
	long := engine.Counter{Account: "a", Namespace: "ns", Key: "long", Algorithm: engine.FixedWindow, WindowMS: 3_600_000}
	mustSpend(t, s, short, 10, 1) // expires in 100 ms
	mustSpend(t, s, long, 10, 1)
	clock.Advance(100 * time.Millisecond)
	s.Sweep()
	if n := s.Len(); n != 1 {
		t.Fatalf("Len = %d after sweep, want 1", n)
	}
	mustSpend(t, s, short, 10, 1)
	if n := len(s.shards[0].entries); n != 2 {
		t.Fatalf("%d slots, want the freed one reused (2)", n)
	}
	if d := mustSpend(t, s, long, 10, 0); d.Remaining != 9 {
		t.Fatalf("live counter lost: remaining %d", d.Remaining)
	}
}

func TestEvictionClock(t *testing.T) {
	s, _ := newTestStore(t, Options{MaxEntries: 3, SweepInterval: time.Hour})
	for _, k := range []string{"a", "b", "c"} {
		mustSpend(t, s, counter(k), 10, 1)
	}
	mustSpend(t, s, counter("a"), 10, 0) // a is used again; b and c are not
	mustSpend(t, s, counter("d"), 10, 1) // evicts b, the first unused one after the hand
	if s.Evictions() != 1 || s.Len() != 3 {
		t.Fatalf("evictions %d, len %d; want 1, 3", s.Evictions(), s.Len())
	}
	for _, k := range []string{"a", "c", "d"} {
		if d := mustSpend(t, s, counter(k), 10, 0); d.Remaining != 9 {
			t.Fatalf("%s: remaining %d, want 9", k, d.Remaining)
		}
	}
	// All three were used since the hand passed: it clears them all and evicts the first
	// one after it, c.
	mustSpend(t, s, counter("b"), 10, 1) // b starts fresh
	if d := mustSpend(t, s, counter("b"), 10, 0); d.Remaining != 9 {
		t.Fatalf("evicted key did not start fresh: remaining %d", d.Remaining)
	}
	if d := mustSpend(t, s, counter("c"), 10, 0); d.Remaining != 10 {
		t.Fatalf("c was not evicted: remaining %d", d.Remaining)
	}
	if s.Evictions() != 2 {
		t.Fatalf("evictions %d, want 2", s.Evictions())
	}
}

// TestEvictionKeepsHotKeys floods a full store with keys used once: the keys used
// again and again survive.
func TestEvictionKeepsHotKeys(t *testing.T) {
	s, _ := newTestStore(t, Options{MaxEntries: 100, SweepInterval: time.Hour})
	hot := []string{"h1", "h2", "h3", "h4", "h5"}
	for i := range 2000 {
		for _, k := range hot {
			mustSpend(t, s, counter(k), 1_000_000, 1)
		}
		mustSpend(t, s, counter("cold"+strconv.Itoa(i)), 10, 1)
	}
	if s.Len() > 100 || s.Evictions() < 1900 {
		t.Fatalf("len %d, evictions %d", s.Len(), s.Evictions())
	}
	for _, k := range hot {
		if d := mustSpend(t, s, counter(k), 1_000_000, 0); d.Remaining != 1_000_000-2000 {
			t.Fatalf("hot key %s was evicted: remaining %d", k, d.Remaining)
		}
	}
}

// TestHashCollisions forces keys onto one hash: they stay distinct counters.
func TestHashCollisions(t *testing.T) {
	s, _ := newTestStore(t, Options{Shards: 1, SweepInterval: time.Hour})
	sh := &s.shards[0]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	keys := []string{"x", "y", "z"}
	for n, k := range keys {
		sh.insertCounter(42, k, [3]int64{int64(n)}, t0+1000)
	}
	if len(sh.collided) != 2 || sh.numCounters() != 3 {
		t.Fatalf("%d collided of %d", len(sh.collided), sh.numCounters())
	}
	for n, k := range keys {
		i, ok := sh.find(42, []byte(k))
		if !ok || sh.entries[i].st[0] != int64(n) {
			t.Fatalf("find(%q) = %d, %v", k, i, ok)
		}
	}
	if _, ok := sh.find(42, []byte("w")); ok {
		t.Fatal("found a key never inserted")
	}
	// removeCounter rehashes the key; "x" is in the primary index under the forced hash,
	// so move it to the real one first, as a real insert would have.
	i, _ := sh.find(42, []byte("x"))
	delete(sh.counters, 42)
	sh.counters[maphash.String(sh.seed, "x")] = i
	sh.removeCounter(i)
	j, _ := sh.find(42, []byte("y"))
	sh.removeCounter(j)
	if _, ok := sh.find(42, []byte("y")); ok || sh.numCounters() != 1 {
		t.Fatalf("y still found; %d counters", sh.numCounters())
	}
	if k, ok := sh.find(42, []byte("z")); !ok || sh.entries[k].key != "z" {
		t.Fatal("z lost")
	}
}

func TestEvictionPrefersExpired(t *testing.T) {
	s, clock := newTestStore(t, Options{MaxEntries: 3, SweepInterval: time.Hour})
	long := func(k string) engine.Counter {
		c := counter(k)
		c.WindowMS = 3_600_000
		return c
	}
	mustSpend(t, s, long("old"), 10, 1) // least recently used, but live for an hour
	mustSpend(t, s, counter("x"), 10, 1)
	mustSpend(t, s, counter("y"), 10, 1)
	clock.Advance(time.Minute) // x and y expire
	mustSpend(t, s, long("new1"), 10, 1)
	mustSpend(t, s, long("new2"), 10, 1)
	if s.Evictions() != 0 {
		t.Fatalf("evicted %d live counters while expired state was there", s.Evictions())
	}
	if d := mustSpend(t, s, long("old"), 10, 0); d.Remaining != 9 {
		t.Fatalf("old lost: remaining %d", d.Remaining)
	}
}

func TestLeasesNeverEvicted(t *testing.T) {
	s, clock := newTestStore(t, Options{MaxEntries: 2, SweepInterval: time.Hour})
	set := func(k string) engine.LeaseSet { return engine.LeaseSet{Account: "acct", Namespace: "ns", Key: k} }
	mustSpend(t, s, counter("c"), 10, 1)
	if _, err := s.Acquire(ctx, set("l1"), "t", 1, 1000); err != nil {
		t.Fatal(err)
	}
	// A new lease set evicts the rate counter, not the live lease set.
	if d, err := s.Acquire(ctx, set("l2"), "t", 1, 1000); err != nil || !d.Allowed {
		t.Fatalf("Acquire l2: %+v, %v", d, err)
	}
	if s.Evictions() != 1 {
		t.Fatalf("evictions %d, want 1", s.Evictions())
	}
	// Now only live leases: no room for a third set, nor for a counter.
	_, err := s.Acquire(ctx, set("l3"), "t", 1, 1000)
	if !errors.Is(err, engine.ErrNoRoom) {
		t.Fatalf("Acquire l3: %v, want ErrNoRoom", err)
	}
	if _, err := s.Spend(ctx, engine.Spend{Counter: counter("c2"), Limit: 1, Cost: 1}); !errors.Is(err, engine.ErrNoRoom) {
		t.Fatalf("Spend: %v, want ErrNoRoom", err)
	}
	// A held lease is still re-acquired (renewed) without room; another lease in an
	// existing set needs an entry too (TestLeasesCountAgainstBound); a look (cost 0) needs
	// no room.
	if d, err := s.Acquire(ctx, set("l1"), "t", 2, 1000); err != nil || !d.Allowed || d.Active != 1 {
		t.Fatalf("Acquire of the held token on l1: %+v, %v", d, err)
	}
	if _, err := s.Acquire(ctx, set("l1"), "t2", 2, 1000); !errors.Is(err, engine.ErrNoRoom) {
		t.Fatalf("a second lease on l1: %v, want ErrNoRoom", err)
	}
	if d, err := s.Spend(ctx, engine.Spend{Counter: counter("c2"), Limit: 1, Cost: 0}); err != nil || !d.Allowed {
		t.Fatalf("look: %+v, %v", d, err)
	}
	// Once the leases expire, there is room again.
	clock.Advance(time.Second)
	if d, err := s.Acquire(ctx, set("l3"), "t", 1, 1000); err != nil || !d.Allowed {
		t.Fatalf("Acquire l3 after expiry: %+v, %v", d, err)
	}
	// A released set frees its slot at once.
	if r, _ := s.Release(ctx, set("l3"), "t"); !r.Released {
		t.Fatal("release failed")
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("Len %d after every lease expired or was released", n)
	}
}

func TestClose(t *testing.T) {
	before := runtime.NumGoroutine()
	s := New(Options{SweepInterval: time.Millisecond})
	mustSpend(t, s, counter("k"), 1, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	select {
	case <-s.done:
	default:
		t.Fatal("sweeper still running after Close")
	}
	if err := s.Ping(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ping after Close: %v", err)
	}
	if _, err := s.Spend(ctx, engine.Spend{Counter: counter("k"), Limit: 1, Cost: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Spend after Close: %v", err)
	}
	testkit.Eventually(t, "the goroutines New started end after Close", 2*time.Second, func() bool {
		return runtime.NumGoroutine() <= before
	})
}

func TestInvalidSpend(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	for _, sp := range []engine.Spend{
		{Counter: counter("k"), Limit: 0, Cost: 0},
		{Counter: counter("k"), Limit: 2, Cost: 3},
		{Counter: counter("k"), Limit: 2, Cost: -1},
		{Counter: engine.Counter{Key: "k", Algorithm: engine.ConcurrentLimit, WindowMS: 1000}, Limit: 2, Cost: 1},
		{Counter: engine.Counter{Key: "k", Algorithm: engine.FixedWindow, WindowMS: 0}, Limit: 2, Cost: 1},
	} {
		if _, err := s.Spend(ctx, sp); err == nil {
			t.Errorf("Spend(%+v) accepted", sp)
		}
	}
}

func TestUsagePruned(t *testing.T) {
	s, clock := newTestStore(t, Options{SweepInterval: time.Hour})
	today := engine.DayOf(t0)
	old := engine.UsageKey{Account: "a", Namespace: "ns", Day: today - 36}
	kept := engine.UsageKey{Account: "a", Namespace: "ns", Day: today - 35}
	if err := s.AddUsage(ctx, engine.UsageBatch{ID: "b1", Counts: map[engine.UsageKey]engine.UsageCount{old: {Total: 1}, kept: {Total: 2}}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * 24 * time.Hour) // old is now 41 days back, kept 40
	s.Sweep()
	rep, err := s.ReadUsage(ctx, engine.UsageQuery{Account: "a", Namespace: "ns", FirstDay: old.Day, LastDay: kept.Day, Month: kept.Day.Month()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Days[0].Total != 0 || rep.Days[1].Total != 2 {
		t.Fatalf("days %v: want the 41-day-old day pruned and the 40-day-old kept", rep.Days)
	}
	// Applied batch ids are forgotten after two hours.
	s.usage.mu.Lock()
	_, remembered := s.usage.batches["b1"]
	s.usage.mu.Unlock()
	if remembered {
		t.Fatal("batch id kept for 5 days")
	}
}

func TestSpendAllocs(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
		c := engine.Counter{Account: "acct", Namespace: "ns", Key: "some-user-key", Algorithm: alg, WindowMS: 60_000}
		mustSpend(t, s, c, 1_000_000_000, 1)
		sp := engine.Spend{Counter: c, Limit: 1_000_000_000, Cost: 1}
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := s.Spend(ctx, sp); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per spend on an existing counter, want 0", alg, allocs)
		}
	}
}

// TestMemoryPerCounter holds 1,000,000 live counters and checks the heap they take.
func TestMemoryPerCounter(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("slow; heap sizes are meaningless under the race detector")
	}
	perCounter := liveCounterBytes(t, 1_000_000)
	t.Logf("%.0f bytes per live counter at 1M counters (%.0f MB)", perCounter, perCounter*1e6/1e6)
	if perCounter > 200 {
		t.Fatalf("%.0f bytes per counter, want ≤ 200", perCounter)
	}
}

// liveCounterBytes fills a store with n live counters and returns the heap growth per counter.
func liveCounterBytes(tb testing.TB, n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(Options{MaxEntries: 2 * n, Clock: testkit.NewFakeClock(time.UnixMilli(t0))})
	defer s.Close()
	c := engine.Counter{Account: "acct-1234", Namespace: "api", Algorithm: engine.SlidingWindow, WindowMS: 60_000}
	var buf [32]byte
	for i := range n {
		c.Key = string(strconv.AppendInt(append(buf[:0], "user-"...), int64(i), 10))
		if _, err := s.Spend(ctx, engine.Spend{Counter: c, Limit: 100, Cost: 1}); err != nil {
			tb.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := s.Len(); got != n || s.Evictions() != 0 {
		tb.Fatalf("Len %d, evictions %d; want %d, 0", got, s.Evictions(), n)
	}
	runtime.KeepAlive(s)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

func BenchmarkLiveCounters1M(b *testing.B) {
	b.ReportAllocs()
	var per float64
	for b.Loop() {
		per = liveCounterBytes(b, 1_000_000)
	}
	b.ReportMetric(per, "B/counter")
	b.ReportMetric(per*1e6/(1<<20), "MiB/1M")
}

func benchKeys(n int) []engine.Counter {
	keys := make([]engine.Counter, n)
	for i := range keys {
		keys[i] = engine.Counter{Account: "acct", Namespace: "api", Key: "user-" + strconv.Itoa(i), Algorithm: engine.SlidingWindow, WindowMS: 60_000}
	}
	return keys
}

func BenchmarkSpend(b *testing.B) {
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
		b.Run(alg.String(), func(b *testing.B) {
			s := New(Options{})
			defer s.Close()
			keys := benchKeys(100_000)
			for i := range keys {
				keys[i].Algorithm = alg
				mustSpend(b, s, keys[i], 1_000_000_000, 1)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := s.Spend(ctx, engine.Spend{Counter: keys[i], Limit: 1_000_000_000, Cost: 1}); err != nil {
					b.Fatal(err)
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
	}
}

// BenchmarkSpendParallel spends on 100k existing counters from every goroutine, each
// walking the keys from its own starting point.
func BenchmarkSpendParallel(b *testing.B) {
	s := New(Options{})
	defer s.Close()
	keys := benchKeys(100_000)
	for _, k := range keys {
		mustSpend(b, s, k, 1_000_000_000, 1)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919)) % len(keys)
		for pb.Next() {
			if _, err := s.Spend(ctx, engine.Spend{Counter: keys[i], Limit: 1_000_000_000, Cost: 1}); err != nil {
				b.Error(err)
				return
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
	})
}

func BenchmarkSpendNewKeys(b *testing.B) {
	s := New(Options{MaxEntries: 100_000})
	defer s.Close()
	c := engine.Counter{Account: "acct", Namespace: "api", Algorithm: engine.FixedWindow, WindowMS: 60_000}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Key = fmt.Sprint(i)
		i++
		if _, err := s.Spend(ctx, engine.Spend{Counter: c, Limit: 10, Cost: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	s := New(Options{})
	defer s.Close()
	set := engine.LeaseSet{Account: "acct", Namespace: "api", Key: "jobs"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Acquire(ctx, set, "token", 10, 30_000); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Release(ctx, set, "token"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLeasesCountAgainstBound: every lease held takes one entry of MaxEntries, so one
// lease set with a huge limit cannot grow the store without bound: once the shard holds
// only live leases, another lease, in a new set or an existing one, is ErrNoRoom; a
// counter is evicted to make room for a lease first. Renewing, or re-acquiring a held
// token, needs no room.
// TestExpiredLeaseReclaimedBeforeEviction: once a lease has expired, the store makes room
// by reclaiming it rather than by evicting a live counter (spec §11.1), also when other
// leases of its set are still live and the shard was reclaimed earlier.
func TestExpiredLeaseReclaimedBeforeEviction(t *testing.T) {
	s, clock := newTestStore(t, Options{MaxEntries: 4, Shards: 1, SweepInterval: time.Hour})
	short := counter("short")
	short.WindowMS = 1_000
	mustSpend(t, s, short, 10, 1)
	setS := engine.LeaseSet{Account: "acct", Namespace: "ns", Key: "s"}
	setT := engine.LeaseSet{Account: "acct", Namespace: "ns", Key: "t"}
	for _, l := range []struct {
		set   engine.LeaseSet
		token string
		ttlMS int64
	}{{setS, "a", 10_000}, {setS, "b", 100_000}, {setT, "x", 100_000}} {
		if d, err := s.Acquire(ctx, l.set, l.token, 5, l.ttlMS); err != nil || !d.Allowed {
			t.Fatalf("acquire %s: %+v, %v", l.token, d, err)
		}
	}
	// Full; the short counter has expired: a new counter takes its place (a reclaim).
	clock.Advance(3 * time.Second)
	long := counter("long")
	mustSpend(t, s, long, 10, 1)
	// Lease a expires; a new lease set needs room: a's entry, not the live counter.
	clock.Advance(10 * time.Second)
	if d, err := s.Acquire(ctx, engine.LeaseSet{Account: "acct", Namespace: "ns", Key: "u"}, "y", 5, 100_000); err != nil || !d.Allowed {
		t.Fatalf("acquire on a new set: %+v, %v", d, err)
	}
	if n := s.Evictions(); n != 0 {
		t.Fatalf("%d live counters evicted while an expired lease held an entry", n)
	}
	if d := mustSpend(t, s, long, 10, 1); d.Remaining != 8 {
		t.Fatalf("the live counter was lost: remaining %d, want 8", d.Remaining)
	}
}

func TestLeasesCountAgainstBound(t *testing.T) {
	const max = 1024
	s, clock := newTestStore(t, Options{MaxEntries: max, Shards: 1, SweepInterval: time.Hour})
	set := engine.LeaseSet{Account: "acct", Namespace: "ns", Key: "one-key"}
	mustSpend(t, s, counter("c"), 10, 1)
	for i := range max {
		d, err := s.Acquire(ctx, set, "t"+strconv.Itoa(i), 1_000_000_000, 60_000)
		if err != nil || !d.Allowed {
			t.Fatalf("lease %d: %+v, %v", i, d, err)
		}
	}
	if s.Evictions() != 1 || s.Len() != max {
		t.Fatalf("evictions %d, len %d; want the counter evicted for the leases and len %d", s.Evictions(), s.Len(), max)
	}
	if _, err := s.Acquire(ctx, set, "one-more", 1_000_000_000, 60_000); !errors.Is(err, engine.ErrNoRoom) {
		t.Fatalf("lease %d in one set: %v, want ErrNoRoom", max+1, err)
	}
	if _, err := s.Acquire(ctx, engine.LeaseSet{Account: "acct", Namespace: "ns", Key: "other"}, "t", 1, 60_000); !errors.Is(err, engine.ErrNoRoom) {
		t.Fatalf("a new set: %v, want ErrNoRoom", err)
	}
	if d, err := s.Acquire(ctx, set, "t0", 1_000_000_000, 60_000); err != nil || !d.Allowed || d.Active != max {
		t.Fatalf("re-acquiring a held token: %+v, %v", d, err)
	}
	if r, err := s.Renew(ctx, set, "t1", 0); err != nil || !r.Renewed {
		t.Fatalf("renew: %+v, %v", r, err)
	}
	// A release makes room for exactly one lease.
	if r, _ := s.Release(ctx, set, "t2"); !r.Released || s.Len() != max-1 {
		t.Fatalf("release: %+v, len %d", r, s.Len())
	}
	if d, err := s.Acquire(ctx, set, "one-more", 1_000_000_000, 60_000); err != nil || !d.Allowed {
		t.Fatalf("after a release: %+v, %v", d, err)
	}
	// Expired leases are reclaimed to make room.
	clock.Advance(61 * time.Second)
	if d, err := s.Acquire(ctx, set, "fresh", 1_000_000_000, 60_000); err != nil || !d.Allowed || d.Active != 1 {
		t.Fatalf("after expiry: %+v, %v", d, err)
	}
	if s.Len() != 1 {
		t.Fatalf("len %d after expiry, want 1", s.Len())
	}
}
