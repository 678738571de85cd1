package redisstore

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/algo"
)

// model is engine/algo applied in Go to one counter, as the memory store does: the
// reference the Lua scripts must match exactly.
type model struct {
	st  [3]int64
	exp int64
	has bool
}

func (m *model) spend(alg engine.Algorithm, now, limit, window, cost int64, over bool) algo.Result {
	var st [3]int64
	if m.has && m.exp > now {
		st = m.st
	}
	var res algo.Result
	switch alg {
	case engine.FixedWindow:
		f := algo.FixedWindow
		if over {
			f = algo.FixedWindowOverdraft
		}
		s, r := f(algo.FixedState{Window: st[0], Count: st[1]}, now, limit, window, cost)
		st, res = [3]int64{s.Window, s.Count, 0}, r
	case engine.SlidingWindow:
		f := algo.SlidingWindow
		if over {
			f = algo.SlidingWindowOverdraft
		}
		s, r := f(algo.SlidingState{Window: st[0], Curr: st[1], Prev: st[2]}, now, limit, window, cost)
		st, res = [3]int64{s.Window, s.Curr, s.Prev}, r
	default:
		f := algo.TokenBucket
		if over {
			f = algo.TokenBucketOverdraft
		}
		s, r := f(algo.BucketState{TatMS: st[0], TatRem: st[1], Limit: st[2]}, now, limit, window, cost)
		st, res = [3]int64{s.TatMS, s.TatRem, s.Limit}, r
	}
	if res.Write {
		m.st, m.exp, m.has = st, res.ExpiresMS, true
	}
	return res
}

// TestScriptsMatchAlgo drives the Lua scripts and engine/algo through the same random
// sequences (limits changing, costs from 0 to the limit, overdraft spends with costs up to
// algo.MaxCount, windows from 1 ms to 366 days, instants far in the future) and requires identical verdicts, remaining and reset.
func TestScriptsMatchAlgo(t *testing.T) {
	t.Parallel()
	clock := testkit.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	matchAlgo(t, clock, rstore{Store: openStore(t, Options{URL: singleURL(t), Clock: clock})})
}

// TestReservedMatchAlgo: the same sequences with eager reservations (reserve.go): a
// counter's requests decided from its slice, here, give Redis's verdict, remaining and
// reset to the unit and the millisecond.
func TestReservedMatchAlgo(t *testing.T) {
	t.Parallel()
	clock := testkit.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	s := openReserving(t, Options{URL: singleURL(t), Clock: clock}, eager)
	matchAlgo(t, clock, s)
	// Traffic a slice covers: small costs, limits with room, time moving in small steps,
	// now and then a window's end, a new limit, an overdraft or a reset.
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
		for ci := range 8 {
			w := []int64{1000, 60_000, 3_600_000}[ci%3]
			limit := []int64{100, 1000, 1_000_000}[rng.IntN(3)]
			clock.SetMS(int64(1_700_000_000_000) + rng.Int64N(1<<40))
			counter := engine.Counter{Account: "acct", Namespace: "ns", Key: "hot" + string(rune('a'+ci)), Algorithm: alg, WindowMS: w}
			var m model
			for step := range 400 {
				clock.SetMS(clock.NowMS() + rng.Int64N(w/100+1))
				cost, over := 1+rng.Int64N(3), false
				switch rng.IntN(50) {
				case 0:
					clock.SetMS(clock.NowMS() + rng.Int64N(w))
				case 1:
					limit = []int64{50, 100, 1000, 1_000_000}[rng.IntN(4)]
				case 2:
					over, cost = true, rng.Int64N(2*limit)
				case 3:
					cost = 0
				case 4:
					if _, err := s.Reset(ctx, counter); err != nil {
						t.Fatal(err)
					}
					m = model{}
				}
				now := clock.NowMS()
				want := m.spend(alg, now, limit, w, cost, over)
				got, err := s.Spend(ctx, engine.Spend{Counter: counter, Limit: limit, Cost: cost, Overdraft: over})
				if err != nil {
					t.Fatal(err)
				}
				if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.ResetMS != want.ResetMS || got.NowMS != now {
					t.Fatalf("%v W=%d L=%d c=%d over=%v now=%d step %d: store {allowed %v remaining %d reset %d now %d}, algo {allowed %v remaining %d reset %d}",
						alg, w, limit, cost, over, now, step, got.Allowed, got.Remaining, got.ResetMS, got.NowMS, want.Allowed, want.Remaining, want.ResetMS)
				}
			}
		}
	}
	local, calls := s.ReserveStats()
	t.Logf("%d decided from a slice, %d reserve calls", local, calls)
	if local < 3000 || calls < 100 {
		t.Fatalf("%d decided from a slice, %d reserve calls: the sequences do not exercise reservations", local, calls)
	}
}

func matchAlgo(t *testing.T, clock *testkit.FakeClock, s rstore) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))

	windows := []int64{1, 2, 3, 7, 1000, 60_000, 86_400_000, 999_999_937, algo.MaxWindowMS}
	limits := []int64{1, 2, 3, 5, 7, 100, 1_000_003, algo.MaxLimit}
	steps, denied, limitChanges, overdrafts := 0, 0, 0, 0
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
		for ci := range 24 {
			w := windows[rng.IntN(len(windows))]
			if ci%3 == 0 {
				w = 1 + rng.Int64N(algo.MaxWindowMS)
			}
			limit := limits[rng.IntN(len(limits))]
			start := int64(1_700_000_000_000) + rng.Int64N(1<<41) // up to year ~2100
			clock.SetMS(start)
			counter := engine.Counter{Account: "acct", Namespace: "ns", Key: "k" + string(rune('a'+ci)), Algorithm: alg, WindowMS: w}
			var m model
			for step := range 40 {
				steps++
				switch rng.IntN(4) {
				case 0: // stay
				case 1:
					clock.SetMS(clock.NowMS() + rng.Int64N(w/4+1))
				case 2:
					clock.SetMS(clock.NowMS() + rng.Int64N(2*w+1))
				case 3:
					clock.SetMS(clock.NowMS() + rng.Int64N(3))
				}
				if rng.IntN(8) == 0 { // change the limit
					limitChanges++
					limit = limits[rng.IntN(len(limits))]
					if rng.IntN(2) == 0 {
						limit = 1 + rng.Int64N(algo.MaxLimit)
					}
				}
				var cost int64
				switch rng.IntN(5) {
				case 0:
					cost = 0
				case 1:
					cost = limit
				case 2:
					cost = 1
				default:
					cost = rng.Int64N(limit + 1)
				}
				over := rng.IntN(3) == 0
				if over {
					overdrafts++
					switch rng.IntN(3) {
					case 0:
						cost = min(algo.MaxCount, limit+1+rng.Int64N(3*limit))
					case 1:
						cost = algo.MaxCount
					}
				}
				now := clock.NowMS()
				want := m.spend(alg, now, limit, w, cost, over)
				got, err := s.Spend(ctx, engine.Spend{Counter: counter, Limit: limit, Cost: cost, Overdraft: over})
				if err != nil {
					t.Fatalf("%v W=%d step %d: %v", alg, w, step, err)
				}
				if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.ResetMS != want.ResetMS || got.NowMS != now {
					t.Fatalf("%v W=%d L=%d c=%d over=%v now=%d step %d: redis {allowed %v remaining %d reset %d now %d}, algo {allowed %v remaining %d reset %d}",
						alg, w, limit, cost, over, now, step, got.Allowed, got.Remaining, got.ResetMS, got.NowMS, want.Allowed, want.Remaining, want.ResetMS)
				}
				if !got.Allowed {
					denied++
				}
			}
			// Reset agrees on "held unexpired state".
			existed, err := s.Reset(ctx, counter)
			if err != nil {
				t.Fatal(err)
			}
			if want := m.has && m.exp > clock.NowMS(); existed != want {
				t.Fatalf("%v W=%d: reset existed = %v, algo says %v", alg, w, existed, want)
			}
		}
	}
	t.Logf("%d decisions identical in Lua and Go (%d denied, %d limit changes, %d overdraft spends)", steps, denied, limitChanges, overdrafts)
	if denied < steps/10 {
		t.Fatalf("only %d of %d decisions denied: the sequences do not exercise denials", denied, steps)
	}
}
