package storetest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/leashd/leash/engine"
)

// SeedEnv names the environment variable that fixes the property tests' random seed, to
// replay a failure; the seed in use is logged.
const SeedEnv = "LEASH_STORETEST_SEED"

func (h *harness) rng() *rand.Rand {
	seed := rand.Uint64()
	if s := os.Getenv(SeedEnv); s != "" {
		if v, err := strconv.ParseUint(s, 10, 64); err == nil {
			seed = v
		}
	}
	h.t.Logf("seed %d (set %s to replay)", seed, SeedEnv)
	return rand.New(rand.NewPCG(seed, 0x1ea5e))
}

// concurrently runs fn n times in each of g goroutines and counts the true results.
func concurrently(g, n int, fn func(g int) bool) int {
	var count atomic.Int64
	var wg sync.WaitGroup
	for i := range g {
		wg.Go(func() {
			for range n {
				if fn(i) {
					count.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(count.Load())
}

// checkRetry verifies a denied verdict's reset_ms: one ms earlier the same request is
// still denied, at reset_ms it is allowed (and spends). It leaves the clock there.
func (h *harness) checkRetry(c engine.Counter, limit, cost int64, d engine.Decision) engine.Decision {
	h.t.Helper()
	now := h.clock.NowMS()
	h.clock.SetMS(now + d.ResetMS - 1)
	if e := h.spend(c, limit, cost); e.Allowed {
		h.t.Fatalf("%s L=%d W=%d cost %d denied at Base%+d with reset_ms %d, but allowed %d ms later",
			c.Algorithm, limit, c.WindowMS, cost, now-baseMS, d.ResetMS, d.ResetMS-1)
	}
	h.clock.SetMS(now + d.ResetMS)
	e := h.spend(c, limit, cost)
	if !e.Allowed {
		h.t.Fatalf("%s L=%d W=%d cost %d denied at Base%+d with reset_ms %d, and still denied then",
			c.Algorithm, limit, c.WindowMS, cost, now-baseMS, d.ResetMS)
	}
	return e
}

func propertyTests() []subtest {
	return []subtest{
		{"FixedWindowAtMostLimitPerWindow", func(h *harness) {
			rng := h.rng()
			for i := range h.cases(120) {
				L, W := 1+rng.Int64N(12), 1+rng.Int64N(3000)
				c := h.counter(engine.FixedWindow, fmt.Sprintf("p%d", i), W)
				h.clock.SetMS(baseMS + rng.Int64N(W))
				spent := map[int64]int64{} // window → units allowed
				for range 40 {
					h.clock.SetMS(h.clock.NowMS() + rng.Int64N(W/3+2))
					cost := rng.Int64N(L + 1)
					d := h.spend(c, L, cost)
					w := h.clock.NowMS() / W
					if d.Allowed != (spent[w]+cost <= L) {
						h.t.Fatalf("case %d: L=%d W=%d: %d spent in the window, cost %d: allowed=%v", i, L, W, spent[w], cost, d.Allowed)
					}
					if d.Allowed {
						spent[w] += cost
					}
					if d.Remaining != L-spent[w] {
						h.t.Fatalf("case %d: remaining %d, want %d", i, d.Remaining, L-spent[w])
					}
					if !d.Allowed && rng.IntN(3) == 0 {
						d = h.checkRetry(c, L, cost, d)
						spent[h.clock.NowMS()/W] += cost
					}
				}
				for w, n := range spent {
					if n > L {
						h.t.Fatalf("case %d: %d units allowed in window %d under limit %d", i, n, w, L)
					}
				}
			}
		}},
		{"TokenBucketAtMostRate", func(h *harness) {
			rng := h.rng()
			type event struct{ at, units int64 }
			for i := range h.cases(120) {
				L, W := 1+rng.Int64N(12), 1+rng.Int64N(5000)
				c := h.counter(engine.TokenBucket, fmt.Sprintf("p%d", i), W)
				var events []event
				for range 40 {
					h.clock.SetMS(h.clock.NowMS() + rng.Int64N(2*W/L+2))
					cost := rng.Int64N(min(L, 3) + 1)
					d := h.spend(c, L, cost)
					if d.Allowed {
						events = append(events, event{h.clock.NowMS(), cost})
					} else if rng.IntN(3) == 0 {
						h.checkRetry(c, L, cost, d)
						events = append(events, event{h.clock.NowMS(), cost})
					}
					if d.Remaining < 0 || d.Remaining > L {
						h.t.Fatalf("case %d: remaining %d outside [0, %d]", i, d.Remaining, L)
					}
				}
				// In any interval of length t, at most L + floor(L·t/W) units.
				for a := range events {
					var sum int64
					for b := a; b < len(events); b++ {
						sum += events[b].units
						t := events[b].at - events[a].at
						if bound := L + L*t/W; sum > bound {
							h.t.Fatalf("case %d: L=%d W=%d: %d units allowed in %d ms (bound %d)", i, L, W, sum, t, bound)
						}
					}
				}
			}
		}},
		{"SlidingWindowResetIsExact", func(h *harness) {
			rng := h.rng()
			for i := range h.cases(80) {
				L, W := 1+rng.Int64N(20), 1+rng.Int64N(3000)
				c := h.counter(engine.SlidingWindow, fmt.Sprintf("p%d", i), W)
				for range 30 {
					h.clock.SetMS(h.clock.NowMS() + rng.Int64N(W/2+2))
					cost := rng.Int64N(L + 1)
					d := h.spend(c, L, cost)
					if d.Remaining < 0 || d.Remaining > L || d.ResetMS < 0 || d.ResetMS > 2*W {
						h.t.Fatalf("case %d: L=%d W=%d: remaining %d, reset_ms %d out of range", i, L, W, d.Remaining, d.ResetMS)
					}
					if !d.Allowed {
						h.checkRetry(c, L, cost, d)
					}
				}
			}
		}},
		{"LeasesNeverOverLimit", func(h *harness) {
			rng := h.rng()
			for i := range h.cases(100) {
				limit, ttl := 1+rng.Int64N(5), 1+rng.Int64N(500)
				set := h.set(fmt.Sprintf("p%d", i))
				held := map[string]int64{} // model: token → expiry
				var tokens []string
				purge := func(now int64) {
					for tok, exp := range held {
						if exp <= now {
							delete(held, tok)
						}
					}
				}
				for op := range 60 {
					now := h.clock.NowMS()
					purge(now)
					switch rng.IntN(4) {
					case 0:
						h.clock.SetMS(now + rng.Int64N(ttl+1))
					case 1, 2:
						tok := fmt.Sprintf("t%d", op)
						d, err := h.s.Acquire(h.ctx, set, tok, limit, ttl)
						if err != nil {
							h.t.Fatal(err)
						}
						want := int64(len(held)) < limit
						if d.Allowed != want {
							h.t.Fatalf("case %d op %d: %d held under limit %d: allowed=%v", i, op, len(held), limit, d.Allowed)
						}
						if d.Allowed {
							held[tok] = now + ttl
							tokens = append(tokens, tok)
							if d.ResetMS != ttl {
								h.t.Fatalf("case %d: reset_ms %d, want ttl %d", i, d.ResetMS, ttl)
							}
						} else {
							soonest := int64(1 << 62)
							for _, exp := range held {
								soonest = min(soonest, exp)
							}
							if d.ResetMS != soonest-now {
								h.t.Fatalf("case %d: denied reset_ms %d, want %d", i, d.ResetMS, soonest-now)
							}
						}
						if d.Active != int64(len(held)) || d.Active > limit {
							h.t.Fatalf("case %d op %d: active %d, model %d, limit %d", i, op, d.Active, len(held), limit)
						}
					case 3:
						if len(tokens) == 0 {
							continue
						}
						tok := tokens[rng.IntN(len(tokens))]
						_, isHeld := held[tok]
						if rng.IntN(2) == 0 {
							r, err := h.s.Release(h.ctx, set, tok)
							if err != nil {
								h.t.Fatal(err)
							}
							delete(held, tok)
							if r.Released != isHeld || r.Active != int64(len(held)) {
								h.t.Fatalf("case %d op %d: release %+v, want released=%v active=%d", i, op, r, isHeld, len(held))
							}
						} else {
							r, err := h.s.Renew(h.ctx, set, tok, 0)
							if err != nil {
								h.t.Fatal(err)
							}
							if isHeld {
								held[tok] = now + ttl
							}
							if r.Renewed != isHeld || r.Active != int64(len(held)) {
								h.t.Fatalf("case %d op %d: renew %+v, want renewed=%v active=%d", i, op, r, isHeld, len(held))
							}
						}
					}
				}
			}
		}},
		{"LeasesConcurrent", func(h *harness) {
			set := h.set("k")
			const limit = 5
			var inUse atomic.Int64
			var over atomic.Int64
			acquired := concurrently(8, 60, func(g int) bool {
				tok := fmt.Sprintf("g%d-%d", g, rand.Uint64())
				d, err := h.s.Acquire(h.ctx, set, tok, limit, 3_600_000)
				if err != nil {
					h.t.Error(err)
					return false
				}
				if d.Active > limit {
					over.Add(1)
				}
				if !d.Allowed {
					return false
				}
				if inUse.Add(1) > limit {
					over.Add(1)
				}
				inUse.Add(-1)
				r, err := h.s.Release(h.ctx, set, tok)
				if err != nil || !r.Released {
					h.t.Errorf("release of a held lease: %+v, %v", r, err)
				}
				return true
			})
			if over.Load() > 0 {
				h.t.Fatalf("more than %d leases seen held at once (%d times)", limit, over.Load())
			}
			if acquired == 0 {
				h.t.Fatal("no lease was ever acquired")
			}
		}},
	}
}
