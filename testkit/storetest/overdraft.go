package storetest

import "github.com/leashd/leash/engine"

// Overdraft spends (spec §4.12): a denied cost is counted all the same, so a charge made
// after the fact (an AI gateway's token count) exhausts the budget. The numbers are worked
// out by hand from spec §4.6–§4.8 and §4.12.

// over spends in overdraft mode and checks the verdict.
func (h *harness) over(c engine.Counter, limit, cost int64, allowed bool, remaining, resetMS int64) {
	h.t.Helper()
	d, err := h.s.Spend(h.ctx, engine.Spend{Counter: c, Limit: limit, Cost: cost, Overdraft: true})
	if err != nil {
		h.t.Fatalf("Spend(%+v, limit %d, cost %d, overdraft): %v", c, limit, cost, err)
	}
	now := h.clock.NowMS()
	if d.Allowed != allowed || d.Remaining != remaining || d.ResetMS != resetMS || d.Limit != limit || d.NowMS != now {
		h.t.Errorf("at Base%+d: overdraft %s %q W=%d limit %d cost %d: got allowed=%v remaining=%d reset_ms=%d limit=%d now=%d; want %v %d %d %d %d",
			now-baseMS, c.Algorithm, c.Key, c.WindowMS, limit, cost,
			d.Allowed, d.Remaining, d.ResetMS, d.Limit, d.NowMS, allowed, remaining, resetMS, limit, now)
	}
}

func overdraftTests() []subtest {
	return []subtest{
		{"FixedWindowTokenBudget", func(h *harness) {
			// 1000 tokens a minute: check 1, charge 5000 after the response, check again.
			c := h.counter(engine.FixedWindow, "ai", 60_000)
			h.at(0)
			h.over(c, 1000, 1, yes, 999, 60_000)
			h.over(c, 1000, 5000, no, 0, 60_000)
			h.at(10)
			h.over(c, 1000, 1, no, 0, 59_990)
			h.expect(c, 1000, 0, no, 0, 59_990) // count 5002: even a look is denied
			h.at(59_999)
			h.expect(c, 1000, 1, no, 0, 1)
			h.at(60_000)
			h.over(c, 1000, 1, yes, 999, 60_000)
			// Without overdraft a denied cost is not counted (spec §4.9).
			n := h.counter(engine.FixedWindow, "plain", 60_000)
			h.expect(n, 1000, 1, yes, 999, 60_000)
			h.expect(n, 1000, 1000, no, 999, 60_000)
			h.expect(n, 1000, 1, yes, 998, 60_000)
		}},
		{"FixedWindowSaturates", func(h *harness) {
			c := h.counter(engine.FixedWindow, "k", 1000)
			h.at(0)
			h.over(c, 1, engine.MaxOverdraftCost, no, 0, 1000)
			h.over(c, 1, engine.MaxOverdraftCost, no, 0, 1000)
			// The count stopped at 2,000,000,000: above every limit, and no overflow.
			h.expect(c, engine.MaxLimit, 0, no, 0, 1000)
		}},
		{"SlidingWindowCountsTheOverdraft", func(h *harness) {
			c := h.counter(engine.SlidingWindow, "k", 1000)
			h.at(250)
			h.over(c, 10, 2, yes, 8, 1750)
			// Counted 22; a request of min(20, 10) fits once window +1 ends.
			h.over(c, 10, 20, no, 0, 1750)
			// One unit fits once 22·(1000 − t)/1000 ≤ 9 in window +1: t ≥ 591.
			h.expect(c, 10, 1, no, 0, 750+1000-409)
			h.at(1000)
			h.expect(c, 10, 0, no, 0, 546) // a look fits once 22·(1000 − t)/1000 ≤ 10
			h.at(1590)
			h.expect(c, 10, 1, no, 0, 1)
			h.at(1591)
			h.expect(c, 10, 1, yes, 0, 1409)
		}},
		{"TokenBucketGoesIntoDebt", func(h *harness) {
			// 1000 per minute: one unit is 60 ms.
			c := h.counter(engine.TokenBucket, "ai", 60_000)
			h.at(0)
			h.over(c, 1000, 1, yes, 999, 60)
			// 5000 units more: TAT = 60 + 300,000 ms; the full limit is back a window later.
			h.over(c, 1000, 5000, no, 0, 300_060)
			h.expect(c, 1000, 1, no, 0, 240_120)
			h.at(240_119)
			h.expect(c, 1000, 1, no, 0, 1)
			h.at(240_120)
			h.expect(c, 1000, 1, yes, 0, 60_000)
		}},
		{"TokenBucketDebtCapped", func(h *harness) {
			// At most 1,000 windows of debt.
			c := h.counter(engine.TokenBucket, "k", 1000)
			h.at(0)
			h.over(c, 1, engine.MaxOverdraftCost, no, 0, 1_000_000)
			h.at(999_999)
			h.expect(c, 1, 1, no, 0, 1)
			h.at(1_000_000)
			h.expect(c, 1, 1, yes, 0, 1000)
		}},
		{"TokenBucketDebtAtNewLimits", func(h *harness) {
			// One unit a day, charged 1000: 1000 days of debt (beyond 2^36 ms).
			const day = 86_400_000
			c := h.counter(engine.TokenBucket, "k", day)
			h.at(0)
			h.over(c, 1, 1000, no, 0, 1000*day)
			// A higher limit shrinks the debt exactly: 1000 units at 2 a day is 500 days.
			h.expect(c, 2, 0, no, 0, 500*day-day)
			h.expect(c, 3, 0, no, 0, 1000*day/3-day)
			// 1000 units at 7 a day: 12,342,857,142 + 6/7 ms.
			h.expect(c, 7, 0, no, 0, 12_342_857_142-day+1)
			// A lower limit keeps the debt (rounded up to a whole ms).
			h.expect(c, 1, 0, no, 0, 12_342_857_143-day)
		}},
		{"SpendAllCountsEveryCounter", func(h *harness) {
			sec := h.counter(engine.FixedWindow, "k", 1000)
			ten := h.counter(engine.FixedWindow, "k", 10_000)
			h.at(0)
			got := h.spendAll(engine.Spend{Counter: sec, Limit: 3, Cost: 4, Overdraft: true},
				engine.Spend{Counter: ten, Limit: 5, Cost: 4, Overdraft: true})
			h.expectAll(got, verdict{no, 0, 1000}, verdict{yes, 1, 10_000})
			// Both counted 4, although the per-second limit denied.
			h.expect(sec, 3, 0, no, 0, 1000)
			h.expect(ten, 5, 0, yes, 1, 10_000)
		}},
	}
}
