package redisstore

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/hotpath"
	"github.com/leashd/leash/store/redisstore/lua"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/redistest"
)

// A decision taken from a slice is the one Redis would have given at that instant (spec
// §4.13): these tests put reservations through what an operator's fleet does to them
// (resets and overdrafts on another instance, a Redis frozen or answering into the void,
// idle holders, mixed-cost buckets) and compare with what Redis alone allows.

// hotOpts reserve as in production, but from a counter's 2nd request on any limit above
// 64: the tests' limits are small.
var hotOpts = ReserveOptions{From: 64}

// topoOptions is Options for a topology: one node, or the shared 3-master Cluster.
func topoOptions(t *testing.T, topo string) Options {
	o := Options{Prefix: uniquePrefix()}
	if topo == "single" {
		o.URL = singleURL(t)
	} else {
		o.ClusterAddrs = sharedCluster(t).Addrs()
	}
	return o
}

// hammer spends cost 1 on c from workers goroutines on each store until asked requests
// were made, and returns how many were admitted.
func hammer(t *testing.T, stores []rstore, c engine.Counter, limit, asked int64, workers int) int64 {
	t.Helper()
	var admitted, n atomic.Int64
	var wg sync.WaitGroup
	for _, s := range stores {
		for range workers {
			wg.Go(func() {
				for n.Add(1) <= asked {
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
	return admitted.Load()
}

// TestReservationResetIsLinearizable: instances A and C hold slices of a counter when B
// resets it; once the reset has answered, A, B and C together admit exactly the limit in
// the new window, and Redis counts exactly that.
func TestReservationResetIsLinearizable(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"single", "cluster"} {
		for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow} {
			t.Run(topo+"/"+alg.String(), func(t *testing.T) {
				t.Parallel()
				o := topoOptions(t, topo)
				stores := []rstore{openReserving(t, o, hotOpts), openReserving(t, o, hotOpts), openReserving(t, o, hotOpts)}
				c := engine.Counter{Account: "a", Namespace: "ns", Key: "reset-hot", Algorithm: alg, WindowMS: 3_600_000}
				const limit = 5000
				hammer(t, []rstore{stores[0], stores[2]}, c, limit, 400, 4)
				if local, _ := stores[0].ReserveStats(); local == 0 {
					t.Fatal("A decided nothing from a slice before the reset")
				}
				if _, err := stores[1].Reset(context.Background(), c); err != nil {
					t.Fatal(err)
				}
				admitted := hammer(t, stores, c, limit, 2*limit, 8)
				if admitted != limit {
					t.Errorf("%d admitted after the reset answered, want exactly the limit %d", admitted, limit)
				}
				for _, s := range stores {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
				}
				if got := counted(t, o, c, limit); got != admitted {
					t.Errorf("Redis counts %d for %d admitted since the reset", got, admitted)
				}
			})
		}
	}
}

// TestReservationOverdraftFences: instance A holds a slice when B's overdraft spend (spec
// §4.12) of the whole limit is denied and counted; once it has answered, A denies too, as
// Redis does (A's unspent slice given back would not bring the count under the limit). B
// fences whether or not its own reservations are on.
func TestReservationOverdraftFences(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"single", "cluster"} {
		for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow} {
			t.Run(topo+"/"+alg.String(), func(t *testing.T) {
				t.Parallel()
				o := topoOptions(t, topo)
				// B's own reservations are off: the store fences all the same.
				a, b := openReserving(t, o, hotOpts), openStore(t, o)
				ctx := context.Background()
				c := engine.Counter{Account: "a", Namespace: "ns", Key: "overdraft", Algorithm: alg, WindowMS: 3_600_000}
				const limit = 2000
				hammer(t, []rstore{a}, c, limit, 100, 1)
				if local, _ := a.ReserveStats(); local == 0 {
					t.Fatal("A decided nothing from a slice")
				}
				d, err := b.Spend(ctx, engine.Spend{Counter: c, Limit: limit, Cost: limit, Overdraft: true})
				if err != nil || d.Allowed {
					t.Fatalf("B's overdraft of the whole limit: %+v, %v; want denied", d, err)
				}
				before, _ := a.ReserveStats()
				if d, err := a.Spend(ctx, engine.Spend{Counter: c, Limit: limit, Cost: 1}); err != nil || d.Allowed {
					t.Fatalf("A after B's overdraft answered: %+v, %v; want denied, as Redis decides", d, err)
				}
				if after, _ := a.ReserveStats(); after != before {
					t.Fatal("A decided from its slice after the overdraft")
				}
			})
		}
	}
}

// TestReservationFrozenRedis: Redis frozen (SIGSTOP) while A holds a slice: A decides from
// it only within hotpath.Valid of Redis's last answer; every request sent later fails, as
// without reservations (spec §3.8). The calls queued meanwhile run when Redis resumes, past
// their deadline: they grant and spend nothing, and the slice comes back, so Redis counts
// what A admitted.
func TestReservationFrozenRedis(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"single", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			o := Options{Prefix: uniquePrefix(), ReadTimeout: 150 * time.Millisecond}
			var srv *redistest.Server
			c := engine.Counter{Account: "a", Namespace: "ns", Key: "frozen", Algorithm: engine.FixedWindow, WindowMS: 3_600_000}
			s0 := Options{}
			if topo == "single" {
				srv = redistest.StartServer(t, false)
				o.URL = srv.URL()
			} else {
				cl := redistest.StartCluster(t, 0)
				o.ClusterAddrs = cl.Addrs()
				s0 = Options{ClusterAddrs: cl.Addrs(), Prefix: o.Prefix}
				var err error
				if srv, err = cl.MasterFor(context.Background(), lua.NewKeys(o.Prefix).Counter(c)); err != nil {
					t.Fatal(err)
				}
			}
			a := openReserving(t, o, hotOpts)
			const limit = 5000
			admitted := hammer(t, []rstore{a}, c, limit, 300, 2)
			if local, _ := a.ReserveStats(); local == 0 {
				t.Fatal("nothing decided from a slice before the freeze")
			}
			srv.Signal(syscall.SIGSTOP)
			frozen := time.Now()
			t.Cleanup(func() { srv.Signal(syscall.SIGCONT) })
			bound := hotpath.Valid + 30*time.Millisecond // and a margin for this machine's scheduling
			var late int
			for time.Since(frozen) < bound+400*time.Millisecond {
				sent := time.Since(frozen)
				d, err := a.Spend(context.Background(), engine.Spend{Counter: c, Limit: limit, Cost: 1})
				if err == nil && d.Allowed {
					admitted++
					if sent > bound {
						late++
					}
				}
			}
			if late > 0 {
				t.Fatalf("%d requests sent more than %v after Redis froze were admitted", late, bound)
			}
			srv.Signal(syscall.SIGCONT)
			if s0.ClusterAddrs == nil {
				s0 = Options{URL: o.URL, Prefix: o.Prefix}
			}
			testkit.Eventually(t, "Redis counting what A admitted once it resumed", 10*time.Second, func() bool {
				return counted(t, s0, c, limit) == admitted
			})
		})
	}
}

// TestReservationLostReplyComesBack: a reserve call whose reply is cut (it ran; its caller
// never read what it granted) grants nothing for good: what it reserved comes back by
// itself within seconds, with no further request on the counter. (The request itself is
// counted, as a lost reply's spend is without reservations.)
func TestReservationLostReplyComesBack(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	px := redistest.StartProxy(t, srv.Addr())
	o := Options{URL: px.URL(), Prefix: uniquePrefix()}
	s := openReserving(t, o, eager)
	direct := Options{URL: srv.URL(), Prefix: o.Prefix}
	ctx := context.Background()
	const limit = 1000
	for attempt := 0; ; attempt++ {
		if attempt == 50 {
			t.Fatal("no reserve call's reply was cut after it ran")
		}
		c := engine.Counter{Account: "a", Namespace: "ns", Key: "lost-" + strconv.Itoa(attempt), Algorithm: engine.SlidingWindow, WindowMS: 3_600_000}
		// The counter's first request is decided the usual way; its second is a reserve call.
		if d, err := s.Spend(ctx, engine.Spend{Counter: c, Limit: limit, Cost: 1}); err != nil || !d.Allowed {
			continue // the last attempt's cut may still be closing connections
		}
		px.CutAfter(0)
		_, err := s.Spend(ctx, engine.Spend{Counter: c, Limit: limit, Cost: 1})
		px.CutAfter(-1)
		if err == nil || counted(t, direct, c, limit) <= 2 {
			continue // the cut fell on another reply, before the call ran
		}
		testkit.Eventually(t, "the slice of the lost reply back in Redis", 3*time.Second, func() bool {
			return counted(t, direct, c, limit) == 2
		})
		return
	}
}

// TestReservationIdleHolderWithin2s: A spends 2,000 of 5,000 and goes idle holding a
// slice; within 2 s B can spend all the other 3,000.
func TestReservationIdleHolderWithin2s(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"single", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			o := topoOptions(t, topo)
			a := openReserving(t, o, hotOpts)
			c := engine.Counter{Account: "a", Namespace: "ns", Key: "idle-holder", Algorithm: engine.FixedWindow, WindowMS: 3_600_000}
			const limit = 5000
			if n := hammer(t, []rstore{a}, c, limit, 2000, 2); n != 2000 {
				t.Fatalf("%d of 2000 admitted", n)
			}
			if counted(t, o, c, limit) == 2000 {
				t.Fatal("A holds no slice")
			}
			idle := time.Now()
			testkit.Eventually(t, "A's unspent slice back in Redis", 2*time.Second, func() bool { return counted(t, o, c, limit) == 2000 })
			t.Logf("given back after %v", time.Since(idle))
		})
	}
}

// TestBucketsExactOverInstances: token buckets with mixed costs over 3 instances admit
// exactly what the same run admits with reservations off (buckets are decided in Redis).
func TestBucketsExactOverInstances(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"single", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			clock := testkit.NewFakeClock(time.UnixMilli(1_700_000_000_000))
			costs := []int64{1, 3, 5, 2, 11, 1, 64}
			run := func(r ReserveOptions) (admitted int64, local int64) {
				o := topoOptions(t, topo)
				o.Clock = clock
				stores := []rstore{openReserving(t, o, r), openReserving(t, o, r), openReserving(t, o, r)}
				c := engine.Counter{Account: "a", Namespace: "ns", Key: "bucket", Algorithm: engine.TokenBucket, WindowMS: 60_000}
				var total atomic.Int64
				var wg sync.WaitGroup
				for i, s := range stores {
					wg.Go(func() {
						for j := range 400 {
							cost := costs[(i+j)%len(costs)]
							d, err := s.Spend(context.Background(), engine.Spend{Counter: c, Limit: 5000, Cost: cost})
							if err != nil {
								t.Error(err)
								return
							}
							if d.Allowed {
								total.Add(cost)
							}
						}
					})
				}
				wg.Wait()
				for _, s := range stores {
					l, _ := s.ReserveStats()
					local += l
				}
				return total.Load(), local
			}
			on, local := run(hotOpts)
			off, _ := run(ReserveOptions{Off: true})
			if on != off || on != 5000 {
				t.Fatalf("units admitted: %d with reservations on, %d off; want both the bucket's 5000", on, off)
			}
			if local != 0 {
				t.Fatalf("%d bucket requests decided from slices", local)
			}
		})
	}
}
