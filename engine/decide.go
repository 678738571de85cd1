package engine

import (
	"context"
	"time"
)

// The one decision path (spec §1.4). Every edge asks the engine the same question: a
// Query of items in one namespace, each a key spent under its limits. POST /v1/limit is a
// query of one item whose limit the caller sent or the namespace's rule supplies; an Envoy
// ShouldRateLimit request is a query of one item per descriptor, each with the limits its
// descriptor matched, the namespace's rule, or none. Decide validates, resolves, applies the
// plan gates and the hard cap, spends through the store (which decides with its own clock),
// and counts usage, in that order (spec §3.7).

// Edge names the interface a query came in through; metrics and traces label by it.
type Edge string

// The edges that ask the engine for decisions.
const (
	EdgeLimit  Edge = "limit"  // POST /v1/limit
	EdgeLeases Edge = "leases" // POST /v1/leases (Engine.Acquire)
	EdgeEnvoy  Edge = "envoy"  // Envoy's RateLimitService
	EdgeRLQS   Edge = "rlqs"   // Envoy's Rate Limit Quota Service
)

// Observer sees every item the engine decides, and every call the hard cap refuses
// (metrics). It runs on the request path, so it must be quick and must not block.
type Observer interface {
	Decided(a *Account, q *Query, it *Item, r *ItemResult)
	// HardCapRefused sees one call of edge refused because a's month usage reached its
	// plan's hard cap (spec §12.2).
	HardCapRefused(a *Account, edge Edge)
}

// Query is one decision: the items of one namespace.
type Query struct {
	Edge      Edge
	Namespace string
	Items     []Item
	// StrictCost makes a cost above a limit an invalid_request error (POST /v1/limit,
	// spec §4.3); without it such an item is denied and spends nothing (Envoy, spec §9.6).
	StrictCost bool
	// Shadow answers a denied query as allowed (Envoy's global shadow mode, spec §9.7):
	// its items keep their verdicts, and their denials are not counted as blocked.
	Shadow bool
}

// Source says where an item's limits come from.
type Source uint8

// The sources of an item's limits.
const (
	// Given: Item.Limits are the limits. A limit of 0 denies every request without a
	// counter (spec §9.5).
	Given Source = iota
	// FromRule: Item.Inline, with the namespace's rate rule supplying what it leaves out
	// (spec §4.2); a limit or window still missing is missing_limit.
	FromRule
	// RuleIfAny: the namespace's rate rule; with none the item has no limit (spec §9.5).
	RuleIfAny
	// NoLimit: allowed and counted, with no counter (spec §9.5: unlimited, replaced, or a
	// descriptor without entries).
	NoLimit
)

// Limit is one rate limit: an algorithm, a limit and a window.
type Limit struct {
	Algorithm Algorithm
	Limit     int64
	WindowMS  int64
}

// Inline is what a request sent of its limit; nil fields (and AlgorithmUnknown) are absent.
type Inline struct {
	Algorithm Algorithm // AlgorithmUnrecognized for a name that is not an algorithm
	Limit     *int64
	WindowMS  *int64
}

// DefaultCost is the cost of a check that sends none (spec §4.3).
const DefaultCost = 1

// CheckItem is the item of a POST /v1/limit check: its limit from the request's own
// fields, the namespace's rule filling the rest (spec §4.2); a nil cost is DefaultCost.
func CheckItem(key string, in Inline, cost *int64) Item {
	it := Item{Key: key, Cost: DefaultCost, Source: FromRule, Inline: in}
	if cost != nil {
		it.Cost = *cost
	}
	return it
}

// Item is one key of a query, the units it spends and where its limits come from.
type Item struct {
	Key    string
	Cost   int64 // 0 looks without spending
	Source Source
	// Limits (Source Given) are 1 to MaxSpendAll limits with distinct (algorithm, window),
	// decided in one atomic step: all spend or none (spec §9.3).
	Limits []Limit
	// Inline (Source FromRule) is the request's own part of the limit.
	Inline Inline
	// Shadow answers a denial as allowed and counts it as a shadow denial, not as
	// blocked (spec §9.5).
	Shadow bool
	// Quota puts the item in quota mode (spec §9.7): its denial makes the query denied
	// only when every quota item of the query is denied.
	Quota bool
	// Overdraft counts the cost even when a limit denies it (spec §4.12), as
	// envoyproxy/ratelimit counts the hits of an over-limit request: a charge made after
	// the fact exhausts the budget. The verdict is unchanged; the cost may exceed the
	// limit (a larger one than MaxOverdraftCost is spent as MaxOverdraftCost).
	Overdraft bool
	// Tag is the edge's own mark for the item (e.g. the descriptor rule's metrics); the
	// engine only hands it to the Observer.
	Tag any
	// Report makes the item a report of requests a proxy has already decided (RLQS, spec
	// §14.3): Cost (its allowed requests) is spent as far as it fits — when all of it
	// does not, what remains of the most restrictive limit is spent instead, so the
	// counter ends full — and usage counts the report's requests, not one decision.
	Report *Report
}

// Report is what a proxy reported for one bucket: requests it allowed and denied.
type Report struct {
	Allowed, Denied int64
}

// ItemResult is the verdict on one item.
type ItemResult struct {
	// Allowed is false when a limit denied the item and it is not Shadow.
	Allowed bool
	// Limited reports that a limit applied; when false the item had none and the fields
	// below are zero.
	Limited bool
	// ShadowDenied reports a Shadow item that a limit denied (Allowed is still true).
	ShadowDenied bool
	// Limit is the item's most restrictive limit (a denying one, else the fewest
	// remaining, else the longest reset), resolved; Index is its position in Item.Limits,
	// -1 when it came from the namespace's rule.
	Limit Limit
	Index int
	// Remaining and ResetMS are that limit's (spec §4.9). A cost that can never fit a
	// limit (Envoy) reports the counter as it stands.
	Remaining int64
	ResetMS   int64
	// Cached reports a denial answered from the over-limit cache, with no store
	// operation (spec §9.13).
	Cached bool
}

// Outcome is a query's overall verdict.
type Outcome struct {
	// Allowed reports that no item is denied, except quota items when another quota item
	// is allowed (spec §9.7), or that the query is Shadow.
	Allowed bool
	// ShadowDenied reports a Shadow query that would have been denied.
	ShadowDenied bool
	// NowMS is the store's clock at the decision, in Unix milliseconds.
	NowMS int64
}

// Decide answers q for account a, writing one ItemResult per item to out (len(out) ≥
// len(q.Items)). A denial is a result, not an error; errors are *Error values: bad input,
// resolution, plan gates, the hard cap (with RetryAfterSec), or an unavailable store. A
// query that fails counts nothing and, failing before the store, spends nothing.
func (e *Engine) Decide(ctx context.Context, a *Account, q *Query, out []ItemResult) (Outcome, error) {
	if err := Active(a); err != nil {
		return Outcome{}, err
	}
	n := len(q.Items)
	if n == 0 || len(out) < n {
		return Outcome{}, Invalid("a decision needs at least one item")
	}
	if err := CheckNamespace(q.Namespace); err != nil {
		return Outcome{}, err
	}
	for i := range q.Items {
		if err := q.Items[i].check(); err != nil {
			return Outcome{}, err
		}
	}
	rules := ruleLookup{e: e, a: a, ns: q.Namespace}
	for i := range q.Items {
		if err := e.resolve(ctx, a, q, &q.Items[i], &out[i], &rules); err != nil {
			return Outcome{}, err
		}
	}
	if err := e.hardCap(a, q.Edge); err != nil {
		return Outcome{}, err
	}
	now, cached := int64(-1), false
	for i := range q.Items {
		t, err := e.spend(ctx, a, q.Namespace, &q.Items[i], &out[i])
		if err != nil {
			return Outcome{}, unavailable(err)
		}
		if t >= 0 {
			now = t
		}
		cached = cached || out[i].Cached
	}
	switch {
	case now >= 0:
		if e.cache != nil {
			e.clock.observe(now)
		}
	case cached:
		// Answered from the over-limit cache: no store operation at all.
		if t, ok := e.clock.now(); ok {
			now = t
			break
		}
		fallthrough
	default:
		// Nothing reached the store: date the decision by its clock all the same.
		t, err := e.store.Decider.NowMS(ctx)
		if err != nil {
			return Outcome{}, unavailable(err)
		}
		now = t
	}
	res := Outcome{Allowed: true, NowMS: now}
	quotaItems, quotaDenied := 0, 0
	for i := range q.Items {
		it, r := &q.Items[i], &out[i]
		if r.Limited && r.Limit.Limit == 0 {
			// A limit of 0 had no store operation: denied until its window turns.
			r.ResetMS = r.Limit.WindowMS - floorMod(now, r.Limit.WindowMS)
		}
		if it.Quota {
			quotaItems++
			if !r.Allowed {
				quotaDenied++
			}
		} else if !r.Allowed {
			res.Allowed = false
		}
		if rep := it.Report; rep != nil {
			e.tally.recordN(a, q.Namespace, now, rep.Allowed+rep.Denied, rep.Denied)
		} else {
			e.tally.record(a, q.Namespace, now, !r.Allowed && !q.Shadow)
		}
		if e.observer != nil {
			e.observer.Decided(a, q, it, r)
		}
	}
	if quotaItems > 0 && quotaDenied == quotaItems {
		res.Allowed = false
	}
	if !res.Allowed && q.Shadow {
		res.Allowed, res.ShadowDenied = true, true
	}
	return res, nil
}

// check validates an item's own fields, before anything is resolved.
func (it *Item) check() error {
	switch it.Source {
	case NoLimit:
		return nil
	case FromRule, RuleIfAny:
		if !ValidKey(it.Key) {
			return Invalid(msgKey)
		}
		if err := checkInline("limit", it.Inline.Limit, MaxLimit); err != nil {
			return err
		}
		if err := checkInline("window_ms", it.Inline.WindowMS, MaxWindowMS); err != nil {
			return err
		}
	case Given:
		if !ValidKey(it.Key) {
			return Invalid(msgKey)
		}
		if len(it.Limits) == 0 || len(it.Limits) > MaxSpendAll {
			return Invalid("an item takes 1 to 8 limits")
		}
		for i, l := range it.Limits {
			if l.Algorithm.Kind() != RateRule || l.Algorithm == AlgorithmUnknown || l.Algorithm == AlgorithmUnrecognized {
				return Invalid("an item's limits are rate limits")
			}
			if l.Limit < 0 || l.Limit > MaxLimit || l.WindowMS < 1 || l.WindowMS > MaxWindowMS {
				return Invalid("limit or window out of range")
			}
			for _, p := range it.Limits[:i] {
				if p.Algorithm == l.Algorithm && p.WindowMS == l.WindowMS {
					return Invalid("an item's limits must differ in algorithm or window")
				}
			}
		}
	default:
		return Invalid("unknown limit source")
	}
	if it.Cost < 0 {
		return Invalid("cost must be a non-negative integer")
	}
	if rep := it.Report; rep != nil && (rep.Allowed != it.Cost || rep.Denied < 0 || rep.Denied > MaxLimit || rep.Allowed > MaxLimit) {
		return Invalid("a report's counts must be 0 to 1e9, its cost the allowed count")
	}
	return nil
}

// ruleLookup reads a namespace's rules at most once per query.
type ruleLookup struct {
	e     *Engine
	a     *Account
	ns    string
	rules Rules
	read  bool
}

func (l *ruleLookup) get(ctx context.Context) (Rules, error) {
	if !l.read {
		r, err := l.e.store.Rules.Rules(ctx, l.a.ID, l.ns)
		if err != nil {
			return Rules{}, unavailable(err)
		}
		l.rules, l.read = r, true
	}
	return l.rules, nil
}

// resolve settles an item's limits (from the rule where its source says so) and applies
// the plan gate and the cost rule; the resolved single limit goes to r.Limit.
func (e *Engine) resolve(ctx context.Context, a *Account, q *Query, it *Item, r *ItemResult, rules *ruleLookup) error {
	*r = ItemResult{Index: -1}
	switch it.Source {
	case NoLimit:
		return nil
	case Given:
		for _, l := range it.Limits {
			if !a.Plan.AllowsAlgorithm(l.Algorithm) {
				return notOnPlan(a, l.Algorithm)
			}
			if err := costFits(q, it, l.Limit); err != nil {
				return err
			}
		}
		r.Limited = true
		return nil
	case RuleIfAny:
		rs, err := rules.get(ctx)
		if err != nil {
			return err
		}
		if rs.Rate == nil {
			return nil
		}
		r.Limit.Algorithm = rs.Rate.Algorithm
		r.Limit.Limit, r.Limit.WindowMS = rs.Rate.For(it.Key)
		if !a.Plan.AllowsAlgorithm(r.Limit.Algorithm) {
			return notOnPlan(a, r.Limit.Algorithm)
		}
	default: // FromRule
		l, err := resolveRate(ctx, a, it.Key, it.Inline, true, rules)
		if err != nil {
			return err
		}
		r.Limit = l
	}
	if err := costFits(q, it, r.Limit.Limit); err != nil {
		return err
	}
	r.Limited = true
	return nil
}

// costFits applies the cost rule of a StrictCost query (spec §4.3): a cost above the limit
// is invalid, or with Overdraft one above MaxOverdraftCost (spec §4.12).
func costFits(q *Query, it *Item, limit int64) error {
	switch {
	case !q.StrictCost:
	case it.Overdraft && it.Cost > MaxOverdraftCost:
		return Invalid("cost must not exceed 2000000000")
	case !it.Overdraft && it.Cost > limit:
		return Invalid("cost must not exceed limit")
	}
	return nil
}

// resolveRate fills algorithm, limit and window from inline values, else the namespace's
// rate rule as it applies to key (its override, spec §6.7) (spec §4.2), and applies the
// algorithm plan gate. needLimit is false for resets, which ignore the limit.
func resolveRate(ctx context.Context, a *Account, key string, in Inline, needLimit bool, rules *ruleLookup) (Limit, error) {
	alg := in.Algorithm
	switch alg {
	case AlgorithmUnrecognized:
		return Limit{}, newError(CodeUnknownAlgorithm, "algorithm must be one of fixed_window, sliding_window, token_bucket")
	case ConcurrentLimit:
		return Limit{}, Invalid("algorithm concurrent_limit is for POST /v1/leases, not rate-limit checks")
	}
	var l Limit
	if in.Limit != nil {
		l.Limit = *in.Limit
	}
	if in.WindowMS != nil {
		l.WindowMS = *in.WindowMS
	}
	if alg == AlgorithmUnknown || (needLimit && in.Limit == nil) || in.WindowMS == nil {
		rs, err := rules.get(ctx)
		if err != nil {
			return Limit{}, err
		}
		if rule := rs.Rate; rule != nil {
			if alg == AlgorithmUnknown {
				alg = rule.Algorithm
			}
			limit, window := rule.For(key)
			if in.Limit == nil {
				l.Limit = limit
			}
			if in.WindowMS == nil {
				l.WindowMS = window
			}
		}
	}
	if (needLimit && l.Limit == 0) || l.WindowMS == 0 {
		return Limit{}, newError(CodeMissingLimit, "limit and window_ms are required: send them or set a rate rule on the namespace")
	}
	if alg == AlgorithmUnknown {
		alg = SlidingWindow
	}
	if !a.Plan.AllowsAlgorithm(alg) {
		return Limit{}, notOnPlan(a, alg)
	}
	l.Algorithm = alg
	return l, nil
}

func notOnPlan(a *Account, alg Algorithm) error {
	return newError(CodeAlgorithmNotOnPlan, "algorithm "+alg.String()+" is not available on plan "+a.Plan.Name)
}

// spend decides one resolved item with at most one store operation and returns the store's
// clock, or -1 when the item needed none.
func (e *Engine) spend(ctx context.Context, a *Account, ns string, it *Item, r *ItemResult) (int64, error) {
	if !r.Limited {
		r.Allowed = true
		return -1, nil
	}
	var limits []Limit
	if r.Index = -1; it.Source == Given {
		limits = it.Limits
		for i, l := range limits {
			if l.Limit == 0 {
				// Blocks everything: no counter to spend (Decide sets the reset).
				r.Index, r.Limit = i, l
				e.deny(it, r)
				return -1, nil
			}
		}
	} else {
		limits = []Limit{r.Limit} // does not escape: the store gets Spends
	}
	cost := it.Cost
	if it.Overdraft {
		cost = min(cost, MaxOverdraftCost) // counted even when it cannot fit
	} else {
		for _, l := range limits {
			if l.Limit < cost {
				cost = 0 // cannot fit: look, then deny below
			}
		}
	}
	counter := func(l Limit) Counter {
		return Counter{Account: a.ID, Namespace: ns, Key: it.Key, Algorithm: l.Algorithm, WindowMS: l.WindowMS}
	}
	var t0 time.Time
	if c := e.cache; c != nil && cost > 0 && it.Report == nil {
		t0 = time.Now()
		for i, l := range limits {
			if left, ok := c.Denied(counter(l), l.Limit, cost, t0); ok {
				if it.Source == Given {
					r.Index, r.Limit = i, l
				}
				r.Remaining, r.ResetMS, r.Cached = 0, (left.Nanoseconds()+999_999)/1_000_000, true
				e.deny(it, r)
				return -1, nil
			}
		}
	}
	var ds [MaxSpendAll]Decision
	if len(limits) == 1 {
		d, err := e.store.Decider.Spend(ctx, Spend{Counter: counter(limits[0]), Limit: limits[0].Limit, Cost: cost, Overdraft: it.Overdraft})
		if err != nil {
			return 0, err
		}
		ds[0] = d
	} else {
		// Several limits: one atomic store operation. Its slices go to the heap; the
		// common single limit above keeps everything on the stack.
		spends := make([]Spend, len(limits))
		for i, l := range limits {
			spends[i] = Spend{Counter: counter(l), Limit: l.Limit, Cost: cost, Overdraft: it.Overdraft}
		}
		out := make([]Decision, len(limits))
		if err := e.store.Decider.SpendAll(ctx, spends, out); err != nil {
			return 0, err
		}
		copy(ds[:], out)
	}
	if it.Report != nil {
		if err := e.saturate(ctx, limits, counter, it.Cost, &ds); err != nil {
			return 0, err
		}
	}
	denied := false
	for i, l := range limits {
		if l.Limit < it.Cost {
			ds[i].Allowed = false
		} else if !ds[i].Allowed && e.cache != nil && cost > 0 && it.Report == nil {
			e.cache.Add(counter(l), l.Limit, cost, ds[i].ResetMS, t0)
		}
		denied = denied || !ds[i].Allowed
	}
	best := 0
	for i := 1; i < len(limits); i++ {
		if moreRestrictive(&ds[i], &ds[best]) {
			best = i
		}
	}
	if it.Source == Given {
		r.Index, r.Limit = best, limits[best]
	}
	r.Remaining, r.ResetMS = ds[best].Remaining, ds[best].ResetMS
	if denied {
		e.deny(it, r)
	} else {
		r.Allowed = true
	}
	return ds[0].NowMS, nil
}

// saturate spends, for a report whose cost did not fit, what remains of its limits: the
// least remaining of any limit, in one more store operation (spec §14.3). The verdicts
// stay denials; ds gets the remaining and reset after the second spend.
func (e *Engine) saturate(ctx context.Context, limits []Limit, counter func(Limit) Counter, cost int64, ds *[MaxSpendAll]Decision) error {
	fit := cost
	for i, l := range limits {
		if ds[i].Allowed && l.Limit >= cost {
			continue
		}
		fit = min(fit, max(ds[i].Remaining, 0))
	}
	if fit == cost || fit <= 0 {
		return nil
	}
	spends := make([]Spend, len(limits))
	for i, l := range limits {
		spends[i] = Spend{Counter: counter(l), Limit: l.Limit, Cost: fit}
	}
	out := make([]Decision, len(limits))
	var err error
	if len(limits) == 1 {
		out[0], err = e.store.Decider.Spend(ctx, spends[0])
	} else {
		err = e.store.Decider.SpendAll(ctx, spends, out)
	}
	if err != nil {
		return err
	}
	for i := range limits {
		ds[i].Remaining, ds[i].ResetMS, ds[i].NowMS = out[i].Remaining, out[i].ResetMS, out[i].NowMS
		ds[i].Allowed = ds[i].Allowed && out[i].Allowed
	}
	return nil
}

// deny records a denial, which a Shadow item answers as allowed.
func (e *Engine) deny(it *Item, r *ItemResult) {
	r.Allowed = it.Shadow
	r.ShadowDenied = it.Shadow
}

// moreRestrictive orders one item's verdicts: a denial first, then fewer remaining, then
// the longer reset.
func moreRestrictive(a, b *Decision) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if a.Remaining != b.Remaining {
		return a.Remaining < b.Remaining
	}
	return a.ResetMS > b.ResetMS
}

// floorMod is x mod m for m > 0, in [0, m).
func floorMod(x, m int64) int64 {
	r := x % m
	if r < 0 {
		r += m
	}
	return r
}
