package limits

import (
	"context"

	"github.com/leashd/leash/engine"
)

// ResetRequest clears one counter (POST /v1/limit/reset), resolved like a check.
type ResetRequest struct {
	Namespace string
	Key       string
	Algorithm engine.Algorithm // AlgorithmUnknown when absent
	WindowMS  *int64
}

// Reset clears one counter; a counter with no unexpired state is key_not_found.
func (lim *Limiter) Reset(ctx context.Context, a *engine.Account, r *ResetRequest) error {
	if err := engine.Active(a); err != nil {
		return err
	}
	if err := engine.CheckTarget(r.Namespace, r.Key); err != nil {
		return err
	}
	if err := engine.CheckInline("window_ms", r.WindowMS, engine.MaxWindowMS); err != nil {
		return err
	}
	rules := ruleLookup{store: lim.store, a: a, ns: r.Namespace}
	l, err := resolveRate(ctx, a, r.Key, engine.Inline{Algorithm: r.Algorithm, WindowMS: r.WindowMS}, false, &rules)
	if err != nil {
		return err
	}
	c := engine.Counter{Account: a.ID, Namespace: r.Namespace, Key: r.Key, Algorithm: l.Algorithm, WindowMS: l.WindowMS}
	if lim.cache != nil {
		lim.cache.Forget(c) // before the store: a denial cached meanwhile would outlive the reset
	}
	existed, err := lim.store.Reset(ctx, c)
	if lim.cache != nil {
		lim.cache.Forget(c) // and after: a denial decided before the reset may land meanwhile
	}
	if err != nil {
		return engine.Unavailable(err)
	}
	if !existed {
		return engine.NewError(engine.CodeKeyNotFound, "no counter state for this key")
	}
	lim.audit.Record(ctx, engine.Actor{Account: a.ID}, engine.AuditEntry{Action: engine.AuditCounterReset, Account: a.ID, AccountCreatedMS: a.CreatedMS, Target: r.Namespace,
		Details: map[string]string{"key": r.Key, "algorithm": l.Algorithm.String()}})
	return nil
}

// LocalCacheHits is the number of denials answered from the over-limit cache.
func (lim *Limiter) LocalCacheHits() int64 {
	if lim.cache == nil {
		return 0
	}
	return lim.cache.Hits()
}
