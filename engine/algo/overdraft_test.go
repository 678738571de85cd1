package algo

import "testing"

// The overdraft mode of spec §4.12: a denied cost is counted (window algorithms) or
// charged into debt (token bucket); the verdict stays a denial.

func TestFixedWindowOverdraft(t *testing.T) {
	w0 := base / 60_000
	end := (w0 + 1) * 60_000
	tests := []struct {
		name           string
		s              FixedState
		now, L, c      int64
		over           bool
		allowed, write bool
		remaining      int64
		reset          int64
		count          int64
	}{
		{"fits: as without", FixedState{w0, 1}, base, 1000, 1, true, true, true, 998, end - base, 2},
		{"charge past the limit is counted", FixedState{w0, 1}, base, 1000, 5000, true, false, true, 0, end - base, 5001},
		{"then every cost denies", FixedState{w0, 5001}, base + 10, 1000, 1, true, false, true, 0, end - base - 10, 5002},
		{"a look writes nothing", FixedState{w0, 5001}, base + 10, 1000, 0, true, false, false, 0, end - base - 10, 5001},
		{"next window starts afresh", FixedState{w0, 5001}, end, 1000, 1, true, true, true, 999, 60_000, 1},
		{"count saturates", FixedState{w0, MaxCount - 1}, base, 1000, 5, true, false, true, 0, end - base, MaxCount},
		{"without overdraft nothing is counted", FixedState{w0, 1}, base, 1000, 1000, false, false, false, 999, end - base, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := FixedWindow
			if tt.over {
				f = FixedWindowOverdraft
			}
			s, r := f(tt.s, tt.now, tt.L, 60_000, tt.c)
			if r.Allowed != tt.allowed || r.Write != tt.write || r.Remaining != tt.remaining || r.ResetMS != tt.reset || s.Count != tt.count {
				t.Fatalf("got allowed=%v write=%v remaining=%d reset=%d count=%d, want %v %v %d %d %d",
					r.Allowed, r.Write, r.Remaining, r.ResetMS, s.Count, tt.allowed, tt.write, tt.remaining, tt.reset, tt.count)
			}
		})
	}
}

func TestSlidingWindowOverdraft(t *testing.T) {
	w0 := base / 1000
	tests := []struct {
		name           string
		s              SlidingState
		c              int64
		allowed, write bool
		reset          int64
		curr           int64
	}{
		// L=10, W=1000, t=250. Counted 22: the full limit is back when window w0+1 ends.
		{"charge above the limit", SlidingState{w0, 2, 0}, 20, false, true, 750 + 1000, 22},
		// Counted 11; a cost of 6 fits in window w0+1 once 11·(W−t')/W ≤ 4: t' ≥ 1000 − 363.
		{"charge above what is left", SlidingState{w0, 5, 0}, 6, false, true, 750 + 1000 - 363, 11},
		{"fits", SlidingState{w0, 5, 0}, 5, true, true, 1750, 10},
		{"a look over the limit", SlidingState{w0, 22, 0}, 0, false, false, 750 + 1000 - 454, 22},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, r := SlidingWindowOverdraft(tt.s, base+250, 10, 1000, tt.c)
			if r.Allowed != tt.allowed || r.Write != tt.write || r.ResetMS != tt.reset || s.Curr != tt.curr {
				t.Fatalf("got allowed=%v write=%v reset=%d curr=%d, want %v %v %d %d",
					r.Allowed, r.Write, r.ResetMS, s.Curr, tt.allowed, tt.write, tt.reset, tt.curr)
			}
			if !r.Allowed && r.Remaining != 0 {
				t.Fatalf("remaining %d on a denial", r.Remaining)
			}
		})
	}
}

func TestTokenBucketOverdraft(t *testing.T) {
	const W = 60_000
	tests := []struct {
		name           string
		s              BucketState
		L, c           int64
		over           bool
		allowed, write bool
		remaining      int64
		reset          int64
		tat            int64
	}{
		{"fits", BucketState{}, 1000, 1, true, true, true, 999, 60, base + 60},
		// 5000 units at 60 ms each: 300 s of debt; a full bucket is back after 300,060 ms
		// plus one more window.
		{"charged into debt", BucketState{base + 60, 0, 1000}, 1000, 5000, true, false, true, 0, 300_060, base + 300_060},
		{"in debt: one more unit is charged", BucketState{base + 300_060, 0, 1000}, 1000, 1, true, false, true, 0, 240_180, base + 300_120},
		{"in debt without overdraft: denied, nothing charged", BucketState{base + 300_060, 0, 1000}, 1000, 1, false, false, false, 0, 240_120, base + 300_060},
		{"a look in debt", BucketState{base + 300_060, 0, 1000}, 1000, 0, true, false, false, 0, 240_060, base + 300_060},
		{"debt capped at MaxDebtWindows windows", BucketState{}, 1, MaxCount, true, false, true, 0, MaxDebtWindows * W, base + MaxDebtWindows*W},
		// A lower limit keeps an overdraft's debt; a higher one shrinks it.
		{"lower limit keeps the debt", BucketState{base + 300_060, 0, 1000}, 500, 0, true, false, true, 0, 240_060, base + 300_060},
		{"higher limit shrinks the debt", BucketState{base + 300_060, 0, 1000}, 2000, 0, true, false, true, 0, 90_030, base + 150_030},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := TokenBucket
			if tt.over {
				f = TokenBucketOverdraft
			}
			s, r := f(tt.s, base, tt.L, W, tt.c)
			if r.Allowed != tt.allowed || r.Write != tt.write || r.Remaining != tt.remaining || r.ResetMS != tt.reset {
				t.Fatalf("got allowed=%v write=%v remaining=%d reset=%d, want %v %v %d %d",
					r.Allowed, r.Write, r.Remaining, r.ResetMS, tt.allowed, tt.write, tt.remaining, tt.reset)
			}
			if s.TatMS != tt.tat || s.TatRem != 0 {
				t.Fatalf("got TAT %d+%d/L, want %d", s.TatMS, s.TatRem, tt.tat)
			}
		})
	}
}

// TestOverdraftProperties drives the three algorithms through random sequences of
// ordinary and overdraft spends (costs up to MaxCount), on the limb arithmetic of the Lua
// scripts with its bounds checked at every call, and checks spec §4.12: an overdraft that
// fits is an ordinary spend; one that does not keeps the ordinary verdict with remaining 0,
// counts its cost, and its reset is exact: a request of min(c, L) fits at now + reset and
// not a millisecond before.
func TestOverdraftProperties(t *testing.T) {
	g := gen{crossSeed(t)}
	md := checkedMulDiv(t)
	type state = [3]int64
	run := func(alg int, s state, now, L, W, c int64, over bool) (state, Result) {
		switch alg {
		case 0:
			ns, r := fixedWindow(FixedState{s[0], s[1]}, now, L, W, c, over)
			return state{ns.Window, ns.Count}, r
		case 1:
			ns, r := slidingWindow(SlidingState{s[0], s[1], s[2]}, now, L, W, c, over, md)
			return state{ns.Window, ns.Curr, ns.Prev}, r
		default:
			ns, r := tokenBucket(BucketState{s[0], s[1], s[2]}, now, L, W, c, over, md)
			return state{ns.TatMS, ns.TatRem, ns.Limit}, r
		}
	}
	denials := 0
	for i := 0; i < 3*crossCases; i++ {
		alg := i % 3
		W, L := g.window(), g.limit()
		now := base + g.Int64N(W)
		var s state
		for step := 0; step < crossSteps; step++ {
			now += g.advance(W)
			if g.IntN(8) == 0 {
				L = g.limit()
			}
			c := g.cost(L)
			switch g.IntN(4) {
			case 0:
				c = min(MaxCount, L+1+g.Int64N(3*L))
			case 1:
				c = MaxCount
			}
			s1, r1 := run(alg, s, now, L, W, c, true)
			if c <= L {
				s0, r0 := run(alg, s, now, L, W, c, false)
				if r0.Allowed != r1.Allowed || r0.Allowed && (r0 != r1 || s0 != s1) {
					t.Fatalf("alg %d case %d step %d (now=%d L=%d W=%d c=%d state=%v): ordinary %+v, overdraft %+v", alg, i, step, now, L, W, c, s, r0, r1)
				}
			}
			if !r1.Allowed {
				denials++
				if r1.Remaining != 0 || c > 0 && !r1.Write || r1.ResetMS < 1 {
					t.Fatalf("alg %d case %d step %d (now=%d L=%d W=%d c=%d state=%v): denied overdraft %+v", alg, i, step, now, L, W, c, s, r1)
				}
				// Exact reset, from the counted state, for a request of min(c, L).
				cr := min(c, L)
				if _, r := run(alg, s1, now+r1.ResetMS, L, W, cr, false); !r.Allowed {
					t.Fatalf("alg %d case %d step %d (now=%d L=%d W=%d c=%d): not allowed at now+reset %d", alg, i, step, now, L, W, c, r1.ResetMS)
				}
				if _, r := run(alg, s1, now+r1.ResetMS-1, L, W, cr, false); r.Allowed {
					t.Fatalf("alg %d case %d step %d (now=%d L=%d W=%d c=%d): allowed before now+reset %d", alg, i, step, now, L, W, c, r1.ResetMS)
				}
			}
			if r1.Write && g.IntN(3) > 0 {
				s = s1
			}
		}
	}
	if denials < crossCases {
		t.Fatalf("only %d overdraft denials", denials)
	}
}
