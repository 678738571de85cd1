// Package leases is the capability of concurrency leases (spec §5): acquiring, releasing
// and renewing them, and listing those held on a key (spec §15.5). It reaches the store
// only through Port.
package leases

import (
	"context"

	"github.com/leashd/leash/engine"
)

// Port is what leases need of a store: the lease operations of the Decider role and a
// namespace's rules.
type Port interface {
	// Acquire is engine.Decider's.
	Acquire(ctx context.Context, set engine.LeaseSet, token string, limit, ttlMS int64) (engine.LeaseDecision, error)
	// Release is engine.Decider's.
	Release(ctx context.Context, set engine.LeaseSet, token string) (engine.ReleaseResult, error)
	// Renew is engine.Decider's.
	Renew(ctx context.Context, set engine.LeaseSet, token string, ttlMS int64) (engine.RenewResult, error)
	// HeldLeases is engine.Decider's.
	HeldLeases(ctx context.Context, set engine.LeaseSet) (engine.HeldLeases, error)
	// Rules is engine.RuleStore's.
	Rules(ctx context.Context, account, namespace string) (engine.Rules, error)
}

// Meter is what an acquisition needs of the usage capability.
type Meter interface {
	// HardCap refuses work once a's month usage reached its plan's hard cap.
	HardCap(a *engine.Account, edge engine.Edge) error
	// Record counts one decision.
	Record(a *engine.Account, namespace string, nowMS int64, blocked bool)
}

// Leases takes, frees and lists leases over a Port.
type Leases struct {
	store Port
	usage Meter
}

// New returns the lease capability over store, counting acquisitions in usage.
func New(store Port, usage Meter) *Leases { return &Leases{store: store, usage: usage} }

// AcquireRequest asks for a lease (POST /v1/leases).
type AcquireRequest struct {
	Namespace string
	Key       string
	Limit     *int64
	WindowMS  *int64
}

// Acquire takes a lease if fewer than limit are held (spec §5.2).
func (l *Leases) Acquire(ctx context.Context, a *engine.Account, r *AcquireRequest) (engine.LeaseDecision, error) {
	if err := engine.Active(a); err != nil {
		return engine.LeaseDecision{}, err
	}
	if err := engine.LeasesAllowed(a); err != nil {
		return engine.LeaseDecision{}, err
	}
	if err := engine.CheckTarget(r.Namespace, r.Key); err != nil {
		return engine.LeaseDecision{}, err
	}
	if err := engine.CheckInline("limit", r.Limit, engine.MaxLimit); err != nil {
		return engine.LeaseDecision{}, err
	}
	if err := engine.CheckInline("window_ms", r.WindowMS, engine.MaxWindowMS); err != nil {
		return engine.LeaseDecision{}, err
	}
	var limit, ttl int64
	if r.Limit != nil {
		limit = *r.Limit
	}
	if r.WindowMS != nil {
		ttl = *r.WindowMS
	}
	if r.Limit == nil || r.WindowMS == nil {
		rules, err := l.store.Rules(ctx, a.ID, r.Namespace)
		if err != nil {
			return engine.LeaseDecision{}, engine.Unavailable(err)
		}
		if rule := rules.Concurrent; rule != nil {
			ruleLimit, ruleTTL := rule.For(r.Key)
			if r.Limit == nil {
				limit = ruleLimit
			}
			if r.WindowMS == nil {
				ttl = ruleTTL
			}
		}
	}
	if limit == 0 || ttl == 0 {
		return engine.LeaseDecision{}, engine.NewError(engine.CodeMissingLimit, "limit and window_ms are required: send them or set a concurrent_limit rule on the namespace")
	}
	if err := l.usage.HardCap(a, engine.EdgeLeases); err != nil {
		return engine.LeaseDecision{}, err
	}
	token := engine.NewLeaseToken()
	d, err := l.store.Acquire(ctx, engine.LeaseSet{Account: a.ID, Namespace: r.Namespace, Key: r.Key}, token, limit, ttl)
	if err != nil {
		return engine.LeaseDecision{}, engine.Unavailable(err)
	}
	if d.Allowed {
		d.LeaseID = engine.FormatLeaseID(r.Namespace, r.Key, token)
	}
	l.usage.Record(a, r.Namespace, d.NowMS, !d.Allowed)
	return d, nil
}

func parseLease(a *engine.Account, id string) (engine.LeaseSet, string, error) {
	ns, key, token, ok := engine.ParseLeaseID(id)
	if !ok {
		return engine.LeaseSet{}, "", engine.NewError(engine.CodeInvalidLeaseID, "lease id is not one Leash issued")
	}
	return engine.LeaseSet{Account: a.ID, Namespace: ns, Key: key}, token, nil
}

// Release frees a lease; it is idempotent and never touches another account's leases.
func (l *Leases) Release(ctx context.Context, a *engine.Account, leaseID string) (engine.ReleaseResult, error) {
	set, token, err := parseLease(a, leaseID)
	if err != nil {
		return engine.ReleaseResult{}, err
	}
	res, err := l.store.Release(ctx, set, token)
	if err != nil {
		return engine.ReleaseResult{}, engine.Unavailable(err)
	}
	return res, nil
}

// Renew extends a held lease to now + window (default: its original time-to-live).
func (l *Leases) Renew(ctx context.Context, a *engine.Account, leaseID string, windowMS *int64) (engine.RenewResult, error) {
	if err := engine.Active(a); err != nil {
		return engine.RenewResult{}, err
	}
	set, token, err := parseLease(a, leaseID)
	if err != nil {
		return engine.RenewResult{}, err
	}
	if err := engine.CheckInline("window_ms", windowMS, engine.MaxWindowMS); err != nil {
		return engine.RenewResult{}, err
	}
	var ttl int64
	if windowMS != nil {
		ttl = *windowMS
	}
	res, err := l.store.Renew(ctx, set, token, ttl)
	if err != nil {
		return engine.RenewResult{}, engine.Unavailable(err)
	}
	return res, nil
}

// LeaseView is one lease as GET /v1/namespaces/{ns}/leases shows it.
type LeaseView struct {
	LeaseID     string
	ExpiresInMS int64
}

// LeaseList is GET /v1/namespaces/{ns}/leases?key=K: the leases held on the key and the
// limit an acquisition would resolve now (nil when it would resolve none).
type LeaseList struct {
	Namespace string
	Key       string
	Active    int64
	Limit     *int64
	Leases    []LeaseView
}

// List lists the leases held on (ns, key) and the limit an acquisition without inline
// values would resolve: the namespace's concurrent rule, with the key's override
// (GET /v1/namespaces/{ns}/leases?key=K).
func (l *Leases) List(ctx context.Context, a *engine.Account, ns, key string) (LeaseList, error) {
	if err := engine.CheckTarget(ns, key); err != nil {
		return LeaseList{}, err
	}
	rules, err := l.store.Rules(ctx, a.ID, ns)
	if err != nil {
		return LeaseList{}, engine.Unavailable(err)
	}
	held, err := l.store.HeldLeases(ctx, engine.LeaseSet{Account: a.ID, Namespace: ns, Key: key})
	if err != nil {
		return LeaseList{}, engine.Unavailable(err)
	}
	out := LeaseList{Namespace: ns, Key: key, Active: int64(len(held.Leases)), Leases: make([]LeaseView, len(held.Leases))}
	if r := rules.Concurrent; r != nil {
		limit, _ := r.For(key)
		out.Limit = &limit
	}
	for i, h := range held.Leases {
		out.Leases[i] = LeaseView{LeaseID: engine.FormatLeaseID(ns, key, h.Token), ExpiresInMS: max(0, h.ExpiresMS-held.NowMS)}
	}
	return out, nil
}
