// Package limits is the capability that decides rate-limit checks: the one decision
// path every edge asks (spec §1.4, §4, §9), counter resets (spec §4.11), and the
// over-limit cache of denials (spec §9.13). It reaches the store only through Port.
package limits

import (
	"context"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/hotpath/overlimit"
)

// Port is what deciding needs of a store: spends, resets, the store's clock, and a
// namespace's rules (the Decider and RuleStore roles, in part).
type Port interface {
	// Spend is engine.Decider's.
	Spend(ctx context.Context, s engine.Spend) (engine.Decision, error)
	// SpendAll is engine.Decider's.
	SpendAll(ctx context.Context, spends []engine.Spend, out []engine.Decision) error
	// Reset is engine.Decider's.
	Reset(ctx context.Context, c engine.Counter) (existed bool, err error)
	// NowMS is engine.Decider's.
	NowMS(ctx context.Context) (int64, error)
	// Rules is engine.RuleStore's.
	Rules(ctx context.Context, account, namespace string) (engine.Rules, error)
}

// Meter is what a decision needs of the usage capability: the hard cap, and counting.
type Meter interface {
	// HardCap refuses work once a's month usage reached its plan's hard cap.
	HardCap(a *engine.Account, edge engine.Edge) error
	// Record counts one decision.
	Record(a *engine.Account, namespace string, nowMS int64, blocked bool)
	// RecordN counts n requests, blocked of them denied (a report).
	RecordN(a *engine.Account, namespace string, nowMS int64, n, blocked int64)
}

// Auditor records a change in the audit log (spec §15.10).
type Auditor interface {
	// Record adds a change made by by.
	Record(ctx context.Context, by engine.Actor, ent engine.AuditEntry)
}

// Options configures a Limiter.
type Options struct {
	// LocalCacheMaxEntries bounds the over-limit cache (spec §9.13); 0 turns it off.
	LocalCacheMaxEntries int
	// Observer, if set, sees every decided item (metrics, spec §12.2).
	Observer engine.Observer
}

// Limiter decides checks and resets counters over a Port.
type Limiter struct {
	store    Port
	usage    Meter
	audit    Auditor
	observer engine.Observer
	cache    *overlimit.Cache[engine.Counter] // the hot path's denials (spec §9.13); nil when off
	clock    storeClock                       // the store's clock between operations, for cached answers
}

// New returns a Limiter over store that counts usage in usage and records resets in audit.
func New(store Port, usage Meter, audit Auditor, o Options) *Limiter {
	return &Limiter{store: store, usage: usage, audit: audit, observer: o.Observer,
		cache: overlimit.New[engine.Counter](o.LocalCacheMaxEntries), clock: storeClock{start: time.Now()}}
}

// ObserveNow tells the Limiter the store's clock as another capability read it (a usage
// flush), so answers from the over-limit cache are dated by a recent reading.
func (lim *Limiter) ObserveNow(nowMS int64) {
	if lim.cache != nil {
		lim.clock.observe(nowMS)
	}
}

// Decide answers q for account a, writing one ItemResult per item to out (len(out) ≥
// len(q.Items)). A denial is a result, not an error; errors are *Error values: bad input,
// resolution, plan gates, the hard cap (with RetryAfterSec), or an unavailable store. A
// query that fails counts nothing and, failing before the store, spends nothing.
func (lim *Limiter) Decide(ctx context.Context, a *engine.Account, q *engine.Query, out []engine.ItemResult) (engine.Outcome, error) {
	if err := engine.Active(a); err != nil {
		return engine.Outcome{}, err
	}
	n := len(q.Items)
	if n == 0 || len(out) < n {
		return engine.Outcome{}, engine.Invalid("a decision needs at least one item")
	}
	if err := engine.CheckNamespace(q.Namespace); err != nil {
		return engine.Outcome{}, err
	}
	for i := range q.Items {
		if err := checkItem(&q.Items[i]); err != nil {
			return engine.Outcome{}, err
		}
	}
	rules := ruleLookup{store: lim.store, a: a, ns: q.Namespace}
	for i := range q.Items {
		if err := lim.resolve(ctx, a, q, &q.Items[i], &out[i], &rules); err != nil {
			return engine.Outcome{}, err
		}
	}
	if err := lim.usage.HardCap(a, q.Edge); err != nil {
		return engine.Outcome{}, err
	}
	now, cached := int64(-1), false
	for i := range q.Items {
		t, err := lim.spend(ctx, a, q.Namespace, &q.Items[i], &out[i])
		if err != nil {
			return engine.Outcome{}, engine.Unavailable(err)
		}
		if t >= 0 {
			now = t
		}
		cached = cached || out[i].Cached
	}
	switch {
	case now >= 0:
		if lim.cache != nil {
			lim.clock.observe(now)
		}
	case cached:
		// Answered from the over-limit cache: no store operation at all.
		if t, ok := lim.clock.now(); ok {
			now = t
			break
		}
		fallthrough
	default:
		// Nothing reached the store: date the decision by its clock all the same.
		t, err := lim.store.NowMS(ctx)
		if err != nil {
			return engine.Outcome{}, engine.Unavailable(err)
		}
		now = t
	}
	res := engine.Outcome{Allowed: true, NowMS: now}
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
			lim.usage.RecordN(a, q.Namespace, now, rep.Allowed+rep.Denied, rep.Denied)
		} else {
			lim.usage.Record(a, q.Namespace, now, !r.Allowed && !q.Shadow)
		}
		if lim.observer != nil {
			lim.observer.Decided(a, q, it, r)
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

// checkItem validates an item's own fields, before anything is resolved.
func checkItem(it *engine.Item) error {
	switch it.Source {
	case engine.NoLimit:
		return nil
	case engine.FromRule, engine.RuleIfAny:
		if !engine.ValidKey(it.Key) {
			return engine.Invalid(engine.MsgKey)
		}
		if err := engine.CheckInline("limit", it.Inline.Limit, engine.MaxLimit); err != nil {
			return err
		}
		if err := engine.CheckInline("window_ms", it.Inline.WindowMS, engine.MaxWindowMS); err != nil {
			return err
		}
	case engine.Given:
		if !engine.ValidKey(it.Key) {
			return engine.Invalid(engine.MsgKey)
		}
		if len(it.Limits) == 0 || len(it.Limits) > engine.MaxSpendAll {
			return engine.Invalid("an item takes 1 to 8 limits")
		}
		for i, l := range it.Limits {
			if l.Algorithm.Kind() != engine.RateRule || l.Algorithm == engine.AlgorithmUnknown || l.Algorithm == engine.AlgorithmUnrecognized {
				return engine.Invalid("an item's limits are rate limits")
			}
			if l.Limit < 0 || l.Limit > engine.MaxLimit || l.WindowMS < 1 || l.WindowMS > engine.MaxWindowMS {
				return engine.Invalid("limit or window out of range")
			}
			for _, p := range it.Limits[:i] {
				if p.Algorithm == l.Algorithm && p.WindowMS == l.WindowMS {
					return engine.Invalid("an item's limits must differ in algorithm or window")
				}
			}
		}
	default:
		return engine.Invalid("unknown limit source")
	}
	if it.Cost < 0 {
		return engine.Invalid("cost must be a non-negative integer")
	}
	if rep := it.Report; rep != nil && (rep.Allowed != it.Cost || rep.Denied < 0 || rep.Denied > engine.MaxLimit || rep.Allowed > engine.MaxLimit) {
		return engine.Invalid("a report's counts must be 0 to 1e9, its cost the allowed count")
	}
	return nil
}

// ruleLookup reads a namespace's rules at most once per query.
type ruleLookup struct {
	store Port
	a     *engine.Account
	ns    string
	rules engine.Rules
	read  bool
}

func (l *ruleLookup) get(ctx context.Context) (engine.Rules, error) {
	if !l.read {
		r, err := l.store.Rules(ctx, l.a.ID, l.ns)
		if err != nil {
			return engine.Rules{}, engine.Unavailable(err)
		}
		l.rules, l.read = r, true
	}
	return l.rules, nil
}

// resolve settles an item's limits (from the rule where its source says so) and applies
// the plan gate and the cost rule; the resolved single limit goes to r.Limit.
func (lim *Limiter) resolve(ctx context.Context, a *engine.Account, q *engine.Query, it *engine.Item, r *engine.ItemResult, rules *ruleLookup) error {
	*r = engine.ItemResult{Index: -1}
	switch it.Source {
	case engine.NoLimit:
		return nil
	case engine.Given:
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
	case engine.RuleIfAny:
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
func costFits(q *engine.Query, it *engine.Item, limit int64) error {
	switch {
	case !q.StrictCost:
	case it.Overdraft && it.Cost > engine.MaxOverdraftCost:
		return engine.Invalid("cost must not exceed 2000000000")
	case !it.Overdraft && it.Cost > limit:
		return engine.Invalid("cost must not exceed limit")
	}
	return nil
}

// resolveRate fills algorithm, limit and window from inline values, else the namespace's
// rate rule as it applies to key (its override, spec §6.7) (spec §4.2), and applies the
// algorithm plan gate. needLimit is false for resets, which ignore the limit.
func resolveRate(ctx context.Context, a *engine.Account, key string, in engine.Inline, needLimit bool, rules *ruleLookup) (engine.Limit, error) {
	alg := in.Algorithm
	switch alg {
	case engine.AlgorithmUnrecognized:
		return engine.Limit{}, engine.NewError(engine.CodeUnknownAlgorithm, "algorithm must be one of fixed_window, sliding_window, token_bucket")
	case engine.ConcurrentLimit:
		return engine.Limit{}, engine.Invalid("algorithm concurrent_limit is for POST /v1/leases, not rate-limit checks")
	}
	var l engine.Limit
	if in.Limit != nil {
		l.Limit = *in.Limit
	}
	if in.WindowMS != nil {
		l.WindowMS = *in.WindowMS
	}
	if alg == engine.AlgorithmUnknown || (needLimit && in.Limit == nil) || in.WindowMS == nil {
		rs, err := rules.get(ctx)
		if err != nil {
			return engine.Limit{}, err
		}
		if rule := rs.Rate; rule != nil {
			if alg == engine.AlgorithmUnknown {
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
		return engine.Limit{}, engine.NewError(engine.CodeMissingLimit, "limit and window_ms are required: send them or set a rate rule on the namespace")
	}
	if alg == engine.AlgorithmUnknown {
		alg = engine.SlidingWindow
	}
	if !a.Plan.AllowsAlgorithm(alg) {
		return engine.Limit{}, notOnPlan(a, alg)
	}
	l.Algorithm = alg
	return l, nil
}

func notOnPlan(a *engine.Account, alg engine.Algorithm) error {
	return engine.NewError(engine.CodeAlgorithmNotOnPlan, "algorithm "+alg.String()+" is not available on plan "+a.Plan.Name)
}

// spend decides one resolved item with at most one store operation and returns the store's
// clock, or -1 when the item needed none.
func (lim *Limiter) spend(ctx context.Context, a *engine.Account, ns string, it *engine.Item, r *engine.ItemResult) (int64, error) {
	if !r.Limited {
		r.Allowed = true
		return -1, nil
	}
	var limits []engine.Limit
	if r.Index = -1; it.Source == engine.Given {
		limits = it.Limits
		for i, l := range limits {
			if l.Limit == 0 {
				// Blocks everything: no counter to spend (Decide sets the reset).
				r.Index, r.Limit = i, l
				lim.deny(it, r)
				return -1, nil
			}
		}
	} else {
		limits = []engine.Limit{r.Limit} // does not escape: the store gets Spends
	}
	cost := it.Cost
	if it.Overdraft {
		cost = min(cost, engine.MaxOverdraftCost) // counted even when it cannot fit
	} else {
		for _, l := range limits {
			if l.Limit < cost {
				cost = 0 // cannot fit: look, then deny below
			}
		}
	}
	counter := func(l engine.Limit) engine.Counter {
		return engine.Counter{Account: a.ID, Namespace: ns, Key: it.Key, Algorithm: l.Algorithm, WindowMS: l.WindowMS}
	}
	var t0 time.Time
	if c := lim.cache; c != nil && cost > 0 && it.Report == nil {
		t0 = time.Now()
		for i, l := range limits {
			if left, ok := c.Denied(counter(l), l.Limit, cost, t0); ok {
				if it.Source == engine.Given {
					r.Index, r.Limit = i, l
				}
				r.Remaining, r.ResetMS, r.Cached = 0, (left.Nanoseconds()+999_999)/1_000_000, true
				lim.deny(it, r)
				return -1, nil
			}
		}
	}
	var ds [engine.MaxSpendAll]engine.Decision
	if len(limits) == 1 {
		d, err := lim.store.Spend(ctx, engine.Spend{Counter: counter(limits[0]), Limit: limits[0].Limit, Cost: cost, Overdraft: it.Overdraft})
		if err != nil {
			return 0, err
		}
		ds[0] = d
	} else {
		// Several limits: one atomic store operation. Its slices go to the heap; the
		// common single limit above keeps everything on the stack.
		spends := make([]engine.Spend, len(limits))
		for i, l := range limits {
			spends[i] = engine.Spend{Counter: counter(l), Limit: l.Limit, Cost: cost, Overdraft: it.Overdraft}
		}
		out := make([]engine.Decision, len(limits))
		if err := lim.store.SpendAll(ctx, spends, out); err != nil {
			return 0, err
		}
		copy(ds[:], out)
	}
	if it.Report != nil {
		if err := lim.saturate(ctx, limits, counter, it.Cost, &ds); err != nil {
			return 0, err
		}
	}
	denied := false
	for i, l := range limits {
		if l.Limit < it.Cost {
			ds[i].Allowed = false
		} else if !ds[i].Allowed && lim.cache != nil && cost > 0 && it.Report == nil {
			lim.cache.Add(counter(l), l.Limit, cost, ds[i].ResetMS, t0)
		}
		denied = denied || !ds[i].Allowed
	}
	best := 0
	for i := 1; i < len(limits); i++ {
		if moreRestrictive(&ds[i], &ds[best]) {
			best = i
		}
	}
	if it.Source == engine.Given {
		r.Index, r.Limit = best, limits[best]
	}
	r.Remaining, r.ResetMS = ds[best].Remaining, ds[best].ResetMS
	if denied {
		lim.deny(it, r)
	} else {
		r.Allowed = true
	}
	return ds[0].NowMS, nil
}

// saturate spends, for a report whose cost did not fit, what remains of its limits: the
// least remaining of any limit, in one more store operation (spec §14.3). The verdicts
// stay denials; ds gets the remaining and reset after the second spend.
func (lim *Limiter) saturate(ctx context.Context, limits []engine.Limit, counter func(engine.Limit) engine.Counter, cost int64, ds *[engine.MaxSpendAll]engine.Decision) error {
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
	spends := make([]engine.Spend, len(limits))
	for i, l := range limits {
		spends[i] = engine.Spend{Counter: counter(l), Limit: l.Limit, Cost: fit}
	}
	out := make([]engine.Decision, len(limits))
	var err error
	if len(limits) == 1 {
		out[0], err = lim.store.Spend(ctx, spends[0])
	} else {
		err = lim.store.SpendAll(ctx, spends, out)
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
func (lim *Limiter) deny(it *engine.Item, r *engine.ItemResult) {
	r.Allowed = it.Shadow
	r.ShadowDenied = it.Shadow
}

// moreRestrictive orders one item's verdicts: a denial first, then fewer remaining, then
// the longer reset.
func moreRestrictive(a, b *engine.Decision) bool {
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
