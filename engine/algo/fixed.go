package algo

// FixedState is a fixed_window counter's state: the units spent in one window.
type FixedState struct {
	// Window is the window index floor(t/W) the count belongs to.
	Window int64
	// Count is the number of units spent in that window.
	Count int64
}

// FixedWindow decides a fixed_window request of cost units under limit per window of
// windowMS at nowMS.
//
// Windows are aligned to multiples of W since the Unix epoch: the current window is
// w = floor(now/W). A state of any other window counts as 0, so count = Count if
// Window == w, else 0.
//
//	allowed   = count + c ≤ L                 (then count += c)
//	remaining = max(0, L − count)
//	reset     = allowed: 0 if count = 0, else (w+1)·W − now
//	            denied:  (w+1)·W − now
//	expiry    = (w+1)·W
//
// The state is written only when units are spent (allowed and c > 0), so a cost-0 look
// at a fresh counter creates nothing. A count above L (the limit was lowered) denies
// every cost, 0 included.
func FixedWindow(s FixedState, nowMS, limit, windowMS, cost int64) (FixedState, Result) {
	return fixedWindow(s, nowMS, limit, windowMS, cost, false)
}

// FixedWindowOverdraft is FixedWindow in overdraft mode (spec §4.12): a denied request
// with a cost above 0 is counted all the same, count = min(count + c, MaxCount), and the
// state is written; the verdict stays a denial with remaining 0 and the reset at the end
// of the window. cost may exceed limit (up to MaxCount): such a request is always denied.
func FixedWindowOverdraft(s FixedState, nowMS, limit, windowMS, cost int64) (FixedState, Result) {
	return fixedWindow(s, nowMS, limit, windowMS, cost, true)
}

func fixedWindow(s FixedState, nowMS, limit, windowMS, cost int64, over bool) (FixedState, Result) {
	w := floorDiv(nowMS, windowMS)
	var count int64
	if s.Window == w {
		count = s.Count
	}
	end := (w + 1) * windowMS
	res := Result{ExpiresMS: end}
	if count+cost <= limit {
		count += cost
		res.Allowed = true
		res.Write = cost > 0
		if count > 0 {
			res.ResetMS = end - nowMS
		}
	} else {
		res.ResetMS = end - nowMS
		if over && cost > 0 {
			count = min(count+cost, MaxCount)
			res.Write = true
		}
	}
	res.Remaining = max(0, limit-count)
	return FixedState{Window: w, Count: count}, res
}
