package engine

import "context"

// LimitSpec is one limit a caller resolved itself: an algorithm, a limit and a window.
type LimitSpec struct {
	Algorithm Algorithm
	Limit     int64
	WindowMS  int64
}

// MultiCheck spends Cost on one key under several limits at once (an Envoy descriptor).
type MultiCheck struct {
	Namespace string
	Key       string
	// Limits are 1 to MaxSpendAll distinct (algorithm, window) pairs.
	Limits []LimitSpec
	// Cost may be 0 (look without spending) and may exceed a limit (then denied).
	Cost int64
	// Shadow records a denial as allowed in usage (the caller answers OK anyway).
	Shadow bool
}

// CheckAll decides r in one atomic store operation: out[i] is Limits[i]'s verdict, and the
// cost is spent on every counter or on none (spec §9.3). A cost above a limit is
// denied for that limit without spending. The hard cap is an *Error with RetryAfterSec.
// The check counts once in usage, blocked when any limit denies (unless Shadow).
func (e *Engine) CheckAll(ctx context.Context, a *Account, r *MultiCheck, out []Decision) error {
	if err := checkTarget(r.Namespace, r.Key); err != nil {
		return err
	}
	n := len(r.Limits)
	if n == 0 || n > MaxSpendAll || len(out) < n {
		return Invalid("a check takes 1 to 8 limits")
	}
	if r.Cost < 0 {
		return Invalid("cost must be a non-negative integer")
	}
	cost := r.Cost
	for _, l := range r.Limits {
		if l.Limit < cost {
			cost = 0 // cannot fit: look, then deny below
		}
	}
	for _, l := range r.Limits {
		if l.Algorithm.Kind() != RateRule || l.Algorithm == AlgorithmUnknown {
			return Invalid("a check's limits are rate limits")
		}
		if l.Limit < 1 || l.Limit > MaxLimit || l.WindowMS < 1 || l.WindowMS > MaxWindowMS {
			return Invalid("limit or window out of range")
		}
		if !a.Plan.AllowsAlgorithm(l.Algorithm) {
			return newError(CodeAlgorithmNotOnPlan, "algorithm "+l.Algorithm.String()+" is not available on plan "+a.Plan.Name)
		}
	}
	if err := e.hardCap(a); err != nil {
		return err
	}
	spend := func(l LimitSpec) Spend {
		return Spend{
			Counter: Counter{Account: a.ID, Namespace: r.Namespace, Key: r.Key, Algorithm: l.Algorithm, WindowMS: l.WindowMS},
			Limit:   l.Limit,
			Cost:    cost,
		}
	}
	if n == 1 {
		d, err := e.store.Spend(ctx, spend(r.Limits[0])) // the common case: one plain script
		if err != nil {
			return unavailable(err)
		}
		out[0] = d
	} else {
		spends := make([]Spend, n)
		for i, l := range r.Limits {
			spends[i] = spend(l)
		}
		ds := make([]Decision, n) // so the caller's out can stay on its stack
		if err := e.store.SpendAll(ctx, spends, ds); err != nil {
			return unavailable(err)
		}
		copy(out, ds)
	}
	blocked := false
	for i := range n {
		if r.Limits[i].Limit < r.Cost {
			out[i].Allowed = false
		}
		blocked = blocked || !out[i].Allowed
	}
	e.usage.record(a, r.Namespace, out[0].NowMS, blocked && !r.Shadow)
	return nil
}

// RateRule returns the namespace's rate rule, if one is set (the Envoy endpoint's fallback
// for a descriptor no configured limit matches).
func (e *Engine) RateRule(ctx context.Context, a *Account, ns string) (LimitSpec, bool, error) {
	if err := CheckNamespace(ns); err != nil {
		return LimitSpec{}, false, err
	}
	rules, err := e.store.Rules(ctx, a.ID, ns)
	if err != nil {
		return LimitSpec{}, false, unavailable(err)
	}
	if rules.Rate == nil {
		return LimitSpec{}, false, nil
	}
	return LimitSpec{Algorithm: rules.Rate.Algorithm, Limit: rules.Rate.Limit, WindowMS: rules.Rate.WindowMS}, true, nil
}

// CountCheck records one allowed check that needed no counter (an Envoy descriptor with no
// limit, or an unlimited one), dated by Options.Clock.
func (e *Engine) CountCheck(a *Account, ns string) {
	e.usage.record(a, ns, e.clock.Now().UnixMilli(), false)
}

// HardCapped returns the hard-cap error when the account is over its plan's hard cap.
func (e *Engine) HardCapped(a *Account) error { return e.hardCap(a) }
