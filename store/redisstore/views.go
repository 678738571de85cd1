package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
)

// The account-wide reads (spec §15.5): an account's namespaces with rules (from the set
// rules_put and rules_del keep), its usage over every namespace (the day hashes read
// whole), and the leases held on one key.

// RuleNamespaces returns the account's namespaces that have a rule, with how many each has.
func (s *RuleStore) RuleNamespaces(ctx context.Context, account string) ([]engine.NamespaceRules, error) {
	prefix := s.keys.Rules(account, "")
	cmd, err := s.eval(s.opCtx(ctx), s.scripts.RulesNamespaces, []string{s.keys.RuleIndex(account)}, prefix)
	if err != nil {
		return nil, err
	}
	l, ok := cmd.Val().([]any)
	if !ok {
		return nil, errors.New("redisstore: rule namespaces: malformed script reply")
	}
	out := make([]engine.NamespaceRules, 0, len(l)/2)
	for i := 0; i+1 < len(l); i += 2 {
		ns, _ := l[i].(string)
		n, _ := l[i+1].(int64)
		out = append(out, engine.NamespaceRules{Namespace: ns, Rules: int(n)})
	}
	slices.SortFunc(out, func(a, b engine.NamespaceRules) int { return cmp.Compare(a.Namespace, b.Namespace) })
	return out, nil
}

// ReadAccountUsage reads the account's day hashes from FirstDay to LastDay and its month
// total in one pipeline.
func (s *UsageStore) ReadAccountUsage(ctx context.Context, q engine.AccountUsageQuery) (engine.AccountUsageReport, error) {
	if s.closed.Load() {
		return engine.AccountUsageReport{}, errClosed
	}
	n := int(max(int64(q.LastDay-q.FirstDay)+1, 0))
	if n > maxReportDays {
		return engine.AccountUsageReport{}, errors.New("redisstore: usage query spans too many days")
	}
	ctx = s.opCtx(ctx)
	pipe := s.client.Pipeline()
	days := make([]*redis.MapStringStringCmd, n)
	for i := range n {
		days[i] = pipe.HGetAll(ctx, s.keys.UsageDay(q.Account, q.FirstDay+engine.Day(i)))
	}
	month := pipe.Get(ctx, s.keys.UsageMonth(q.Account, q.Month))
	_, _ = pipe.Exec(ctx)
	var rep engine.AccountUsageReport
	for i, d := range days {
		fields, err := d.Result()
		if err != nil {
			return engine.AccountUsageReport{}, err
		}
		byNS := map[string]engine.UsageCount{}
		for f, v := range fields {
			kind, ns, ok := strings.Cut(f, ":")
			if !ok {
				continue
			}
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return engine.AccountUsageReport{}, fmt.Errorf("redisstore: usage field %q: %w", f, err)
			}
			c := byNS[ns]
			switch kind {
			case "t":
				c.Total = x
			case "b":
				c.Blocked = x
			default:
				continue
			}
			byNS[ns] = c
		}
		day := q.FirstDay + engine.Day(i)
		for _, ns := range slices.Sorted(maps.Keys(byNS)) {
			if c := byNS[ns]; c.Total != 0 || c.Blocked != 0 {
				rep.Entries = append(rep.Entries, engine.NamespaceUsage{Namespace: ns, Day: day, UsageCount: c})
			}
		}
	}
	total, err := month.Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return engine.AccountUsageReport{}, err
	}
	rep.MonthTotal = total
	return rep, nil
}

// HeldLeases returns the unexpired leases of set, read with the store's clock.
func (s *Decider) HeldLeases(ctx context.Context, set engine.LeaseSet) (engine.HeldLeases, error) {
	cmd, err := s.eval(s.opCtx(ctx), s.scripts.LeasesHeld, []string{s.keys.Leases(set)[0]}, s.nowArg())
	if err != nil {
		return engine.HeldLeases{}, err
	}
	l, ok := cmd.Val().([]any)
	if !ok || len(l) < 1 {
		return engine.HeldLeases{}, errors.New("redisstore: held leases: malformed script reply")
	}
	now, err := strconv.ParseInt(fmt.Sprint(l[0]), 10, 64)
	if err != nil {
		return engine.HeldLeases{}, errors.New("redisstore: held leases: malformed script reply")
	}
	out := engine.HeldLeases{NowMS: now}
	for i := 1; i+1 < len(l); i += 2 {
		tok, _ := l[i].(string)
		exp, err := strconv.ParseFloat(fmt.Sprint(l[i+1]), 64)
		if err != nil {
			return engine.HeldLeases{}, errors.New("redisstore: held leases: malformed script reply")
		}
		out.Leases = append(out.Leases, engine.HeldLease{Token: tok, ExpiresMS: int64(exp)})
	}
	slices.SortStableFunc(out.Leases, func(a, b engine.HeldLease) int {
		return cmp.Or(cmp.Compare(a.ExpiresMS, b.ExpiresMS), cmp.Compare(a.Token, b.Token))
	})
	return out, nil
}
