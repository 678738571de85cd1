package memstore

import (
	"cmp"
	"context"
	"slices"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore/record"
)

// The account-wide reads (spec §15.5). They visit every shard, or every usage entry: they
// serve the account's own listings, never a decision.

// RuleNamespaces returns the account's namespaces that have a rule.
func (s *tables) RuleNamespaces(_ context.Context, account string) ([]engine.NamespaceRules, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	prefix := record.AppendString(nil, account)
	var out []engine.NamespaceRules
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, p := range sh.rules {
			if len(k) < len(prefix) || k[:len(prefix)] != string(prefix) {
				continue
			}
			n := 0
			if p.rate != nil {
				n++
			}
			if p.concurrent != nil {
				n++
			}
			if n > 0 {
				out = append(out, engine.NamespaceRules{Namespace: k[len(prefix):], Rules: n})
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b engine.NamespaceRules) int { return cmp.Compare(a.Namespace, b.Namespace) })
	return out, nil
}

// ReadAccountUsage returns every namespace's daily usage of an account, and its month total.
func (s *tables) ReadAccountUsage(_ context.Context, q engine.AccountUsageQuery) (engine.AccountUsageReport, error) {
	if s.closed.Load() {
		return engine.AccountUsageReport{}, ErrClosed
	}
	if int64(q.LastDay-q.FirstDay)+1 > maxReadDays {
		return engine.AccountUsageReport{}, errUsageSpan
	}
	u := &s.usage
	u.mu.Lock()
	var rep engine.AccountUsageReport
	for k, c := range u.daily {
		if k.Account == q.Account && k.Day >= q.FirstDay && k.Day <= q.LastDay && (c.Total != 0 || c.Blocked != 0) {
			rep.Entries = append(rep.Entries, engine.NamespaceUsage{Namespace: k.Namespace, Day: k.Day, UsageCount: c})
		}
	}
	rep.MonthTotal = u.monthly[accountMonth{q.Account, q.Month}]
	u.mu.Unlock()
	slices.SortFunc(rep.Entries, func(a, b engine.NamespaceUsage) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Namespace, b.Namespace))
	})
	return rep, nil
}

// HeldLeases returns the unexpired leases of set.
func (s *decisions) HeldLeases(_ context.Context, set engine.LeaseSet) (engine.HeldLeases, error) {
	if s.closed.Load() {
		return engine.HeldLeases{}, ErrClosed
	}
	now := s.nowMS()
	var buf [keyBufSize]byte
	k := appendLeaseKey(buf[:0], &set)
	sh, _ := s.shardOf(k)
	out := engine.HeldLeases{NowMS: now}
	sh.mu.Lock()
	if ls := sh.leases[string(k)]; ls != nil {
		for _, l := range ls.h {
			if l.exp > now {
				out.Leases = append(out.Leases, engine.HeldLease{Token: l.token, ExpiresMS: l.exp})
			}
		}
	}
	sh.mu.Unlock()
	slices.SortFunc(out.Leases, func(a, b engine.HeldLease) int {
		return cmp.Or(cmp.Compare(a.ExpiresMS, b.ExpiresMS), cmp.Compare(a.Token, b.Token))
	})
	return out, nil
}
