package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit"
)

// ruleString formats a rule for messages and comparison.
func ruleString(r *engine.Rule) string {
	if r == nil {
		return "none"
	}
	name := "null"
	if r.Name != nil {
		name = fmt.Sprintf("%q", *r.Name)
	}
	return fmt.Sprintf("{%s %d %d %s%s}", r.Algorithm, r.Limit, r.WindowMS, name, overridesString(r.Overrides))
}

// overridesString formats a rule's overrides in their order, "" when it has none.
func overridesString(o engine.Overrides) string {
	s := ""
	for _, v := range o.List() {
		s += fmt.Sprintf(" %q:%d/%d", v.Key, v.Limit, v.WindowMS)
	}
	return s
}

func (h *harness) rules(account, ns string) engine.Rules {
	h.t.Helper()
	r, err := h.s.Rules(h.ctx, account, ns)
	if err != nil {
		h.t.Fatalf("Rules(%q, %q): %v", account, ns, err)
	}
	return r
}

func (h *harness) expectRules(account, ns string, rate, concurrent *engine.Rule) {
	h.t.Helper()
	got := h.rules(account, ns)
	if ruleString(got.Rate) != ruleString(rate) || ruleString(got.Concurrent) != ruleString(concurrent) {
		h.t.Errorf("Rules(%q, %q) = rate %s, concurrent %s; want %s, %s", account, ns,
			ruleString(got.Rate), ruleString(got.Concurrent), ruleString(rate), ruleString(concurrent))
	}
}

func (h *harness) putRule(account, ns string, r engine.Rule, created bool) {
	h.t.Helper()
	got, err := h.s.PutRule(h.ctx, account, ns, r)
	if err != nil {
		h.t.Fatalf("PutRule: %v", err)
	}
	if got != created {
		h.t.Errorf("PutRule(%q, %q, %s) created = %v, want %v", account, ns, ruleString(&r), got, created)
	}
}

func (h *harness) deleteRule(account, ns string, kind engine.RuleKind, deleted bool) {
	h.t.Helper()
	got, err := h.s.DeleteRule(h.ctx, account, ns, kind)
	if err != nil {
		h.t.Fatalf("DeleteRule: %v", err)
	}
	if got != deleted {
		h.t.Errorf("DeleteRule(%q, %q, %s) deleted = %v, want %v", account, ns, kind, got, deleted)
	}
}

func ruleTests() []subtest {
	return []subtest{
		{"PutReplaceGetDelete", func(h *harness) {
			fixed := engine.Rule{Algorithm: engine.FixedWindow, Limit: 10, WindowMS: 1000, Name: testkit.Ptr("per-second")}
			sliding := engine.Rule{Algorithm: engine.SlidingWindow, Limit: 20, WindowMS: 60_000}
			bucket := engine.Rule{Algorithm: engine.TokenBucket, Limit: 1_000_000_000, WindowMS: 31_622_400_000, Name: testkit.Ptr("")}
			conc := engine.Rule{Algorithm: engine.ConcurrentLimit, Limit: 5, WindowMS: 30_000, Name: testkit.Ptr("workers")}
			conc2 := engine.Rule{Algorithm: engine.ConcurrentLimit, Limit: 6, WindowMS: 1}

			h.expectRules(h.a, "ns", nil, nil)
			h.putRule(h.a, "ns", fixed, true)
			h.expectRules(h.a, "ns", &fixed, nil)
			h.putRule(h.a, "ns", sliding, false)
			h.expectRules(h.a, "ns", &sliding, nil)
			h.putRule(h.a, "ns", conc, true)
			h.expectRules(h.a, "ns", &sliding, &conc)
			h.putRule(h.a, "ns", bucket, false)
			h.putRule(h.a, "ns", conc2, false)
			h.expectRules(h.a, "ns", &bucket, &conc2)
			h.expectRules(h.a, "ns2", nil, nil)

			h.deleteRule(h.a, "ns", engine.RateRule, true)
			h.deleteRule(h.a, "ns", engine.RateRule, false)
			h.expectRules(h.a, "ns", nil, &conc2)
			h.putRule(h.a, "ns", fixed, true)
			h.deleteRule(h.a, "ns", engine.ConcurrentRule, true)
			h.deleteRule(h.a, "ns", engine.ConcurrentRule, false)
			h.expectRules(h.a, "ns", &fixed, nil)
			h.deleteRule(h.a, "ns", engine.RateRule, true)
			h.expectRules(h.a, "ns", nil, nil)
			h.deleteRule(h.a, "never", engine.RateRule, false)
		}},
		{"Overrides", func(h *harness) {
			// Per-key overrides are stored with the rule, in their order, and replaced
			// with it (spec §6.7).
			list := []engine.Override{
				{Key: "gold", Limit: 100, WindowMS: 60_000},
				{Key: "Größe ünïcode 键", Limit: 1},
				{Key: "a&b=c", Limit: 1_000_000_000, WindowMS: 31_622_400_000},
			}
			rate := engine.Rule{Algorithm: engine.TokenBucket, Limit: 10, WindowMS: 1000, Overrides: engine.NewOverrides(list)}
			conc := engine.Rule{Algorithm: engine.ConcurrentLimit, Limit: 2, WindowMS: 30_000, Name: testkit.Ptr("jobs"),
				Overrides: engine.NewOverrides([]engine.Override{{Key: "batch", Limit: 20}})}
			h.putRule(h.a, "ns", rate, true)
			h.putRule(h.a, "ns", conc, true)
			h.expectRules(h.a, "ns", &rate, &conc)
			got := h.rules(h.a, "ns")
			for _, c := range []struct {
				key           string
				limit, window int64
			}{{"gold", 100, 60_000}, {"Größe ünïcode 键", 1, 1000}, {"a&b=c", 1_000_000_000, 31_622_400_000}, {"other", 10, 1000}, {"GOLD", 10, 1000}} {
				if l, w := got.Rate.For(c.key); l != c.limit || w != c.window {
					h.t.Errorf("rate rule For(%q) = %d, %d; want %d, %d", c.key, l, w, c.limit, c.window)
				}
			}
			if l, w := got.Concurrent.For("batch"); l != 20 || w != 30_000 {
				h.t.Errorf("concurrent rule For(batch) = %d, %d; want 20, 30000", l, w)
			}
			list[0].Limit = 7 // the caller's slice is not the stored rule's
			h.expectRules(h.a, "ns", &engine.Rule{Algorithm: engine.TokenBucket, Limit: 10, WindowMS: 1000,
				Overrides: engine.NewOverrides([]engine.Override{{Key: "gold", Limit: 100, WindowMS: 60_000},
					{Key: "Größe ünïcode 键", Limit: 1}, {Key: "a&b=c", Limit: 1_000_000_000, WindowMS: 31_622_400_000}})}, &conc)
			h.expectRules(h.b, "ns", nil, nil)

			// Replacing the rule without overrides drops them; the other slot keeps its own.
			plain := engine.Rule{Algorithm: engine.TokenBucket, Limit: 10, WindowMS: 1000}
			h.putRule(h.a, "ns", plain, false)
			h.expectRules(h.a, "ns", &plain, &conc)
			if l, _ := h.rules(h.a, "ns").Rate.For("gold"); l != 10 {
				h.t.Errorf("after the replace, For(gold) = %d, want the rule's 10", l)
			}

			// The most a rule holds, each found by its key.
			many := make([]engine.Override, engine.MaxOverrides)
			for i := range many {
				many[i] = engine.Override{Key: fmt.Sprintf("customer-%04d", i), Limit: int64(i + 1)}
			}
			big := engine.Rule{Algorithm: engine.SlidingWindow, Limit: 5, WindowMS: 2000, Overrides: engine.NewOverrides(many)}
			h.putRule(h.a, "big", big, true)
			got = h.rules(h.a, "big")
			if n := got.Rate.Overrides.Len(); n != engine.MaxOverrides {
				h.t.Fatalf("stored %d overrides, want %d", n, engine.MaxOverrides)
			}
			for i := 0; i < engine.MaxOverrides; i += 97 {
				if l, w := got.Rate.For(many[i].Key); l != int64(i+1) || w != 2000 {
					h.t.Errorf("For(%q) = %d, %d; want %d, 2000", many[i].Key, l, w, i+1)
				}
			}
			h.deleteRule(h.a, "big", engine.RateRule, true)
			h.expectRules(h.a, "big", nil, nil)
		}},
		{"NoAliasing", func(h *harness) {
			name := "original"
			r := engine.Rule{Algorithm: engine.FixedWindow, Limit: 10, WindowMS: 1000, Name: &name}
			h.putRule(h.a, "ns", r, true)
			name = "changed by the caller"
			r.Limit = 99
			want := engine.Rule{Algorithm: engine.FixedWindow, Limit: 10, WindowMS: 1000, Name: testkit.Ptr("original")}
			got := h.rules(h.a, "ns")
			if ruleString(got.Rate) != ruleString(&want) {
				h.t.Fatalf("stored rule %s changed with the caller's copy; want %s", ruleString(got.Rate), ruleString(&want))
			}
			*got.Rate.Name = "changed through the result"
			got.Rate.Limit = 98
			h.expectRules(h.a, "ns", &want, nil)
		}},
	}
}

func (h *harness) addUsage(b engine.UsageBatch) {
	h.t.Helper()
	if err := h.s.AddUsage(h.ctx, b); err != nil {
		h.t.Fatalf("AddUsage(%q): %v", b.ID, err)
	}
}

func (h *harness) expectUsage(q engine.UsageQuery, days []engine.UsageCount, monthTotal int64) {
	h.t.Helper()
	rep, err := h.s.ReadUsage(h.ctx, q)
	if err != nil {
		h.t.Fatalf("ReadUsage: %v", err)
	}
	if !slices.Equal(rep.Days, days) || rep.MonthTotal != monthTotal {
		h.t.Errorf("ReadUsage(%s %s %s..%s, month %s) = %v, month %d; want %v, %d", q.Account, q.Namespace,
			q.FirstDay, q.LastDay, q.Month, rep.Days, rep.MonthTotal, days, monthTotal)
	}
}

func (h *harness) expectMonthTotals(m engine.Month, accounts []string, want []int64) {
	h.t.Helper()
	got, err := h.s.MonthTotals(h.ctx, m, accounts)
	if err != nil {
		h.t.Fatalf("MonthTotals: %v", err)
	}
	if !slices.Equal(got, want) {
		h.t.Errorf("MonthTotals(%s, %v) = %v, want %v", m, accounts, got, want)
	}
}

// uc is a UsageCount.
func uc(total, blocked int64) engine.UsageCount {
	return engine.UsageCount{Total: total, Blocked: blocked}
}

// today is BaseMS's day, 2027-01-16, in month 2027-01.
const today = engine.Day(BaseMS / 86_400_000)

func usageTests() []subtest {
	return []subtest{
		{"BatchAppliedOnce", func(h *harness) {
			jan := today.Month()
			b := engine.UsageBatch{ID: h.a + "-batch-1", Counts: map[engine.UsageKey]engine.UsageCount{
				{Account: h.a, Namespace: "ns", Day: today}:      uc(5, 1),
				{Account: h.a, Namespace: "ns", Day: today - 2}:  uc(2, 0),
				{Account: h.a, Namespace: "ns2", Day: today}:     uc(3, 3),
				{Account: h.a, Namespace: "ns2", Day: today - 1}: uc(1, 0),
			}}
			q := engine.UsageQuery{Account: h.a, Namespace: "ns", FirstDay: today - 3, LastDay: today, Month: jan}
			h.addUsage(b)
			h.expectUsage(q, []engine.UsageCount{uc(0, 0), uc(2, 0), uc(0, 0), uc(5, 1)}, 11)
			h.addUsage(b) // a retried batch
			h.expectUsage(q, []engine.UsageCount{uc(0, 0), uc(2, 0), uc(0, 0), uc(5, 1)}, 11)
			h.addUsage(engine.UsageBatch{ID: h.a + "-batch-2", Counts: map[engine.UsageKey]engine.UsageCount{
				{Account: h.a, Namespace: "ns", Day: today}: uc(1, 1),
			}})
			h.expectUsage(q, []engine.UsageCount{uc(0, 0), uc(2, 0), uc(0, 0), uc(6, 2)}, 12)
			q2 := q
			q2.Namespace = "ns2"
			h.expectUsage(q2, []engine.UsageCount{uc(0, 0), uc(0, 0), uc(1, 0), uc(3, 3)}, 12)
			h.expectMonthTotals(jan, []string{h.a}, []int64{12})
			// A retry long after is still ignored (ids are kept at least an hour).
			h.clock.Advance(59 * time.Minute)
			h.addUsage(b)
			h.expectMonthTotals(jan, []string{h.a}, []int64{12})
		}},
		{"ThirtyDaysZeroFilled", func(h *harness) {
			h.addUsage(engine.UsageBatch{ID: h.a + "-b", Counts: map[engine.UsageKey]engine.UsageCount{
				{Account: h.a, Namespace: "ns", Day: today - 29}: uc(4, 0),
				{Account: h.a, Namespace: "ns", Day: today - 30}: uc(9, 9), // outside the 30 days
				{Account: h.a, Namespace: "ns", Day: today}:      uc(1, 1),
			}})
			days := make([]engine.UsageCount, 30)
			days[0], days[29] = uc(4, 0), uc(1, 1)
			// 2026-12-18 .. 2027-01-16: the month total counts January only.
			h.expectUsage(engine.UsageQuery{Account: h.a, Namespace: "ns", FirstDay: today - 29, LastDay: today, Month: today.Month()}, days, 1)
			h.expectUsage(engine.UsageQuery{Account: h.a, Namespace: "ns", FirstDay: today, LastDay: today, Month: today.Month()}, []engine.UsageCount{uc(1, 1)}, 1)
		}},
		{"MonthBoundary", func(h *harness) {
			dec31, jan1 := today-16, today-15
			if dec31.String() != "2026-12-31" || jan1.String() != "2027-01-01" {
				h.t.Fatalf("days %s %s", dec31, jan1)
			}
			jan, dec := jan1.Month(), dec31.Month()
			h.addUsage(engine.UsageBatch{ID: h.a + "-b", Counts: map[engine.UsageKey]engine.UsageCount{
				{Account: h.a, Namespace: "ns", Day: dec31}: uc(7, 0),
				{Account: h.a, Namespace: "ns", Day: jan1}:  uc(4, 1),
				{Account: h.b, Namespace: "ns", Day: dec31}: uc(2, 2),
			}})
			h.expectUsage(engine.UsageQuery{Account: h.a, Namespace: "ns", FirstDay: dec31 - 1, LastDay: jan1, Month: jan},
				[]engine.UsageCount{uc(0, 0), uc(7, 0), uc(4, 1)}, 4)
			h.expectUsage(engine.UsageQuery{Account: h.a, Namespace: "ns", FirstDay: dec31 - 1, LastDay: jan1, Month: dec},
				[]engine.UsageCount{uc(0, 0), uc(7, 0), uc(4, 1)}, 7)
			h.expectMonthTotals(dec, []string{h.b, h.a, h.a + "-nobody"}, []int64{2, 7, 0})
			h.expectMonthTotals(jan, []string{h.a, h.b}, []int64{4, 0})
			h.expectMonthTotals(jan, nil, []int64{})
		}},
	}
}

func isolationTests() []subtest {
	return []subtest{
		{"Counters", func(h *harness) {
			h.at(0)
			ca := h.counter(engine.TokenBucket, "k", 1000)
			cb := ca
			cb.Account = h.b
			h.expect(ca, 1, 1, yes, 0, 1000)
			h.expect(cb, 1, 1, yes, 0, 1000)
			h.expect(ca, 1, 1, no, 0, 1000)
			h.expectReset(cb, true)
			h.expectReset(cb, false)
			h.expect(ca, 1, 1, no, 0, 1000)
			h.expectReset(ca, true)
		}},
		{"Leases", func(h *harness) {
			h.at(0)
			sa := h.set("k")
			sb := sa
			sb.Account = h.b
			h.acquire(sa, "ta", 1, 1000, yes, 1, 1000)
			h.acquire(sb, "tb", 1, 1000, yes, 1, 1000)
			h.acquire(sb, "tb2", 1, 1000, no, 1, 1000)
			// B naming A's token in its own set: nothing of A's is touched or shown.
			h.release(sb, "ta", no, 1)
			h.renew(sb, "ta", 0, no, 1, 0)
			h.release(sa, "ta", yes, 0)
			h.release(sb, "tb", yes, 0)
		}},
		{"Rules", func(h *harness) {
			r := engine.Rule{Algorithm: engine.SlidingWindow, Limit: 3, WindowMS: 1000}
			h.putRule(h.a, "ns", r, true)
			h.expectRules(h.b, "ns", nil, nil)
			h.deleteRule(h.b, "ns", engine.RateRule, false)
			h.putRule(h.b, "ns", engine.Rule{Algorithm: engine.FixedWindow, Limit: 4, WindowMS: 2000}, true)
			h.expectRules(h.a, "ns", &r, nil)
		}},
		{"Usage", func(h *harness) {
			h.addUsage(engine.UsageBatch{ID: h.a + "-b", Counts: map[engine.UsageKey]engine.UsageCount{
				{Account: h.a, Namespace: "ns", Day: today}: uc(3, 1),
				{Account: h.b, Namespace: "ns", Day: today}: uc(5, 0),
			}})
			h.expectUsage(engine.UsageQuery{Account: h.a, Namespace: "ns", FirstDay: today, LastDay: today, Month: today.Month()}, []engine.UsageCount{uc(3, 1)}, 3)
			h.expectUsage(engine.UsageQuery{Account: h.b, Namespace: "ns", FirstDay: today, LastDay: today, Month: today.Month()}, []engine.UsageCount{uc(5, 0)}, 5)
			h.expectMonthTotals(today.Month(), []string{h.b, h.a}, []int64{5, 3})
		}},
	}
}
