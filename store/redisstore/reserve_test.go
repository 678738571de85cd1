package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/redistest"
)

// Reservations (reserve.go): many instances hammering one counter never admit more than
// its limit, every admission is counted in Redis, unspent slices come back, and a reset
// on one instance is never undone by another's give-back.

// counted reads what Redis has counted on c in its current window, with a store that
// decides everything in Redis: limit minus the remaining of a cost-0 look.
func counted(t *testing.T, o Options, c engine.Counter, limit int64) int64 {
	t.Helper()
	s := openStore(t, o)
	d, err := s.Spend(context.Background(), engine.Spend{Counter: c, Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	return limit - d.Remaining
}

// TestReservationsNeverOverAdmit: 4 instances with 16 goroutines each ask 3× a counter's
// limit, on each algorithm. No more than the limit is admitted (a token bucket's: plus
// what it refilled meanwhile), the instances reserve and decide from slices, and once
// they close (giving back what they did not spend) Redis counts exactly what they
// admitted (a bucket: less what it refilled).
func TestReservationsNeverOverAdmit(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"single", "cluster"} {
		for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
			t.Run(topo+"/"+alg.String(), func(t *testing.T) {
				t.Parallel()
				o := Options{Prefix: uniquePrefix()}
				if topo == "single" {
					o.URL = singleURL(t)
				} else {
					o.ClusterAddrs = sharedCluster(t).Addrs()
				}
				const instances, workers, limit = 4, 16, 20_000
				c := engine.Counter{Account: "a", Namespace: "ns", Key: "hot", Algorithm: alg, WindowMS: 3_600_000}
				var admitted, asked atomic.Int64
				var wg sync.WaitGroup
				start := time.Now()
				stores := make([]rstore, instances)
				for i := range stores {
					s, err := openReservingUnmanaged(context.Background(), o, ReserveOptions{}) // production settings
					if err != nil {
						t.Fatal(err)
					}
					stores[i] = s
					for range workers {
						wg.Go(func() {
							for asked.Add(1) <= 3*limit {
								d, err := s.Spend(context.Background(), engine.Spend{Counter: c, Limit: limit, Cost: 1})
								if err != nil {
									t.Error(err)
									return
								}
								if d.Allowed {
									admitted.Add(1)
								}
							}
						})
					}
				}
				wg.Wait()
				var local, calls int64
				for _, s := range stores {
					l, n := s.ReserveStats()
					local, calls = local+l, calls+n
					if err := s.Close(); err != nil { // gives back what it did not spend
						t.Fatal(err)
					}
				}
				got := counted(t, o, c, limit)
				// A bucket refills at limit per window while the test runs (a second more
				// for the clocks' difference): at most that many admitted beyond the
				// limit, and gone from Redis's count.
				var refill int64
				if alg == engine.TokenBucket {
					refill = (time.Since(start).Milliseconds()+1000)*limit/c.WindowMS + 1
				}
				t.Logf("%d admitted of %d asked; %d decided from slices, %d reserve calls; Redis counts %d",
					admitted.Load(), 3*limit, local, calls, got)
				if admitted.Load() > limit+refill {
					t.Errorf("%d admitted over a limit of %d (and %d refilled)", admitted.Load(), limit, refill)
				}
				if got > admitted.Load() || got < admitted.Load()-refill {
					t.Errorf("Redis counts %d for %d admitted (%d refilled at most): a slice was not given back, or an admission not counted", got, admitted.Load(), refill)
				}
				switch {
				case alg == engine.TokenBucket && local != 0:
					t.Errorf("%d bucket requests decided from slices: buckets are decided in Redis", local)
				case alg != engine.TokenBucket && local < limit/2:
					t.Errorf("only %d decided from slices", local)
				}
			})
		}
	}
}

// withLogger is o with the tests' quiet logger and ReadTimeout (testReadTimeout).
func withLogger(o Options) Options {
	o.Logger = quietLogger()
	o.ReadTimeout = testReadTimeout(o.ReadTimeout)
	return o
}

// TestReservationIdleGivenBack: a slice this instance stops spending from goes back to
// Redis within ReserveOptions.Idle and a sweep: another instance then sees the exact count.
func TestReservationIdleGivenBack(t *testing.T) {
	t.Parallel()
	o := Options{URL: singleURL(t), Prefix: uniquePrefix()}
	a := openReserving(t, Options{URL: o.URL, Prefix: o.Prefix}, ReserveOptions{From: 1, Share: 2, Hits: 2, Idle: 300 * time.Millisecond})
	c := engine.Counter{Account: "a", Namespace: "ns", Key: "idle", Algorithm: engine.SlidingWindow, WindowMS: 3_600_000}
	const limit = 1000
	for range 3 {
		if d, err := a.Spend(context.Background(), engine.Spend{Counter: c, Limit: limit, Cost: 1}); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
	}
	if local, _ := a.ReserveStats(); local != 1 {
		t.Fatalf("%d decided from a slice, want 1 (the third request)", local)
	}
	if got := counted(t, o, c, limit); got <= 3 {
		t.Fatalf("Redis counts %d while a slice is held: nothing was reserved", got)
	}
	testkit.Eventually(t, "the idle slice given back", 3*time.Second, func() bool { return counted(t, o, c, limit) == 3 })
}

// TestReservationResetElsewhere: a slice reserved on instance A before instance B resets
// the counter is not taken off B's counts after the reset when A gives it back.
func TestReservationResetElsewhere(t *testing.T) {
	t.Parallel()
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			o := Options{URL: singleURL(t), Prefix: uniquePrefix()}
			ctx := context.Background()
			a, err := openReservingUnmanaged(ctx, Options{URL: o.URL, Prefix: o.Prefix}, eager)
			if err != nil {
				t.Fatal(err)
			}
			b := openStore(t, Options{URL: o.URL, Prefix: o.Prefix})
			c := engine.Counter{Account: "a", Namespace: "ns", Key: "reset", Algorithm: alg, WindowMS: 3_600_000}
			const limit = 100
			for range 2 {
				if d, err := a.Spend(ctx, engine.Spend{Counter: c, Limit: limit, Cost: 1}); err != nil || !d.Allowed {
					t.Fatal(d, err)
				}
			}
			if held := counted(t, o, c, limit); held <= 2 {
				t.Fatalf("Redis counts %d: A reserved nothing", held)
			}
			if _, err := b.Reset(ctx, c); err != nil {
				t.Fatal(err)
			}
			for range 40 {
				if d, err := b.Spend(ctx, engine.Spend{Counter: c, Limit: limit, Cost: 1}); err != nil || !d.Allowed {
					t.Fatal(d, err)
				}
			}
			if err := a.Close(); err != nil { // gives its slice back
				t.Fatal(err)
			}
			if got := counted(t, o, c, limit); got != 40 {
				t.Fatalf("after A gave back its slice, Redis counts %d of B's 40 since the reset", got)
			}
		})
	}
}

// TestReserveCallsCut: merged reserve calls cut inside a reply (a proxy that drops the
// connection) fail, and never admit what Redis did not count: each counter's count in
// Redis covers every admission made on it, whatever the cut left unanswered.
func TestReserveCallsCut(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	px := redistest.StartProxy(t, srv.Addr())
	o := Options{URL: px.URL(), Prefix: uniquePrefix()}
	s := openReserving(t, Options{URL: o.URL, Prefix: o.Prefix}, eager)
	ctx := context.Background()
	const callers, limit, rounds = 24, 1000, 6
	counter := func(attempt, i int) engine.Counter {
		return engine.Counter{Account: "a", Namespace: "ns", Key: fmt.Sprintf("cut-%d-%d", attempt, i), Algorithm: engine.FixedWindow, WindowMS: 3_600_000}
	}
	for attempt := 0; ; attempt++ {
		// Each counter is followed (its first request, decided the usual way), so the next
		// request of each is a reserve call.
		for i := range callers {
			if _, err := s.Spend(ctx, engine.Spend{Counter: counter(attempt, i), Limit: limit, Cost: 1}); err != nil {
				t.Fatal(err)
			}
		}
		before := s.pipes.Stats()
		px.CutAfter(30) // inside the first reply
		admitted := make([]atomic.Int64, callers)
		var failed atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range callers {
			wg.Go(func() {
				<-start
				for range rounds {
					d, err := s.Spend(ctx, engine.Spend{Counter: counter(attempt, i), Limit: limit, Cost: 1})
					switch {
					case err != nil:
						failed.Add(1)
					case d.Allowed:
						admitted[i].Add(1)
					default:
						t.Errorf("denied under the limit: %+v", d)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		px.CutAfter(-1)
		st := s.pipes.Stats()
		merged := st.Commands-before.Commands < st.Calls-before.Calls
		if failed.Load() < 2 || !merged {
			if attempt == 50 {
				t.Fatal("no merged reserve call was cut")
			}
			continue
		}
		var total int64
		for i := range callers {
			got := counted(t, Options{URL: "redis://" + srv.Addr() + "/0", Prefix: o.Prefix}, counter(attempt, i), limit)
			if got < 1+admitted[i].Load() {
				t.Fatalf("counter %d: Redis counts %d for %d admitted (and the first request)", i, got, admitted[i].Load())
			}
			total += admitted[i].Load()
		}
		t.Logf("attempt %d: %d admitted, %d failed", attempt, total, failed.Load())
		if total+failed.Load() != callers*rounds {
			t.Fatalf("%d answers for %d requests", total+failed.Load(), callers*rounds)
		}
		break
	}
}

// TestReservationLowBudgetGoesPlain: once a counter has less than From left, its requests
// go to Redis the usual way (merged spend.lua) for the rest of the window, not as reserve
// calls, and each is exact.
func TestReservationLowBudgetGoesPlain(t *testing.T) {
	t.Parallel()
	s := openReserving(t, Options{URL: singleURL(t), Prefix: uniquePrefix()}, ReserveOptions{}) // production settings
	c := engine.Counter{Account: "a", Namespace: "ns", Key: "low", Algorithm: engine.FixedWindow, WindowMS: 3_600_000}
	const limit = 1100
	ctx := context.Background()
	spend := func() engine.Decision {
		t.Helper()
		d, err := s.Spend(ctx, engine.Spend{Counter: c, Limit: limit, Cost: 1})
		if err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
		return d
	}
	n := int64(0)
	for ; n < 200; n++ {
		if d := spend(); d.Remaining != limit-n-1 {
			t.Fatalf("request %d: remaining %d, want %d", n+1, d.Remaining, limit-n-1)
		}
	}
	local, calls := s.ReserveStats()
	if local == 0 || calls == 0 {
		t.Fatalf("%d decided from slices in %d reserve calls: the counter did not reserve", local, calls)
	}
	for ; n < 300; n++ {
		if d := spend(); d.Remaining != limit-n-1 {
			t.Fatalf("request %d: remaining %d, want %d", n+1, d.Remaining, limit-n-1)
		}
	}
	if _, after := s.ReserveStats(); after > calls+2 {
		t.Fatalf("%d reserve calls after the budget fell below From, want at most 2 more than %d", after, calls)
	}
}

// TestReservationsStopWithRedis: a slice decides nothing once Redis stops answering (spec
// §3.8: every decision fails while the store is down), whether Redis is killed (its
// connection closes) or frozen (calls time out), and decides again once Redis is back.
func TestReservationsStopWithRedis(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"killed", "frozen"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartServer(t, false)
			s := openReserving(t, Options{URL: srv.URL(), ReadTimeout: 200 * time.Millisecond}, eager)
			ctx := context.Background()
			hot := engine.Spend{Counter: engine.Counter{Account: "a", Namespace: "ns", Key: "hot", Algorithm: engine.FixedWindow, WindowMS: 3_600_000}, Limit: 1_000_000, Cost: 1}
			for range 3 {
				if d, err := s.Spend(ctx, hot); err != nil || !d.Allowed {
					t.Fatal(d, err)
				}
			}
			if local, _ := s.ReserveStats(); local == 0 {
				t.Fatal("nothing decided from a slice before the fault")
			}
			if fault == "killed" {
				srv.Stop()
				testkit.Eventually(t, "the killed Redis's connection seen closed", 5*time.Second, func() bool { return s.pipes.Conns() == 0 })
			} else {
				srv.Signal(syscall.SIGSTOP)
				t.Cleanup(func() { srv.Signal(syscall.SIGCONT) })
				// Any call to Redis now times out: here a cold counter's.
				cold := hot
				cold.Counter.Key = "cold"
				if _, err := s.Spend(ctx, cold); err == nil {
					t.Fatal("a frozen Redis answered")
				}
			}
			before, _ := s.ReserveStats()
			for i := range 5 { // the slice holds 30 more units
				if d, err := s.Spend(ctx, hot); err == nil {
					t.Fatalf("request %d with Redis %s: %+v, want an error", i, fault, d)
				}
			}
			if after, _ := s.ReserveStats(); after != before {
				t.Fatalf("%d decided from the slice with Redis %s", after-before, fault)
			}
			if fault == "killed" {
				if err := srv.Start(); err != nil {
					t.Fatal(err)
				}
			} else {
				srv.Signal(syscall.SIGCONT)
			}
			testkit.Eventually(t, "decisions again once Redis is back", 5*time.Second, func() bool {
				d, err := s.Spend(ctx, hot)
				return err == nil && d.Allowed
			})
		})
	}
}

// TestReservationEndsOnResetElsewhere: once a reset made on instance B has answered,
// instance A decides nothing from the slice it took before (spec §4.13: the reset fences
// the counter): A's very next look sees the fresh count, on either window algorithm.
func TestReservationEndsOnResetElsewhere(t *testing.T) {
	t.Parallel()
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			url, prefix := singleURL(t), uniquePrefix()
			a := openReserving(t, Options{URL: url, Prefix: prefix}, eager)
			b := openStore(t, Options{URL: url, Prefix: prefix})
			ctx := context.Background()
			c := engine.Counter{Account: "a", Namespace: "ns", Key: "reset-seen", Algorithm: alg, WindowMS: 3_600_000}
			const limit = 1000
			for range 3 {
				if d, err := a.Spend(ctx, engine.Spend{Counter: c, Limit: limit, Cost: 1}); err != nil || !d.Allowed {
					t.Fatal(d, err)
				}
			}
			if local, _ := a.ReserveStats(); local == 0 {
				t.Fatal("A decided nothing from a slice")
			}
			start := time.Now()
			if _, err := b.Reset(ctx, c); err != nil {
				t.Fatal(err)
			}
			t.Logf("the reset answered after %v", time.Since(start))
			before, _ := a.ReserveStats()
			d, err := a.Spend(ctx, engine.Spend{Counter: c, Limit: limit, Cost: 1})
			if err != nil || !d.Allowed || d.Remaining != limit-1 {
				t.Fatalf("A's first request after B's reset answered: %+v, %v; want allowed, %d left", d, err, limit-1)
			}
			if after, _ := a.ReserveStats(); after != before {
				t.Fatal("A decided from the slice it took before the reset")
			}
		})
	}
}

// TestResetLeavesNoKeyWithoutSlices: resetting a counter removes it and writes nothing
// else, as before reservations, whether it never had a slice or this instance held one
// (nobody else did: no fence is needed).
func TestResetLeavesNoKeyWithoutSlices(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix()
	s := openReserving(t, Options{URL: singleURL(t), Prefix: prefix}, ReserveOptions{}) // production settings
	ctx := context.Background()
	keysLeft := func() []string {
		t.Helper()
		got, err := s.client.Keys(ctx, "*"+prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	cold := engine.Counter{Account: "a", Namespace: "ns", Key: "cold", Algorithm: engine.FixedWindow, WindowMS: 60_000}
	if _, err := s.Spend(ctx, engine.Spend{Counter: cold, Limit: 1_000_000, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if existed, err := s.Reset(ctx, cold); err != nil || !existed {
		t.Fatal(existed, err)
	}
	if left := keysLeft(); len(left) != 0 {
		t.Fatalf("keys left after resetting a counter that never had a slice: %q", left)
	}
	hot := cold
	hot.Key = "hot"
	for range 3 {
		if _, err := s.Spend(ctx, engine.Spend{Counter: hot, Limit: 1_000_000, Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.client.HLen(ctx, s.keys.Counter(hot)+":h").Result(); err != nil || n != 1 {
		t.Fatalf("the hot counter's grants: %d (%v), want this instance's", n, err)
	}
	if existed, err := s.Reset(ctx, hot); err != nil || !existed {
		t.Fatal(existed, err)
	}
	if left := keysLeft(); len(left) != 0 {
		t.Fatalf("keys left after resetting a counter only this instance had a slice of: %q", left)
	}
}

// TestReservationSlidingWindowEndGivesBackLater: a sliding window's unspent slice is not
// given back the moment its window ends (every hot counter's give-back at once holds up the
// requests behind them) but with the counter's next call, in the same call, or once idle;
// either way it comes off the ended window's count, which weighs on the next.
func TestReservationSlidingWindowEndGivesBackLater(t *testing.T) {
	t.Parallel()
	const w, limit = 60_000, 10_000
	clock := testkit.NewFakeClock(time.UnixMilli(1_000*w + 1_000))
	s := openReserving(t, Options{URL: singleURL(t), Prefix: uniquePrefix(), Clock: clock},
		ReserveOptions{From: 1, Share: 2, Hits: 2, Idle: 4 * time.Second})
	ctx := context.Background()
	busy := engine.Counter{Account: "a", Namespace: "ns", Key: "busy", Algorithm: engine.SlidingWindow, WindowMS: w}
	quiet := busy
	quiet.Key = "quiet"
	for _, c := range []engine.Counter{busy, quiet} {
		for range 3 { // the second reserves, the third is decided from the slice
			if d, err := s.Spend(ctx, engine.Spend{Counter: c, Limit: limit, Cost: 1}); err != nil || !d.Allowed {
				t.Fatal(d, err)
			}
		}
	}
	// ended reads the count of the first window (1000) as Redis holds it: the current
	// count while no request has come in the next, the previous count after one has.
	ended := func(c engine.Counter) string {
		v, err := s.client.Get(ctx, s.keys.Counter(c)).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch f := strings.Split(v, ":"); {
		case len(f) == 3 && f[0] == "1000":
			return f[1]
		case len(f) == 3 && f[0] == "1001":
			return f[2]
		}
		t.Fatalf("%s: %q is not a sliding window's state in window 1000 or 1001", c.Key, v)
		return ""
	}
	local, calls := s.ReserveStats()
	if local != 2 {
		t.Fatalf("%d decided from slices, want 2 (each counter's third request)", local)
	}
	clock.Advance(w * time.Millisecond) // the next window
	// Three of the sweeper's rounds begun after the window's end: the first round that
	// finishes after this read may have begun before it, so four.
	from := s.Sweeps()
	testkit.Eventually(t, "three sweeper rounds after the window's end", 10*time.Second,
		func() bool { return s.Sweeps() >= from+4 })
	if _, after := s.ReserveStats(); after != calls {
		t.Fatalf("%d calls to Redis at the window's end with no request: the slices went back at once", after-calls)
	}
	if d, err := s.Spend(ctx, engine.Spend{Counter: busy, Limit: limit, Cost: 1}); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if l, after := s.ReserveStats(); after != calls+1 {
		t.Fatalf("%d calls for the busy counter's next request, want 1 (%d local)", after-calls, l)
	}
	if got := ended(busy); got != "3" {
		t.Fatalf("the busy counter's ended window counts %s, want its 3 requests: the slice did not come back with the next call", got)
	}
	testkit.Eventually(t, "the quiet counter's slice given back once idle", 10*time.Second, func() bool { return ended(quiet) == "3" })
}
