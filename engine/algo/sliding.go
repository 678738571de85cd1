package algo

// SlidingState is a sliding_window counter's state: the units spent in the current and
// the previous window.
type SlidingState struct {
	// Window is the window index floor(t/W) that Curr belongs to.
	Window int64
	// Curr is the number of units spent in window Window.
	Curr int64
	// Prev is the number of units spent in window Window−1.
	Prev int64
}

// SlidingWindow decides a sliding_window request of cost units under limit per window of
// windowMS at nowMS, with the two-window weighted estimate prev·(W−t)/W + curr.
//
// Windows are aligned as in FixedWindow: w = floor(now/W), t = now − w·W (0 ≤ t < W).
// The stored state rolls over: Window = w keeps (curr, prev) = (Curr, Prev);
// Window = w−1 gives (0, Curr); any other window gives (0, 0).
//
// The weighted previous count is rounded up, P = ceil(prev·(W−t)/W), which decides
// exactly like the real-valued estimate: curr, c and L are integers, so
// prev·(W−t)/W + curr + c ≤ L ⟺ P ≤ L − curr − c.
//
//	allowed   = P + curr + c ≤ L              (then curr += c)
//	remaining = max(0, L − curr − P)
//	expiry    = (w+2)·W
//
// reset when allowed: (w+2)·W − now if curr > 0 (curr still weighs in window w+1);
// else (w+1)·W − now if prev > 0 (then P > 0 until window w ends); else 0.
//
// reset when denied (spec §4.7) is the smallest whole d > 0 at which the request
// fits with no further traffic; the estimate never rises while time passes, so:
//
//   - Phase 1, still in window w (d < W − t): with R = L − curr − c, the request fits at
//     t+d iff ceil(prev·(W−t−d)/W) ≤ R ⟺ prev·(W−t−d) ≤ R·W ⟺ W−t−d ≤ floor(R·W/prev)
//     (R is an integer, so ceil(x) ≤ R ⟺ x ≤ R; W−t−d is an integer). Hence
//     d = W − t − floor(R·W/prev) when R ≥ 0 and prev > 0, if 0 < d < W − t. (A denial
//     implies R < prev, so floor(R·W/prev) < W.)
//   - Phase 2, window w+1 from d0 = W − t on: prev' = curr, curr' = 0, R2 = L − c ≥ 0. It
//     fits at t' iff ceil(curr·(W−t')/W) ≤ R2, i.e. t' ≥ W − floor(R2·W/curr); so
//     d' = 0 if curr = 0 or curr ≤ R2, else W − floor(R2·W/curr) (then R2 < curr and
//     the quotient is below W). The answer is d0 + d' ≤ 2·W − t.
//
// The state is written only when units are spent (allowed and c > 0).
func SlidingWindow(s SlidingState, nowMS, limit, windowMS, cost int64) (SlidingState, Result) {
	return slidingWindow(s, nowMS, limit, windowMS, cost, false, MulDiv)
}

// SlidingWindowOverdraft is SlidingWindow in overdraft mode (spec §4.12): a denied request
// with a cost above 0 is counted all the same, curr = min(curr + c, MaxCount), and the
// state is written. The verdict stays a denial; its reset is the wait, from the counted
// state, until a request of min(c, L) fits. cost may exceed limit (up to MaxCount).
func SlidingWindowOverdraft(s SlidingState, nowMS, limit, windowMS, cost int64) (SlidingState, Result) {
	return slidingWindow(s, nowMS, limit, windowMS, cost, true, MulDiv)
}

func slidingWindow(s SlidingState, now, L, W, c int64, over bool, mulDiv mulDivFunc) (SlidingState, Result) {
	w := floorDiv(now, W)
	var curr, prev int64
	switch s.Window {
	case w:
		curr, prev = s.Curr, s.Prev
	case w - 1:
		prev = s.Curr
	}
	t := now - w*W
	p, r := mulDiv(prev, W-t, W)
	if r > 0 {
		p++
	}
	res := Result{ExpiresMS: (w + 2) * W}
	if p+curr+c <= L {
		curr += c
		res.Allowed = true
		res.Write = c > 0
		switch {
		case curr > 0:
			res.ResetMS = (w+2)*W - now
		case prev > 0:
			res.ResetMS = (w+1)*W - now
		}
	} else if over && c > 0 {
		curr = min(curr+c, MaxCount)
		res.Write = true
		res.ResetMS = slidingRetry(t, curr, prev, L, W, min(c, L), mulDiv)
	} else {
		res.ResetMS = slidingRetry(t, curr, prev, L, W, c, mulDiv)
	}
	res.Remaining = max(0, L-curr-p)
	return SlidingState{Window: w, Curr: curr, Prev: prev}, res
}

// slidingRetry is the denied reset of SlidingWindow: phase 1, else phase 2.
func slidingRetry(t, curr, prev, L, W, c int64, mulDiv mulDivFunc) int64 {
	d0 := W - t
	if R := L - curr - c; R >= 0 && prev > 0 && R < prev {
		f, _ := mulDiv(R, W, prev)
		if d := d0 - f; d > 0 && d < d0 {
			return d
		}
	}
	R2 := L - c
	if curr == 0 || curr <= R2 {
		return d0
	}
	f, _ := mulDiv(R2, W, curr)
	return d0 + W - f
}
