package algo

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
)

// This file checks the exact integer formulas against a reference written straight from
// the definitions of spec §4.6–§4.8 in rational arithmetic (math/big), over random request
// sequences, and runs every algorithm on the Lua arithmetic (MulDivLimbs) with its bounds
// asserted at each call.

func rat(n int64) *big.Rat { return new(big.Rat).SetInt64(n) }

func ratFloor(x *big.Rat) int64 {
	q := new(big.Int).Div(x.Num(), x.Denom()) // Euclidean: floor for a positive denominator
	return q.Int64()
}

func ratCeil(x *big.Rat) int64 {
	return -ratFloor(new(big.Rat).Neg(x))
}

// search returns the smallest d in [lo, hi] with ok(d), assuming ok is monotone and ok(hi).
func search(lo, hi int64, ok func(int64) bool) int64 {
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

type verdict struct {
	allowed          bool
	remaining, reset int64
}

// --- fixed_window reference ---

type refFixedState struct{ window, count int64 }

func refFixed(s refFixedState, now, L, W, c int64) (refFixedState, verdict) {
	w := new(big.Int).Div(big.NewInt(now), big.NewInt(W)).Int64()
	count := int64(0)
	if s.window == w {
		count = s.count
	}
	end := (w + 1) * W
	v := verdict{allowed: count+c <= L}
	if v.allowed {
		count += c
	}
	v.remaining = max(0, L-count)
	// Allowed: until the window ends, unless nothing is spent; denied: the window's end.
	if !v.allowed || count > 0 {
		v.reset = end - now
	}
	if v.allowed && c > 0 {
		s = refFixedState{w, count}
	}
	return s, v
}

// --- sliding_window reference: estimate prev·(W−t)/W + curr as a rational ---

type refSlidingState struct{ window, curr, prev int64 }

// counts returns (curr, prev, t) seen from instant now.
func (s refSlidingState) counts(now, W int64) (curr, prev, t int64) {
	w := now / W
	switch {
	case s.window == w:
		curr, prev = s.curr, s.prev
	case s.window == w-1:
		prev = s.curr
	}
	return curr, prev, now - w*W
}

func refEstimate(s refSlidingState, now, W int64) *big.Rat {
	curr, prev, t := s.counts(now, W)
	e := new(big.Rat).Mul(rat(prev), big.NewRat(W-t, W))
	return e.Add(e, rat(curr))
}

func refSlidingRemaining(s refSlidingState, now, L, W int64) int64 {
	return max(0, ratFloor(new(big.Rat).Sub(rat(L), refEstimate(s, now, W))))
}

func refSliding(s refSlidingState, now, L, W, c int64) (refSlidingState, verdict) {
	fits := func(at int64) bool {
		e := refEstimate(s, at, W)
		return e.Add(e, rat(c)).Cmp(rat(L)) <= 0
	}
	v := verdict{allowed: fits(now)}
	if v.allowed {
		curr, prev, _ := s.counts(now, W)
		ns := refSlidingState{now / W, curr + c, prev}
		if c > 0 {
			s = ns
		}
		v.remaining = refSlidingRemaining(ns, now, L, W)
		v.reset = search(0, 2*W, func(d int64) bool { return refSlidingRemaining(ns, now+d, L, W) == L })
	} else {
		v.remaining = refSlidingRemaining(s, now, L, W)
		v.reset = search(1, 2*W, func(d int64) bool { return fits(now + d) })
	}
	return s, v
}

// --- token_bucket reference: TAT as a rational ---

type refBucketState struct {
	tat   *big.Rat // nil: no state
	limit int64
}

func refBucket(s refBucketState, now, L, W, c int64) (refBucketState, verdict, bool) {
	nowR := rat(now)
	tat := nowR
	rewritten := false
	if s.tat != nil && s.tat.Cmp(nowR) > 0 {
		debt := new(big.Rat).Sub(s.tat, nowR)
		if debt.Cmp(rat(W)) > 0 {
			debt = rat(W)
		}
		if s.limit != L {
			debt.Mul(debt, big.NewRat(s.limit, L))
			if debt.Cmp(rat(W)) > 0 {
				debt = rat(W)
			}
			rewritten = true
		}
		tat = new(big.Rat).Add(nowR, debt)
	}
	costMS := big.NewRat(c*1, 1)
	costMS.Mul(costMS, big.NewRat(W, L))
	after := new(big.Rat).Add(tat, costMS)
	remainingAt := func(tat *big.Rat) int64 {
		x := new(big.Rat).Sub(new(big.Rat).Add(nowR, rat(W)), tat)
		x.Mul(x, big.NewRat(L, W))
		return min(L, max(0, ratFloor(x)))
	}
	v := verdict{allowed: new(big.Rat).Sub(after, nowR).Cmp(rat(W)) <= 0}
	out := refBucketState{tat: tat, limit: L}
	if v.allowed {
		if c > 0 {
			out.tat = after
		}
		v.remaining = remainingAt(out.tat)
		v.reset = max(0, ratCeil(new(big.Rat).Sub(out.tat, nowR)))
	} else {
		v.remaining = remainingAt(tat)
		// Smallest d at which the same request fits: max(TAT, now+d) + c·W/L − (now+d) ≤ W.
		v.reset = search(1, 2*W, func(d int64) bool {
			at := rat(now + d)
			t := tat
			if t.Cmp(at) < 0 {
				t = at
			}
			x := new(big.Rat).Add(t, costMS)
			return x.Sub(x, at).Cmp(rat(W)) <= 0
		})
		if want := ratCeil(new(big.Rat).Sub(new(big.Rat).Sub(after, rat(W)), nowR)); want != v.reset {
			panic(fmt.Sprintf("reference disagrees with itself: %d vs %d", want, v.reset))
		}
	}
	write := v.allowed && c > 0 || rewritten
	if !write {
		return s, v, false
	}
	return out, v, true
}

// checkedMulDiv runs MulDivLimbs, asserting the bounds the Lua arithmetic needs and that it
// agrees with MulDiv.
func checkedMulDiv(t *testing.T) mulDivFunc {
	return func(a, b, d int64) (int64, int64) {
		if a < 0 || a >= 1<<31 || b < 0 || b >= 1<<53 || d < 1 || d >= 1<<35 {
			t.Fatalf("mulDiv(%d, %d, %d) outside the Lua bounds", a, b, d)
		}
		q, r := MulDiv(a, b, d)
		if q >= 1<<53 {
			t.Fatalf("mulDiv(%d, %d, %d) quotient %d not below 2^53", a, b, d, q)
		}
		lq, lr := MulDivLimbs(a, b, d)
		if lq != q || lr != r {
			t.Fatalf("MulDivLimbs(%d, %d, %d) = %d, %d; MulDiv = %d, %d", a, b, d, lq, lr, q, r)
		}
		return q, r
	}
}

type gen struct{ *rand.Rand }

func (g gen) window() int64 {
	switch g.IntN(8) {
	case 0:
		return 1 + g.Int64N(3)
	case 1:
		return 1000
	case 2:
		return 7
	case 3:
		return MaxWindowMS
	case 4:
		return 1 + g.Int64N(MaxWindowMS)
	default:
		return 1 + g.Int64N(100_000)
	}
}

func (g gen) limit() int64 {
	switch g.IntN(7) {
	case 0:
		return 1 + g.Int64N(3)
	case 1:
		return MaxLimit
	case 2:
		return 1 + g.Int64N(MaxLimit)
	default:
		return 1 + g.Int64N(100)
	}
}

func (g gen) cost(L int64) int64 {
	switch g.IntN(6) {
	case 0:
		return 0
	case 1:
		return L
	case 2:
		return 1
	default:
		return g.Int64N(L + 1)
	}
}

func (g gen) advance(W int64) int64 {
	switch g.IntN(6) {
	case 0:
		return 0
	case 1:
		return g.Int64N(min(W, 10) + 1)
	case 2:
		return g.Int64N(3 * W)
	default:
		return g.Int64N(W/4 + 1)
	}
}

func crossSeed(t *testing.T) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 2))
}

const (
	crossCases = 300
	crossSteps = 12
)

func TestCrossCheckFixed(t *testing.T) {
	g := gen{crossSeed(t)}
	for i := 0; i < crossCases; i++ {
		W, L := g.window(), g.limit()
		now := base + g.Int64N(W)
		var s FixedState
		var ref refFixedState
		for step := 0; step < crossSteps; step++ {
			now += g.advance(W)
			if g.IntN(8) == 0 {
				L = g.limit()
			}
			c := g.cost(L)
			ns, r := FixedWindow(s, now, L, W, c)
			var v verdict
			ref, v = refFixed(ref, now, L, W, c)
			if r.Allowed != v.allowed || r.Remaining != v.remaining || r.ResetMS != v.reset {
				t.Fatalf("case %d step %d (now=%d L=%d W=%d c=%d state=%+v): got %+v, reference %+v", i, step, now, L, W, c, s, r, v)
			}
			if r.Write {
				s = ns
				if r.ExpiresMS != (now/W+1)*W {
					t.Fatalf("expiry %d", r.ExpiresMS)
				}
			}
			if s.Count != ref.count && s.Window == now/W {
				t.Fatalf("state %+v, reference %+v", s, ref)
			}
		}
	}
}

func TestCrossCheckSliding(t *testing.T) {
	g := gen{crossSeed(t)}
	for i := 0; i < crossCases; i++ {
		W, L := g.window(), g.limit()
		now := base + g.Int64N(W)
		var s, sl SlidingState
		var ref refSlidingState
		for step := 0; step < crossSteps; step++ {
			now += g.advance(W)
			if g.IntN(8) == 0 {
				L = g.limit()
			}
			c := g.cost(L)
			ns, r := SlidingWindow(s, now, L, W, c)
			nsl, rl := slidingWindow(sl, now, L, W, c, false, checkedMulDiv(t))
			if r != rl || ns != nsl {
				t.Fatalf("limb arithmetic differs: %+v %+v vs %+v %+v", r, ns, rl, nsl)
			}
			var v verdict
			ref, v = refSliding(ref, now, L, W, c)
			if r.Allowed != v.allowed || r.Remaining != v.remaining || r.ResetMS != v.reset {
				t.Fatalf("case %d step %d (now=%d L=%d W=%d c=%d state=%+v): got %+v, reference %+v", i, step, now, L, W, c, s, r, v)
			}
			if r.Write {
				s, sl = ns, nsl
				if r.ExpiresMS != (now/W+2)*W {
					t.Fatalf("expiry %d", r.ExpiresMS)
				}
			}
			if got := (refSlidingState{s.Window, s.Curr, s.Prev}); c > 0 && r.Allowed && got != ref {
				t.Fatalf("state %+v, reference %+v", s, ref)
			}
		}
	}
}

func TestCrossCheckBucket(t *testing.T) {
	g := gen{crossSeed(t)}
	for i := 0; i < crossCases; i++ {
		W, L := g.window(), g.limit()
		now := base + g.Int64N(W)
		var s, sl BucketState
		var ref refBucketState
		for step := 0; step < crossSteps; step++ {
			now += g.advance(W)
			if g.IntN(6) == 0 {
				L = g.limit()
			}
			c := g.cost(L)
			ns, r := TokenBucket(s, now, L, W, c)
			nsl, rl := tokenBucket(sl, now, L, W, c, false, checkedMulDiv(t))
			if r != rl || ns != nsl {
				t.Fatalf("limb arithmetic differs: %+v %+v vs %+v %+v", r, ns, rl, nsl)
			}
			var v verdict
			var write bool
			ref, v, write = refBucket(ref, now, L, W, c)
			if r.Allowed != v.allowed || r.Remaining != v.remaining || r.ResetMS != v.reset || r.Write != write {
				t.Fatalf("case %d step %d (now=%d L=%d W=%d c=%d state=%+v): got %+v, reference %+v write=%v", i, step, now, L, W, c, s, r, v, write)
			}
			if r.Write {
				s, sl = ns, nsl
				tat := new(big.Rat).Add(rat(s.TatMS), big.NewRat(s.TatRem, s.Limit))
				if tat.Cmp(ref.tat) != 0 || s.Limit != ref.limit || s.TatRem < 0 || s.TatRem >= s.Limit {
					t.Fatalf("state %+v (TAT %s), reference %s at limit %d", s, tat.RatString(), ref.tat.RatString(), ref.limit)
				}
				if r.ExpiresMS != ratCeil(tat) {
					t.Fatalf("expiry %d, want ceil(%s)", r.ExpiresMS, tat.RatString())
				}
			}
		}
	}
}
