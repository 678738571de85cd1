// Package algo is the arithmetic of Leash's rate-limit algorithms (spec §4.6–§4.10): pure
// functions from a counter's state, the time and a request to the verdict and the new
// state. It keeps no clock and no storage; a store reads the state, calls one function
// under its own lock (or inside its own script) and writes the state back when told to.
//
// Every formula is exact integer arithmetic. Times are Unix milliseconds, L is the limit
// (1 ≤ L ≤ MaxLimit < 2^30), W the window in milliseconds (1 ≤ W ≤ MaxWindowMS < 2^35) and
// c the cost (0 ≤ c ≤ L; in overdraft mode 0 ≤ c ≤ MaxCount). Counts never exceed
// MaxLimit, because a denied spend spends nothing, except in overdraft mode (spec §4.12),
// where a denied spend is counted too: window counts saturate at MaxCount < 2^31 and a
// bucket's debt at MaxDebtWindows windows (< 2^45 ms). The only products that can exceed
// 64 bits are of the form a·b/d with a < 2^31, b < 2^53 (b < 2^36 outside the
// re-expression of an overdraft's debt) and d < 2^35 and a quotient below 2^53; they are computed by an exact mulDiv.
// In Go that is math/bits' 128-bit Mul64 and Div64; the Redis Lua implementation, whose
// numbers are doubles exact only below 2^53, uses the limb-split division of MulDivLimbs.
// Both are exact, so both give the same integers. Every other intermediate value is an
// instant plus at most two windows, or a count plus a remainder, far below 2^53.
//
// A state's zero value is a counter that holds no state. Each function also returns
// whether the new state must be written and the instant from which it no longer matters
// (its expiry), so a store can set a TTL; a store must treat state at or past its expiry
// as the zero state.
//
// The clock is assumed to move forward. If it steps back, state from a window other than
// the current one counts as nothing (fixed_window, sliding_window), and a token bucket's
// debt is capped at one window.
package algo

import (
	"math"
	"math/bits"
)

// Bounds of the inputs the formulas are exact for (spec §6.3, §4.10).
const (
	MaxLimit    int64 = 1_000_000_000
	MaxWindowMS int64 = 31_622_400_000
	// MaxCount is the most units a fixed or sliding window counts in a window, and the
	// largest cost an overdraft spend takes (spec §4.12): counts above any limit saturate
	// here, so every product the formulas form stays exact.
	MaxCount int64 = 2_000_000_000
	// MaxDebtWindows bounds a token bucket's debt: at most this many windows (spec §4.12).
	MaxDebtWindows int64 = 1000
)

// Result is an algorithm's verdict on one request and what the store must do with the
// returned state.
type Result struct {
	// Allowed reports whether the cost fits; a denied request spends nothing.
	Allowed bool
	// Remaining is the number of units that could be spent now, never negative.
	Remaining int64
	// ResetMS: if allowed, ms until Remaining is back to the limit with no further traffic
	// (0 when it already is); if denied, the smallest whole number of ms after which the
	// same request would be allowed with no further traffic.
	ResetMS int64
	// Write reports whether the store must save the returned state; when false the
	// stored state, if any, stays as it was (and no state is created).
	Write bool
	// ExpiresMS is the instant (Unix ms) from which the returned state is equivalent to
	// no state; meaningful when Write is true.
	ExpiresMS int64
}

// mulDivFunc computes floor(a·b/d) and a·b mod d exactly. The algorithms take it as a
// parameter so tests can run them on MulDivLimbs, the arithmetic of the Lua scripts, and
// check the bounds that arithmetic needs at every call.
type mulDivFunc func(a, b, d int64) (q, r int64)

// MulDiv returns floor(a·b/d) and a·b mod d, exactly, for 0 ≤ a, b and 1 ≤ d whose
// quotient fits in an int64. The product is formed in 128 bits (math/bits). A quotient
// that does not fit saturates to math.MaxInt64; the algorithms never ask for one.
func MulDiv(a, b, d int64) (q, r int64) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(d) {
		return math.MaxInt64, 0
	}
	uq, ur := bits.Div64(hi, lo, uint64(d))
	if uq > math.MaxInt64 {
		return math.MaxInt64, 0
	}
	return int64(uq), int64(ur)
}

// limbBits is the width of the low limb MulDivLimbs splits b into.
const limbBits = 17

// MulDivLimbs returns floor(a·b/d) and a·b mod d computing only values below 2^53, the
// way the Redis Lua scripts (whose numbers are IEEE doubles) must compute them. It is the
// reference for the Lua code and is tested to agree with MulDiv.
//
// Preconditions: 0 ≤ a < 2^31, 0 ≤ b < 2^53, 1 ≤ d < 2^35, quotient < 2^53.
//
// For b < 2^36 (every call but the re-expression of an overdraft's debt, spec §4.12) b is
// split into 17-bit limbs, b = bh·2^17 + bl with bh < 2^19 and bl < 2^17, so
//
//	a·b = (a·bh)·2^17 + a·bl
//	x   = a·bh                  < 2^31·2^19 = 2^50
//	q1  = floor(x/d), r1 = x − q1·d   (r1 < d < 2^35)
//	y   = r1·2^17 + a·bl         < 2^52 + 2^48 < 2^53
//	q2  = floor(y/d), r2 = y − q2·d
//	a·b = (q1·2^17 + q2)·d + r2, hence q = q1·2^17 + q2 and r = r2.
//
// Each floor(x/d) with x < 2^53 is done as in Lua: q = math.floor(x / d) in floating
// point, then r = x − q·d, then one correction (r < 0: q−1, r+d; r ≥ d: q+1, r−d).
// The floating quotient is off by at most one, because x/d is correctly rounded and
// q ≤ x < 2^53; q·d then stays below x + d, which is below 2^53 for both divisions
// (x < 2^50; y + d < 2^52 + 2^48 + 2^35), so the correction is exact. Lua's own %
// operator must not be used: in Lua 5.1 it is a − floor(a/b)·b with the same floating
// floor and no correction.
//
// A larger b (below 2^53) is split into four 17-bit limbs, the top one first, and divided
// the same way one limb at a time: each step divides r·2^17 + a·limb < 2^52 + 2^48.
func MulDivLimbs(a, b, d int64) (q, r int64) {
	const limb = 1 << limbBits
	if b < 1<<36 {
		bh, bl := b>>limbBits, b&(limb-1)
		q1, r1 := floorDivF(a*bh, d)
		q2, r2 := floorDivF(r1*limb+a*bl, d)
		return q1*limb + q2, r2
	}
	for shift := 3 * limbBits; shift >= 0; shift -= limbBits {
		qi, ri := floorDivF(r*limb+a*((b>>shift)&(limb-1)), d)
		q, r = q*limb+qi, ri
	}
	return q, r
}

// floorDivF divides 0 ≤ x < 2^53 by 1 ≤ d < 2^35 exactly using a floating-point quotient
// and one correction step, as the Lua scripts do.
func floorDivF(x, d int64) (q, r int64) {
	q = int64(math.Floor(float64(x) / float64(d)))
	r = x - q*d
	if r < 0 {
		q, r = q-1, r+d
	} else if r >= d {
		q, r = q+1, r-d
	}
	return q, r
}

// floorDiv returns floor(a/b) for b > 0, also for negative a.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
