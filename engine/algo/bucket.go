package algo

// BucketState is a token_bucket counter's state: its theoretical arrival time (GCRA) and
// the limit it was written with.
//
// The theoretical arrival time is TAT = TatMS + TatRem/Limit ms, an exact rational: one
// unit costs W/L ms, which is rarely a whole number. TAT − now is the bucket's debt: the
// ms until it is full again. The zero value (TAT in 1970) is a full bucket.
type BucketState struct {
	// TatMS is the whole-millisecond part of the theoretical arrival time.
	TatMS int64
	// TatRem is the fractional part in units of 1/Limit ms, 0 ≤ TatRem < Limit.
	TatRem int64
	// Limit is the limit TatRem is expressed in.
	Limit int64
}

// TokenBucket decides a token_bucket request of cost units on a bucket of capacity limit
// refilled continuously at limit units per windowMS, at nowMS (GCRA: one timestamp per
// counter). The bucket starts full.
//
// A TAT at or before now is a full bucket: TAT = now. Spending c units costs c·W/L ms,
// split exactly as c·W = q·L + r, so the new TAT' = TAT + q + r/L (carrying the fraction).
// With X = now + W − TatMS:
//
//	allowed   = TAT' − now ≤ W  (TatMS' − now < W, or = W with TatRem' = 0)
//	remaining = floor((now + W − TAT)·L/W), TAT after the spend if allowed, before if
//	            denied; exactly floor(X·L/W) when TatRem = 0, else
//	            floor(((X−1)·L + (L − TatRem))/W); never below 0, never above L
//	reset     = allowed: ceil(TAT' − now), 0 when TAT' ≤ now
//	            denied:  ceil(TAT' − W − now), the wait until TAT' − now ≤ W
//	expiry    = ceil(TAT) of the written state
//
// A changed limit (spec §4.8) keeps the units already spent and re-expresses them at
// the new rate: the debt TAT − now = D + TatRem/Lold (D = TatMS − now) becomes
// (D·Lold + TatRem)/Lnew ms, computed exactly as a quotient and remainder modulo Lnew.
// A limit lowered below the units already spent leaves the bucket empty rather than
// carrying a debt longer than one window: when (D·Lold + TatRem) ≥ W·Lnew, tested as
// floor((D·Lold + TatRem)/W) ≥ Lnew, the debt is exactly W. Outside overdraft mode this
// keeps every debt, and so every value the formulas multiply, at most W < 2^35. A re-expressed state is written
// even when nothing is spent, so the new rate applies from the first request that uses it.
//
// A debt above MaxDebtWindows·W (the clock stepped back) is capped there. Outside
// overdraft mode a debt is at most W; a larger one comes from an overdraft (or a clock
// that stepped back) and is kept: the bucket refills from it.
//
// Otherwise the state is written only when units are spent (allowed and c > 0), so a look
// at a full bucket creates nothing.
func TokenBucket(s BucketState, nowMS, limit, windowMS, cost int64) (BucketState, Result) {
	return tokenBucket(s, nowMS, limit, windowMS, cost, false, MulDiv)
}

// TokenBucketOverdraft is TokenBucket in overdraft mode (spec §4.12): a denied request
// with a cost above 0 is charged all the same, TAT” = TAT + c·W/L, the bucket going into
// debt beyond one window (at most MaxDebtWindows windows), and the state is written. The
// verdict stays a denial with remaining 0; its reset is the wait, from the charged state,
// until a request of min(c, L) fits. cost may exceed limit (up to MaxCount).
func TokenBucketOverdraft(s BucketState, nowMS, limit, windowMS, cost int64) (BucketState, Result) {
	return tokenBucket(s, nowMS, limit, windowMS, cost, true, MulDiv)
}

func tokenBucket(s BucketState, now, L, W, c int64, over bool, mulDiv mulDivFunc) (BucketState, Result) {
	capMS := MaxDebtWindows * W
	ms, rem := s.TatMS, s.TatRem
	rewritten := false
	if s.Limit <= 0 || ms < now || (ms == now && rem == 0) {
		ms, rem = now, 0 // full bucket
	} else {
		debt := ms - now
		if debt > capMS || (debt == capMS && rem > 0) {
			debt, rem = capMS, 0
		}
		if s.Limit != L {
			debt, rem = reexpress(debt, rem, s.Limit, L, W, mulDiv)
			rewritten = true
		}
		ms = now + debt
	}

	res := Result{}
	out := BucketState{TatMS: ms, TatRem: rem, Limit: L}
	// Spend: c·W/L = q + r/L (c ≤ L; a larger cost, in overdraft mode, never fits).
	if c <= L {
		ms2, rem2 := addCost(ms, rem, c, L, W, mulDiv)
		d := ms2 - now
		if d < W || (d == W && rem2 == 0) {
			res.Allowed = true
			res.ResetMS = d
			if rem2 > 0 {
				res.ResetMS++
			}
			if c > 0 {
				out.TatMS, out.TatRem = ms2, rem2
				res.Write = true
			}
		} else if !over || c == 0 {
			res.ResetMS = d - W
			if rem2 > 0 {
				res.ResetMS++
			}
		}
	}
	if !res.Allowed && over && c > 0 {
		// Charged past empty: the debt grows by c·W/L, at most to capMS.
		if c >= MaxDebtWindows*L {
			out.TatMS, out.TatRem = now+capMS, 0
		} else {
			out.TatMS, out.TatRem = addCost(ms, rem, c, L, W, mulDiv)
			if d := out.TatMS - now; d > capMS || (d == capMS && out.TatRem > 0) {
				out.TatMS, out.TatRem = now+capMS, 0
			}
		}
		res.Write = true
		ms4, rem4 := addCost(out.TatMS, out.TatRem, min(c, L), L, W, mulDiv)
		res.ResetMS = ms4 - now - W
		if rem4 > 0 {
			res.ResetMS++
		}
	}
	if rewritten {
		res.Write = true
	}
	res.ExpiresMS = out.TatMS
	if out.TatRem > 0 {
		res.ExpiresMS++
	}
	res.Remaining = bucketRemaining(now+W-out.TatMS, out.TatRem, L, W, mulDiv)
	return out, res
}

// addCost is the instant ms + rem/L advanced by c·W/L ms, as a whole part and a remainder
// in 1/L ms (c < MaxDebtWindows·L, so the quotient is below 2^45).
func addCost(ms, rem, c, L, W int64, mulDiv mulDivFunc) (int64, int64) {
	q, r := mulDiv(c, W, L)
	ms, rem = ms+q, rem+r
	if rem >= L {
		ms, rem = ms+1, rem-L
	}
	return ms, rem
}

// reexpress converts a debt of debt + rem/lOld ms to the same units at limit lNew:
// (debt·lOld + rem)/lNew ms as a whole part and a remainder in 1/lNew ms, capped at W.
// A debt above W (an overdraft, spec §4.12) is never lengthened: with a lower limit it
// stays as it is (rounded up to a whole ms), with a higher one it shrinks exactly.
func reexpress(debt, rem, lOld, lNew, W int64, mulDiv mulDivFunc) (int64, int64) {
	if debt > W || (debt == W && rem > 0) {
		if lNew < lOld {
			if rem > 0 {
				debt++
			}
			return debt, 0
		}
		qb, rb := mulDiv(lOld, debt, lNew) // below debt: the quotient stays below 2^45
		x := rb + rem
		return qb + x/lNew, x % lNew
	}
	// Units spent, rounded down: floor((debt·lOld + rem)/W) = qa + floor((ra + rem)/W).
	qa, ra := mulDiv(lOld, debt, W)
	if qa+(ra+rem)/W >= lNew {
		return W, 0
	}
	// Below W·lNew, so the quotient is below W.
	qb, rb := mulDiv(lOld, debt, lNew)
	x := rb + rem // < lNew + lOld < 2^31
	return qb + x/lNew, x % lNew
}

// bucketRemaining is floor((X − rem/L)·L/W) = floor((X·L − rem)/W), clamped to [0, L].
func bucketRemaining(x, rem, L, W int64, mulDiv mulDivFunc) int64 {
	if x <= 0 {
		return 0
	}
	if rem == 0 {
		q, _ := mulDiv(L, min(x, W), W)
		return q
	}
	q, r := mulDiv(L, min(x-1, W), W)
	q += (r + L - rem) / W
	return min(q, L)
}
