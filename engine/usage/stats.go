package usage

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/leashd/leash/engine"
)

// DayStats is one day of a namespace's usage.
type DayStats struct {
	Day engine.Day
	engine.UsageCount
}

// MonthStats is an account's usage this month against its plan.
type MonthStats struct {
	Month     engine.Month
	Total     int64
	Quota     int64
	OverQuota bool
	HardCap   *int64
}

// Stats is GET /v1/namespaces/{ns}/stats.
type Stats struct {
	Namespace string
	Total     int64
	Blocked   int64
	Days      []DayStats
	Month     MonthStats
}

// StatsDays is how many UTC days Stats reports.
const StatsDays = 30

// HardCap refuses work once the account's month usage reached its plan's hard cap, and
// tells the Observer of each refusal at edge.
func (m *Meter) HardCap(a *engine.Account, edge engine.Edge) error {
	if a.Plan.HardCap == nil {
		return nil
	}
	total, nowMS := m.tally.monthTotal(a.ID)
	if total < *a.Plan.HardCap {
		return nil
	}
	if m.observer != nil {
		m.observer.HardCapRefused(a, edge)
	}
	end := engine.MonthOf(time.UnixMilli(nowMS)).End().UnixMilli()
	return &engine.Error{
		Code:          engine.CodeHardCapExceeded,
		Message:       "monthly hard cap reached; requests are refused until the month ends (UTC)",
		RetryAfterSec: max(1, (end-nowMS+999)/1000),
	}
}

// Stats reports a namespace's last 30 UTC days and its account's month (spec §7.2).
func (m *Meter) Stats(ctx context.Context, a *engine.Account, ns string) (Stats, error) {
	if err := engine.CheckNamespace(ns); err != nil {
		return Stats{}, err
	}
	nowMS, err := m.store.NowMS(ctx)
	if err != nil {
		return Stats{}, engine.Unavailable(err)
	}
	today := engine.DayOf(nowMS)
	q := engine.UsageQuery{Account: a.ID, Namespace: ns, FirstDay: today - StatsDays + 1, LastDay: today, Month: today.Month()}
	rep, err := m.store.ReadUsage(ctx, q)
	if err != nil {
		return Stats{}, engine.Unavailable(err)
	}
	if len(rep.Days) != StatsDays {
		return Stats{}, errors.New("engine: store returned a usage report of the wrong length")
	}
	st := Stats{Namespace: ns, Days: make([]DayStats, StatsDays)}
	for i, c := range rep.Days {
		st.Days[i] = DayStats{Day: q.FirstDay + engine.Day(i), UsageCount: c}
		st.Total += c.Total
		st.Blocked += c.Blocked
	}
	st.Month = MonthStats{
		Month:     q.Month,
		Total:     rep.MonthTotal,
		Quota:     a.Plan.MonthlyQuota,
		OverQuota: rep.MonthTotal > a.Plan.MonthlyQuota,
		HardCap:   a.Plan.HardCap,
	}
	return st, nil
}

// The account-wide reads of spec §15.5: an account's usage across its namespaces, its
// namespaces, and who holds the leases of one key.

// NamespaceTotals is one namespace's usage over the StatsDays days of a report.
type NamespaceTotals struct {
	Namespace string
	engine.UsageCount
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
	engine.UsageCount
}

// Usage reports the account across all its namespaces (GET /v1/usage).
func (m *Meter) Usage(ctx context.Context, a *engine.Account) (AccountUsage, error) {
	nowMS, err := m.store.NowMS(ctx)
	if err != nil {
		return AccountUsage{}, engine.Unavailable(err)
	}
	today := engine.DayOf(nowMS)
	q := engine.AccountUsageQuery{Account: a.ID, FirstDay: today - StatsDays + 1, LastDay: today, Month: today.Month()}
	rep, err := m.store.ReadAccountUsage(ctx, q)
	if err != nil {
		return AccountUsage{}, engine.Unavailable(err)
	}
	u := AccountUsage{Days: make([]DayStats, StatsDays), Namespaces: []NamespaceTotals{}}
	for i := range u.Days {
		u.Days[i].Day = q.FirstDay + engine.Day(i)
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

// Namespaces lists every namespace of the account with a rule or with usage in the last
// StatsDays UTC days, by namespace (GET /v1/namespaces).
func (m *Meter) Namespaces(ctx context.Context, a *engine.Account) ([]NamespaceSummary, error) {
	rules, err := m.store.RuleNamespaces(ctx, a.ID)
	if err != nil {
		return nil, engine.Unavailable(err)
	}
	u, err := m.Usage(ctx, a)
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
