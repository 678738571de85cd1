package storetest

import "github.com/leashd/leash/engine"

// The expected numbers below are worked out by hand from spec §4.6–§4.10;
// BaseMS is a multiple of 1000 ms, so with W = 1000 the window boundaries are at Base + k·1000
// (Base meaning BaseMS in the comments and messages).

func fixedWindowTests() []subtest {
	return []subtest{
		{"ExactlyLimitThenDenied", func(h *harness) {
			c := h.counter(engine.FixedWindow, "k", 1000)
			h.steps(c, []step{
				{250, 3, 1, yes, 2, 750},
				{250, 3, 1, yes, 1, 750},
				{250, 3, 1, yes, 0, 750},
				{250, 3, 1, no, 0, 750},
				{999, 3, 1, no, 0, 1},
				{1000, 3, 1, yes, 2, 1000}, // next window
				{1000, 3, 2, yes, 0, 1000},
				{1500, 3, 1, no, 0, 500},
			})
		}},
		{"EpochAlignment", func(h *harness) {
			// 1_800_000_001_000 = 257_142_857·7000 + 2000: the window ends at 1_800_000_006_000.
			c := h.counter(engine.FixedWindow, "k", 7000)
			h.clock.SetMS(1_800_000_001_000)
			h.expect(c, 2, 2, yes, 0, 5000)
			h.clock.SetMS(1_800_000_005_999)
			h.expect(c, 2, 1, no, 0, 1)
			h.clock.SetMS(1_800_000_006_000)
			h.expect(c, 2, 1, yes, 1, 7000)
			// Base is a multiple of one minute.
			m := h.counter(engine.FixedWindow, "m", 60_000)
			h.steps(m, []step{
				{-1, 1, 1, yes, 0, 1},
				{0, 1, 1, yes, 0, 60_000},
				{59_999, 1, 1, no, 0, 1},
			})
		}},
		{"CostAboveRemainingSpendsNothing", func(h *harness) {
			c := h.counter(engine.FixedWindow, "k", 1000)
			h.steps(c, []step{
				{100, 10, 7, yes, 3, 900},
				{100, 10, 4, no, 3, 900},
				{100, 10, 3, yes, 0, 900},
				{100, 10, 1, no, 0, 900},
			})
		}},
		{"CostZero", func(h *harness) {
			c := h.counter(engine.FixedWindow, "k", 1000)
			h.at(250)
			h.expect(c, 5, 0, yes, 5, 0)
			h.expectReset(c, false) // a look creates no state
			h.expect(c, 5, 5, yes, 0, 750)
			h.expect(c, 5, 0, yes, 0, 750) // at the limit: allowed, remaining 0
			h.expect(c, 3, 0, no, 0, 750)  // over a lowered limit: denied
		}},
		{"LimitChangeKeepsCount", func(h *harness) {
			c := h.counter(engine.FixedWindow, "k", 1000)
			h.steps(c, []step{
				{0, 5, 3, yes, 2, 1000},
				{10, 10, 1, yes, 6, 990},
				{20, 4, 1, no, 0, 980},
				{30, 5, 1, yes, 0, 970},
			})
		}},
	}
}

func slidingWindowTests() []subtest {
	return []subtest{
		{"Estimate", func(h *harness) {
			// 4 units in window A; in window B the estimate is ceil(4·(1000−t)/1000).
			c := h.counter(engine.SlidingWindow, "k", 1000)
			h.steps(c, []step{
				{100, 10, 4, yes, 6, 1900},
				{1250, 10, 0, yes, 7, 750}, // 4·0.75 = 3
				{1300, 10, 0, yes, 7, 700}, // 2.8 → 3
				{1500, 10, 0, yes, 8, 500}, // 2
				{1501, 10, 0, yes, 8, 499}, // 1.996 → 2
				{1750, 10, 0, yes, 9, 250}, // 1
				{1999, 10, 0, yes, 9, 1},   // 0.004 → 1
				{2000, 10, 0, yes, 10, 0},  // two windows on: nothing left
			})
		}},
		{"LimitThenDenied", func(h *harness) {
			c := h.counter(engine.SlidingWindow, "k", 1000)
			h.steps(c, []step{
				{0, 3, 1, yes, 2, 2000},
				{0, 3, 2, yes, 0, 2000},
				{0, 3, 1, no, 0, 1334}, // next window at t=334: ceil(3·666/1000) = 2
			})
		}},
		{"DeniedResetPhase1", func(h *harness) {
			c := h.counter(engine.SlidingWindow, "k", 1000)
			h.steps(c, []step{
				{0, 10, 10, yes, 0, 2000},
				// curr 10 > 9: next window at t' = 1000 − floor(9·1000/10) = 100.
				{1, 10, 1, no, 0, 1099},
				{1200, 10, 2, yes, 0, 1800}, // ceil(10·0.8) = 8; 8 + 2 = 10
				// R = 10−2−1 = 7; d = 800 − floor(7·1000/10) = 100.
				{1200, 10, 1, no, 0, 100},
				{1299, 10, 1, no, 0, 1}, // ceil(7.01) = 8
				{1300, 10, 1, yes, 0, 1700},
			})
		}},
		{"DeniedResetCeiling", func(h *harness) {
			c := h.counter(engine.SlidingWindow, "k", 1000)
			h.steps(c, []step{
				{0, 5, 3, yes, 2, 2000},
				{1000, 5, 1, yes, 1, 2000}, // ceil(3·1) = 3; 3+1 = 4
				// ceil(2.7) = 3: 3+1+2 > 5. R = 2; d = 900 − floor(2000/3) = 900 − 666 = 234.
				{1100, 5, 2, no, 1, 234},
				{1333, 5, 2, no, 1, 1},     // ceil(3·667/1000) = ceil(2.001) = 3
				{1334, 5, 2, yes, 0, 1666}, // ceil(1.998) = 2: 2+1+2 = 5
				{1334, 5, 0, yes, 0, 1666}, // at the limit
				// R = 5−3−1 = 1: d = 666 − floor(1000/3) = 333.
				{1334, 5, 1, no, 0, 333},
				{1666, 5, 1, no, 0, 1},     // ceil(3·334/1000) = ceil(1.002) = 2
				{1667, 5, 1, yes, 0, 1333}, // ceil(0.999) = 1: 1+3+1 = 5
				{2000, 5, 1, yes, 0, 2000}, // window C: prev 4 weighs 4, curr 1
			})
		}},
		{"DeniedResetPhase2", func(h *harness) {
			c := h.counter(engine.SlidingWindow, "k", 1000)
			h.steps(c, []step{
				{500, 10, 6, yes, 4, 1500},
				// 6+5 > 10 in this window; next window at t' = 1000 − floor(5·1000/6) = 167.
				{500, 10, 5, no, 4, 667},
				{1166, 10, 5, no, 4, 1}, // ceil(6·0.834) = ceil(5.004) = 6
				{1167, 10, 5, yes, 0, 1833},
			})
		}},
		{"DeniedResetWindowEnd", func(h *harness) {
			c := h.counter(engine.SlidingWindow, "k", 1000)
			h.steps(c, []step{
				{0, 10, 4, yes, 6, 2000},
				{1000, 10, 6, yes, 0, 2000}, // ceil(4·1) = 4; 4+6 = 10
				// ceil(4·0.6) = 3: 3+6+4 > 10; R = 0 never fits while prev weighs; at the next
				// window prev 6 weighs 6 and 6+4 = 10 fits at once.
				{1400, 10, 4, no, 1, 600},
				{1999, 10, 4, no, 3, 1}, // ceil(0.004) = 1
				{2000, 10, 4, yes, 0, 2000},
			})
		}},
		{"CostZeroOverLoweredLimit", func(h *harness) {
			c := h.counter(engine.SlidingWindow, "k", 1000)
			h.steps(c, []step{
				{0, 5, 5, yes, 0, 2000},
				{0, 5, 0, yes, 0, 2000},
				// curr 5 > 3: next window at t' = 1000 − floor(3·1000/5) = 400.
				{0, 3, 0, no, 0, 1400},
				{0, 8, 3, yes, 0, 2000}, // the count is kept: 5+3 = 8
				// ceil(8·0.6) = 5 > 3; d = 600 − floor(3·1000/8) = 225: ceil(8·0.375) = 3.
				{1400, 3, 0, no, 0, 225},
				{1625, 3, 0, yes, 0, 375},
			})
		}},
		{"FreshCostZero", func(h *harness) {
			c := h.counter(engine.SlidingWindow, "k", 1000)
			h.at(0)
			h.expect(c, 7, 0, yes, 7, 0)
			h.expectReset(c, false)
		}},
	}
}

func tokenBucketTests() []subtest {
	return []subtest{
		{"Refill", func(h *harness) {
			// L=10, W=1000: one token per 100 ms.
			c := h.counter(engine.TokenBucket, "k", 1000)
			h.steps(c, []step{
				{0, 10, 1, yes, 9, 100},
				{0, 10, 9, yes, 0, 1000},
				{0, 10, 1, no, 0, 100},
				{50, 10, 1, no, 0, 50},
				{100, 10, 1, yes, 0, 1000},
				{350, 10, 0, yes, 2, 750}, // 2.5 tokens back: 2
				{350, 10, 3, no, 2, 50},   // needs 300 ms of refill, has 250
				{350, 10, 2, yes, 0, 950},
				{1300, 10, 0, yes, 10, 0}, // full
				{1300, 10, 10, yes, 0, 1000},
			})
		}},
		{"FractionalRate", func(h *harness) {
			// L=3, W=1000: one token per 333⅓ ms.
			c := h.counter(engine.TokenBucket, "k", 1000)
			h.steps(c, []step{
				{0, 3, 1, yes, 2, 334},
				{0, 3, 1, yes, 1, 667},
				{0, 3, 1, yes, 0, 1000},
				{0, 3, 1, no, 0, 334},
				{333, 3, 1, no, 0, 1},
				{334, 3, 1, yes, 0, 1000},  // TAT = 1333⅓
				{1000, 3, 0, yes, 2, 334},  // (1000+1000−1333⅓)·3/1000 = 2
				{1000, 3, 2, yes, 0, 1000}, // TAT = 2000 exactly
			})
		}},
		{"LimitChangeReexpressesDebt", func(h *harness) {
			c := h.counter(engine.TokenBucket, "k", 1000)
			h.steps(c, []step{
				{0, 10, 10, yes, 0, 1000},
				// 500 ms of debt at L=10 is 5 units; at L=20 they are 250 ms: 15 left.
				{500, 20, 0, yes, 15, 250},
				// The new rate applies from that call: 100 ms later 2 more units are back.
				{600, 20, 0, yes, 17, 150},
				// 3 units spent; at L=4 they are 750 ms of debt: 1 left.
				{600, 4, 0, yes, 1, 750},
				{600, 4, 2, no, 1, 250},
				// 3 units spent do not fit under L=2: the bucket is empty (debt one window).
				{600, 2, 0, yes, 0, 1000},
				{600, 2, 1, no, 0, 500},
				{1100, 2, 1, yes, 0, 1000},
			})
		}},
		{"FreshCostZero", func(h *harness) {
			c := h.counter(engine.TokenBucket, "k", 1000)
			h.at(0)
			h.expect(c, 4, 0, yes, 4, 0)
			h.expectReset(c, false)
		}},
	}
}

func counterTests() []subtest {
	return []subtest{
		{"TwoWindowsIndependent", func(h *harness) {
			perSecond := h.counter(engine.FixedWindow, "k", 1000)
			perHour := h.counter(engine.FixedWindow, "k", 3_600_000)
			h.at(0)
			h.expect(perSecond, 2, 2, yes, 0, 1000)
			h.expect(perHour, 5, 1, yes, 4, 3_600_000)
			h.expect(perSecond, 2, 1, no, 0, 1000)
			h.expect(perHour, 5, 4, yes, 0, 3_600_000)
			h.expect(perHour, 5, 1, no, 0, 3_600_000)
			h.at(1000)
			h.expect(perSecond, 2, 1, yes, 1, 1000)
			h.expect(perHour, 5, 1, no, 0, 3_599_000)
		}},
		{"TwoAlgorithmsIndependent", func(h *harness) {
			h.at(0)
			for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
				h.expect(h.counter(alg, "k", 1000), 1, 1, yes, 0, map[engine.Algorithm]int64{
					engine.FixedWindow: 1000, engine.SlidingWindow: 2000, engine.TokenBucket: 1000}[alg])
			}
			h.expect(h.counter(engine.FixedWindow, "k", 1000), 1, 1, no, 0, 1000)
			h.expect(h.counter(engine.SlidingWindow, "k", 1000), 1, 1, no, 0, 2000) // weighs all of the next window
			h.expect(h.counter(engine.TokenBucket, "k", 1000), 1, 1, no, 0, 1000)
		}},
		{"KeysAndNamespacesIndependent", func(h *harness) {
			h.at(0)
			c := h.counter(engine.FixedWindow, "k", 1000)
			other := c
			other.Key = "k2"
			otherNS := c
			otherNS.Namespace = "ns2"
			h.expect(c, 1, 1, yes, 0, 1000)
			h.expect(other, 1, 1, yes, 0, 1000)
			h.expect(otherNS, 1, 1, yes, 0, 1000)
			h.expect(c, 1, 1, no, 0, 1000)
		}},
		{"UnusualKeys", func(h *harness) {
			// Keys are opaque: separators, braces, long and non-ASCII keys are counters like any.
			h.at(0)
			keys := []string{"a:b", "a", "a:b:c", "{tag}", "ключ", "x y", stringOf('z', 512)}
			for _, k := range keys {
				h.expect(h.counter(engine.FixedWindow, k, 1000), 1, 1, yes, 0, 1000)
			}
			for _, k := range keys {
				h.expect(h.counter(engine.FixedWindow, k, 1000), 1, 1, no, 0, 1000)
			}
		}},
		{"ClockAndLimitEcho", func(h *harness) {
			h.at(12_345)
			now, err := h.s.NowMS(h.ctx)
			if err != nil || now != baseMS+12_345 {
				h.t.Fatalf("NowMS = %d, %v; want %d", now, err, baseMS+12_345)
			}
			d := h.spend(h.counter(engine.TokenBucket, "k", 1000), 7, 0)
			if d.NowMS != baseMS+12_345 || d.Limit != 7 {
				h.t.Fatalf("decision %+v: want NowMS %d and Limit 7", d, baseMS+12_345)
			}
		}},
		{"ConcurrentSpendsAreAtomic", func(h *harness) {
			c := h.counter(engine.FixedWindow, "k", 3_600_000)
			allowed := concurrently(8, 50, func(int) bool {
				d, err := h.s.Spend(h.ctx, engine.Spend{Counter: c, Limit: 100, Cost: 1})
				if err != nil {
					h.t.Error(err)
				}
				return d.Allowed
			})
			if allowed != 100 {
				h.t.Fatalf("%d of 400 concurrent spends allowed under limit 100", allowed)
			}
		}},
	}
}

func stringOf(b byte, n int) string {
	s := make([]byte, n)
	for i := range s {
		s[i] = b
	}
	return string(s)
}

func resetTests() []subtest {
	return []subtest{
		{"NeverUsed", func(h *harness) {
			h.expectReset(h.counter(engine.FixedWindow, "k", 1000), false)
		}},
		{"FixedWindow", func(h *harness) {
			c := h.counter(engine.FixedWindow, "k", 1000)
			h.at(0)
			h.expect(c, 3, 2, yes, 1, 1000)
			h.expectReset(c, true)
			h.expectReset(c, false)
			h.expect(c, 3, 1, yes, 2, 1000) // starts fresh
			h.at(1000)
			h.expectReset(c, false) // the window ended: expired state does not exist
		}},
		{"SlidingWindow", func(h *harness) {
			c := h.counter(engine.SlidingWindow, "k", 1000)
			h.at(100)
			h.expect(c, 10, 4, yes, 6, 1900)
			h.at(1500)
			h.expectReset(c, true) // the previous window still weighs
			h.at(1600)
			h.expect(c, 10, 1, yes, 9, 1400) // fresh: no previous window
			h.at(2999)
			h.expectReset(c, true) // the state of window B lives until Base+3000
			h.expect(c, 10, 1, yes, 9, 1001)
			h.at(4000)
			h.expectReset(c, false) // two windows on: expired
		}},
		{"TokenBucket", func(h *harness) {
			c := h.counter(engine.TokenBucket, "k", 1000)
			h.at(0)
			h.expect(c, 10, 1, yes, 9, 100)
			h.at(99)
			h.expectReset(c, true)
			h.expect(c, 10, 1, yes, 9, 100) // fresh
			h.at(199)
			h.expectReset(c, false) // refilled: no state
		}},
		{"OnlyThatCounter", func(h *harness) {
			h.at(0)
			fixed := h.counter(engine.FixedWindow, "k", 1000)
			sliding := h.counter(engine.SlidingWindow, "k", 1000)
			long := h.counter(engine.FixedWindow, "k", 60_000)
			h.expect(fixed, 2, 1, yes, 1, 1000)
			h.expect(sliding, 2, 1, yes, 1, 2000)
			h.expect(long, 2, 1, yes, 1, 60_000)
			h.expectReset(fixed, true)
			h.expect(sliding, 2, 1, yes, 0, 2000)
			h.expect(long, 2, 1, yes, 0, 60_000)
			h.expect(fixed, 2, 1, yes, 1, 1000)
		}},
	}
}

func pingTests() []subtest {
	return []subtest{
		{"Answers", func(h *harness) {
			if err := h.s.Ping(h.ctx); err != nil {
				h.t.Fatalf("Ping: %v", err)
			}
		}},
	}
}
