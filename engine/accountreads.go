package engine

import (
	"cmp"
	"context"
	"slices"
)

// The account-wide reads of spec §15.5: an account's usage across its namespaces, its
// namespaces, and who holds the leases of one key.

// NamespaceTotals is one namespace's usage over the StatsDays days of a report.
type NamespaceTotals struct {
	Namespace string
	UsageCount
}

// AccountUsage is GET /v1/usage: the account's month against its plan, each namespace's
// totals over the last StatsDays UTC days (by namespace), and each day's totals over every
// namespace (oldest first).
type AccountUsage struct {
	Month      MonthStats
	Namespaces []NamespaceTotals
	Days       []DayStats
}

// NamespaceSummary is one namespace of GET /v1/namespaces: its rules and its usage over the
// last StatsDays UTC days.
type NamespaceSummary struct {
	Namespace string
	Rules     int
	UsageCount
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

// Usage reports the account across all its namespaces (GET /v1/usage).
func (e *Engine) Usage(ctx context.Context, a *Account) (AccountUsage, error) {
	nowMS, err := e.store.Decider.NowMS(ctx)
	if err != nil {
		return AccountUsage{}, unavailable(err)
	}
	today := DayOf(nowMS)
	q := AccountUsageQuery{Account: a.ID, FirstDay: today - StatsDays + 1, LastDay: today, Month: today.Month()}
	rep, err := e.store.Usage.ReadAccountUsage(ctx, q)
	if err != nil {
		return AccountUsage{}, unavailable(err)
	}
	u := AccountUsage{Days: make([]DayStats, StatsDays), Namespaces: []NamespaceTotals{}}
	for i := range u.Days {
		u.Days[i].Day = q.FirstDay + Day(i)
	}
	byNS := map[string]*NamespaceTotals{}
	for _, en := range rep.Entries {
		if en.Day < q.FirstDay || en.Day > q.LastDay {
			continue
		}
		d := &u.Days[en.Day-q.FirstDay]
		d.Total += en.Total
		d.Blocked += en.Blocked
		t := byNS[en.Namespace]
		if t == nil {
			t = &NamespaceTotals{Namespace: en.Namespace}
			byNS[en.Namespace] = t
		}
		t.Total += en.Total
		t.Blocked += en.Blocked
	}
	for _, t := range byNS {
		u.Namespaces = append(u.Namespaces, *t)
	}
	slices.SortFunc(u.Namespaces, func(x, y NamespaceTotals) int { return cmp.Compare(x.Namespace, y.Namespace) })
	u.Month = MonthStats{Month: q.Month, Total: rep.MonthTotal, Quota: a.Plan.MonthlyQuota,
		OverQuota: rep.MonthTotal > a.Plan.MonthlyQuota, HardCap: a.Plan.HardCap}
	return u, nil
}

// UsageOf is Usage for the account with id (GET /v1/admin/accounts/{id}/usage).
func (e *Engine) UsageOf(ctx context.Context, id string) (AccountUsage, error) {
	if err := checkAccountID(id); err != nil {
		return AccountUsage{}, err
	}
	a, ok := e.Account(id)
	if !ok {
		if e.accounts == nil {
			return AccountUsage{}, notFound(id)
		}
		// Created on another instance since the last poll: read it from the store.
		sa, found, err := e.accounts.GetAccount(ctx, id)
		if err != nil {
			return AccountUsage{}, unavailable(err)
		}
		plan, known := e.directory.Load().plans[sa.Plan]
		if !found || !known {
			return AccountUsage{}, notFound(id)
		}
		a = &Account{ID: sa.ID, Plan: plan, Source: SourceAPI}
	}
	return e.Usage(ctx, a)
}

// Namespaces lists every namespace of the account with a rule or with usage in the last
// StatsDays UTC days, by namespace (GET /v1/namespaces).
func (e *Engine) Namespaces(ctx context.Context, a *Account) ([]NamespaceSummary, error) {
	rules, err := e.store.Rules.RuleNamespaces(ctx, a.ID)
	if err != nil {
		return nil, unavailable(err)
	}
	u, err := e.Usage(ctx, a)
	if err != nil {
		return nil, err
	}
	byNS := map[string]*NamespaceSummary{}
	out := make([]NamespaceSummary, 0, len(rules)+len(u.Namespaces))
	for _, r := range rules {
		byNS[r.Namespace] = &NamespaceSummary{Namespace: r.Namespace, Rules: r.Rules}
	}
	for _, t := range u.Namespaces {
		s := byNS[t.Namespace]
		if s == nil {
			s = &NamespaceSummary{Namespace: t.Namespace}
			byNS[t.Namespace] = s
		}
		s.UsageCount = t.UsageCount
	}
	for _, s := range byNS {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(x, y NamespaceSummary) int { return cmp.Compare(x.Namespace, y.Namespace) })
	return out, nil
}

// Leases lists the leases held on (ns, key) and the limit an acquisition without inline
// values would resolve: the namespace's concurrent rule, with the key's override
// (GET /v1/namespaces/{ns}/leases?key=K).
func (e *Engine) Leases(ctx context.Context, a *Account, ns, key string) (LeaseList, error) {
	if err := checkTarget(ns, key); err != nil {
		return LeaseList{}, err
	}
	rules, err := e.store.Rules.Rules(ctx, a.ID, ns)
	if err != nil {
		return LeaseList{}, unavailable(err)
	}
	held, err := e.store.Decider.HeldLeases(ctx, LeaseSet{Account: a.ID, Namespace: ns, Key: key})
	if err != nil {
		return LeaseList{}, unavailable(err)
	}
	out := LeaseList{Namespace: ns, Key: key, Active: int64(len(held.Leases)), Leases: make([]LeaseView, len(held.Leases))}
	if r := rules.Concurrent; r != nil {
		limit, _ := r.For(key)
		out.Limit = &limit
	}
	for i, l := range held.Leases {
		out.Leases[i] = LeaseView{LeaseID: FormatLeaseID(ns, key, l.Token), ExpiresInMS: max(0, l.ExpiresMS-held.NowMS)}
	}
	return out, nil
}

// deleteRules removes every rule of the account (a deleted account's, spec §15.6).
func (e *Engine) deleteRules(ctx context.Context, account string) error {
	nss, err := e.store.Rules.RuleNamespaces(ctx, account)
	if err != nil {
		return err
	}
	for _, ns := range nss {
		for _, k := range []RuleKind{RateRule, ConcurrentRule} {
			if _, err := e.store.Rules.DeleteRule(ctx, account, ns.Namespace, k); err != nil {
				return err
			}
		}
	}
	return nil
}
