package storetest

import (
	"errors"

	"github.com/leashd/leash/engine"
)

// spendAll runs Store.SpendAll and fails the test on an error.
func (h *harness) spendAll(spends ...engine.Spend) []engine.Decision {
	h.t.Helper()
	out := make([]engine.Decision, len(spends))
	if err := h.s.SpendAll(h.ctx, spends, out); err != nil {
		h.t.Fatalf("SpendAll(%+v): %v", spends, err)
	}
	return out
}

type verdict struct {
	allowed            bool
	remaining, resetMS int64
}

func (h *harness) expectAll(got []engine.Decision, want ...verdict) {
	h.t.Helper()
	now := h.clock.NowMS()
	for i, w := range want {
		g := got[i]
		if g.Allowed != w.allowed || g.Remaining != w.remaining || g.ResetMS != w.resetMS || g.NowMS != now {
			h.t.Errorf("at Base%+d: SpendAll[%d]: got allowed=%v remaining=%d reset_ms=%d now=%d; want %v %d %d %d",
				now-baseMS, i, g.Allowed, g.Remaining, g.ResetMS, g.NowMS, w.allowed, w.remaining, w.resetMS, now)
		}
	}
}

func spendAllTests() []subtest {
	return []subtest{
		{"AllOrNothing", func(h *harness) {
			// 3 per second and 5 per 10 s on one key (an Envoy descriptor with two rate_limits).
			sec := h.counter(engine.FixedWindow, "k", 1000)
			ten := h.counter(engine.FixedWindow, "k", 10_000)
			both := func(cost int64) []engine.Decision {
				return h.spendAll(engine.Spend{Counter: sec, Limit: 3, Cost: cost}, engine.Spend{Counter: ten, Limit: 5, Cost: cost})
			}
			h.at(0)
			h.expectAll(both(1), verdict{yes, 2, 1000}, verdict{yes, 4, 10_000})
			h.expectAll(both(2), verdict{yes, 0, 1000}, verdict{yes, 2, 10_000})
			// The per-second limit denies: the ten-second counter is not spent either.
			h.expectAll(both(1), verdict{no, 0, 1000}, verdict{yes, 1, 10_000})
			h.expect(ten, 5, 0, yes, 2, 10_000)
			h.at(1000)
			h.expectAll(both(2), verdict{yes, 1, 1000}, verdict{yes, 0, 9000})
			// Now the ten-second limit denies and the per-second counter keeps its count.
			h.expectAll(both(1), verdict{yes, 0, 1000}, verdict{no, 0, 9000})
			h.expect(sec, 3, 0, yes, 1, 1000)
		}},
		{"MixedAlgorithms", func(h *harness) {
			tb := h.counter(engine.TokenBucket, "k", 1000)
			sw := h.counter(engine.SlidingWindow, "k", 1000)
			h.at(0)
			d := h.spendAll(engine.Spend{Counter: tb, Limit: 10, Cost: 4}, engine.Spend{Counter: sw, Limit: 4, Cost: 4})
			h.expectAll(d, verdict{yes, 6, 400}, verdict{yes, 0, 2000})
			d = h.spendAll(engine.Spend{Counter: tb, Limit: 10, Cost: 1}, engine.Spend{Counter: sw, Limit: 4, Cost: 1})
			if d[0].Allowed == false || d[1].Allowed == true {
				h.t.Fatalf("want bucket allowed and window denied, got %+v", d)
			}
			h.expect(tb, 10, 0, yes, 6, 400) // the bucket was not spent
		}},
		{"SingleEqualsSpend", func(h *harness) {
			a := h.counter(engine.SlidingWindow, "a", 1000)
			b := h.counter(engine.SlidingWindow, "b", 1000)
			for _, at := range []int64{0, 100, 900, 1000, 1500, 2100} {
				h.at(at)
				one := h.spendAll(engine.Spend{Counter: a, Limit: 3, Cost: 1})
				two := h.spend(b, 3, 1)
				if one[0] != two {
					h.t.Fatalf("at Base%+d: SpendAll %+v, Spend %+v", at, one[0], two)
				}
			}
		}},
		{"CostZeroLooks", func(h *harness) {
			c := h.counter(engine.FixedWindow, "k", 1000)
			h.at(0)
			h.expectAll(h.spendAll(engine.Spend{Counter: c, Limit: 2, Cost: 0}), verdict{yes, 2, 0})
			h.expectReset(c, false)
		}},
		{"Rejected", func(h *harness) {
			c := h.counter(engine.FixedWindow, "k", 1000)
			other := engine.Counter{Account: h.a, Namespace: "ns", Key: "other", Algorithm: engine.FixedWindow, WindowMS: 2000}
			cases := map[string][]engine.Spend{
				"none":          nil,
				"duplicate":     {{Counter: c, Limit: 1, Cost: 1}, {Counter: c, Limit: 2, Cost: 1}},
				"two keys":      {{Counter: c, Limit: 1, Cost: 1}, {Counter: other, Limit: 1, Cost: 1}},
				"cost > limit":  {{Counter: c, Limit: 1, Cost: 2}},
				"too many":      make([]engine.Spend, engine.MaxSpendAll+1),
				"bad algorithm": {{Counter: h.counter(engine.ConcurrentLimit, "k", 1000), Limit: 1, Cost: 1}},
			}
			for name, spends := range cases {
				out := make([]engine.Decision, len(spends))
				if err := h.s.SpendAll(h.ctx, spends, out); err == nil {
					h.t.Errorf("%s: SpendAll accepted %+v", name, spends)
				} else if errors.Is(err, engine.ErrNoRoom) {
					h.t.Errorf("%s: got %v", name, err)
				}
			}
			h.expectReset(c, false) // nothing was spent
		}},
	}
}
