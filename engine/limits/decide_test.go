package limits_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/limits"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/enginekit"
)

// TestDecideItems drives one query through every kind of item (spec §1.4, §9.5): given
// limits decided all-or-none, a shadow item, a cost above a limit, a zero limit, the
// namespace's rule as a fallback, and items with no limit; and checks the usage each
// counts (spec §7.1).
func TestDecideItems(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
	limits := []engine.Limit{
		{Algorithm: engine.FixedWindow, Limit: 2, WindowMS: 1000},
		{Algorithm: engine.SlidingWindow, Limit: 5, WindowMS: 60_000},
	}
	decide := func(items ...engine.Item) ([]engine.ItemResult, engine.Outcome) {
		t.Helper()
		out := make([]engine.ItemResult, len(items))
		o, err := f.Eng.Limits.Decide(ctx, acme, &engine.Query{Namespace: "n", Items: items}, out)
		if err != nil {
			t.Fatal(err)
		}
		return out, o
	}
	given := func(cost int64, shadow bool) engine.Item {
		return engine.Item{Key: "k", Cost: cost, Source: engine.Given, Limits: limits, Shadow: shadow}
	}
	r, o := decide(given(2, false))
	if !o.Allowed || !r[0].Allowed || r[0].Remaining != 0 || r[0].Index != 0 || o.NowMS != enginekit.Start.UnixMilli() {
		t.Fatalf("first: %+v %+v", r, o)
	}
	// The per-second limit denies; the minute's counter is not spent (all or none).
	r, o = decide(given(1, false))
	if o.Allowed || r[0].Allowed || r[0].Index != 0 || r[0].ShadowDenied {
		t.Fatalf("second: %+v", r)
	}
	r, o = decide(given(1, true))
	if !o.Allowed || !r[0].Allowed || !r[0].ShadowDenied {
		t.Fatalf("shadow: %+v", r)
	}
	// A cost above a limit is denied for it and spends nothing.
	r, _ = decide(given(3, false))
	if r[0].Allowed || r[0].Index != 0 {
		t.Fatalf("cost 3: %+v", r)
	}
	// Zero limit: denied until its window ends, without a store operation.
	f.Clock.Advance(250 * time.Millisecond)
	r, _ = decide(engine.Item{Key: "z", Cost: 1, Source: engine.Given, Limits: []engine.Limit{{Algorithm: engine.FixedWindow, Limit: 0, WindowMS: 1000}}})
	if r[0].Allowed || !r[0].Limited || r[0].ResetMS != 750 || r[0].Remaining != 0 {
		t.Fatalf("zero limit: %+v", r)
	}
	// No rule: RuleIfAny has no limit; with a rule it spends the rule's counter.
	r, _ = decide(engine.Item{Key: "k2", Cost: 1, Source: engine.RuleIfAny}, engine.Item{Source: engine.NoLimit})
	if !r[0].Allowed || r[0].Limited || !r[1].Allowed || r[1].Limited {
		t.Fatalf("no rule, no limit: %+v", r)
	}
	if _, _, err := f.Eng.Rules.Put(ctx, acme, "n", &rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(60_000))}); err != nil {
		t.Fatal(err)
	}
	r, _ = decide(engine.Item{Key: "k2", Cost: 1, Source: engine.RuleIfAny})
	if !r[0].Allowed || !r[0].Limited || r[0].Index != -1 || r[0].Limit != (engine.Limit{Algorithm: engine.FixedWindow, Limit: 1, WindowMS: 60_000}) {
		t.Fatalf("rule fallback: %+v", r)
	}
	r, _ = decide(engine.Item{Key: "k2", Cost: 1, Source: engine.RuleIfAny})
	if r[0].Allowed {
		t.Fatalf("rule fallback, second: %+v", r)
	}
	if err := f.Eng.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := f.Eng.Usage.Stats(ctx, acme, "n")
	if err != nil {
		t.Fatal(err)
	}
	// 9 items decided; blocked: the second, the cost-3 one, the zero limit and the last
	// rule fallback (the shadow denial is not blocked).
	if st.Total != 9 || st.Blocked != 4 {
		t.Fatalf("stats total %d blocked %d, want 9 and 4", st.Total, st.Blocked)
	}
}

// TestDecideRefusals: bad items, plan gates and the cost rule of POST /v1/limit; a query
// that fails spends and counts nothing.
func TestDecideRefusals(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	fw := engine.Limit{Algorithm: engine.FixedWindow, Limit: 1, WindowMS: 1000}
	bad := []struct {
		name string
		a    *engine.Account
		q    engine.Query
		code engine.Code
	}{
		{"no items", f.Accts["acme"], engine.Query{Namespace: "n"}, engine.CodeInvalidRequest},
		{"bad namespace", f.Accts["acme"], engine.Query{Namespace: "-n", Items: []engine.Item{{Key: "k", Source: engine.Given, Limits: []engine.Limit{fw}}}}, engine.CodeInvalidRequest},
		{"no limits", f.Accts["acme"], engine.Query{Namespace: "n", Items: []engine.Item{{Key: "k", Source: engine.Given}}}, engine.CodeInvalidRequest},
		{"lease algorithm", f.Accts["acme"], engine.Query{Namespace: "n", Items: []engine.Item{{Key: "k", Source: engine.Given, Limits: []engine.Limit{{Algorithm: engine.ConcurrentLimit, Limit: 1, WindowMS: 1}}}}}, engine.CodeInvalidRequest},
		{"same limit twice", f.Accts["acme"], engine.Query{Namespace: "n", Items: []engine.Item{{Key: "k", Source: engine.Given, Limits: []engine.Limit{fw, fw}}}}, engine.CodeInvalidRequest},
		{"window out of range", f.Accts["acme"], engine.Query{Namespace: "n", Items: []engine.Item{{Key: "k", Source: engine.Given, Limits: []engine.Limit{{Algorithm: engine.FixedWindow, Limit: 1, WindowMS: 0}}}}}, engine.CodeInvalidRequest},
		{"negative cost", f.Accts["acme"], engine.Query{Namespace: "n", Items: []engine.Item{{Key: "k", Cost: -1, Source: engine.Given, Limits: []engine.Limit{fw}}}}, engine.CodeInvalidRequest},
		{"strict cost above the limit", f.Accts["acme"], engine.Query{Namespace: "n", StrictCost: true, Items: []engine.Item{{Key: "k", Cost: 2, Source: engine.Given, Limits: []engine.Limit{fw}}}}, engine.CodeInvalidRequest},
		{"not on plan", f.Accts["cheap"], engine.Query{Namespace: "n", Items: []engine.Item{{Key: "k", Source: engine.Given, Limits: []engine.Limit{{Algorithm: engine.TokenBucket, Limit: 1, WindowMS: 1000}}}}}, engine.CodeAlgorithmNotOnPlan},
		{"unrecognized algorithm", f.Accts["acme"], engine.Query{Namespace: "n", Items: []engine.Item{{Key: "k", Source: engine.FromRule, Inline: engine.Inline{Algorithm: engine.AlgorithmUnrecognized}}}}, engine.CodeUnknownAlgorithm},
		{"a good item, then a bad one", f.Accts["acme"], engine.Query{Namespace: "n", Items: []engine.Item{{Key: "k", Cost: 1, Source: engine.Given, Limits: []engine.Limit{fw}}, {Key: "", Source: engine.Given, Limits: []engine.Limit{fw}}}}, engine.CodeInvalidRequest},
	}
	for _, tc := range bad {
		out := make([]engine.ItemResult, max(1, len(tc.q.Items)))
		if _, err := f.Eng.Limits.Decide(ctx, tc.a, &tc.q, out); engine.CodeOf(err) != tc.code {
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.code)
		}
	}
	if err := f.Eng.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := f.Eng.Usage.Stats(ctx, f.Accts["acme"], "n")
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 0 {
		t.Fatalf("refused queries counted %d", st.Total)
	}
	// Nothing was spent by the refused query with a good first item.
	out := make([]engine.ItemResult, 1)
	if _, err := f.Eng.Limits.Decide(ctx, f.Accts["acme"], &engine.Query{Namespace: "n", Items: []engine.Item{{Key: "k", Cost: 1, Source: engine.Given, Limits: []engine.Limit{fw}}}}, out); err != nil || !out[0].Allowed {
		t.Fatalf("after the refusals: %+v, %v", out, err)
	}
}

// countingStore counts the decisions that reach the store.
type countingStore struct {
	engine.Store
	spends atomic.Int64
}

func (s *countingStore) Spend(ctx context.Context, sp engine.Spend) (engine.Decision, error) {
	s.spends.Add(1)
	return s.Store.Spend(ctx, sp)
}

// TestLocalCacheOnChecks: POST /v1/limit shares the over-limit cache (spec §9.13): a
// denied counter is denied from memory, and a reset on this instance clears it.
func TestLocalCacheOnChecks(t *testing.T) {
	ctx := context.Background()
	cs := &countingStore{Store: memstore.New(memstore.Options{})}
	t.Cleanup(func() { _ = cs.Close() })
	dir, _ := engine.NewDirectory([]engine.AccountSpec{{ID: "a", Plan: engine.BuiltinPlans()["scale"]}})
	acct, _ := dir.Account("a")
	eng := wiring.New(engine.RolesOf(cs), dir, wiring.Options{LocalCacheMaxEntries: 10})
	chk := testkit.Check{Namespace: "n", Key: "k", Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(3_600_000))}
	if d, err := chk.Do(ctx, eng, acct); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if d, err := chk.Do(ctx, eng, acct); err != nil || d.Allowed {
		t.Fatal(d, err)
	}
	before := cs.spends.Load()
	for range 50 {
		if d, err := chk.Do(ctx, eng, acct); err != nil || d.Allowed || d.Remaining != 0 || d.ResetMS <= 0 {
			t.Fatal(d, err)
		}
	}
	if n := cs.spends.Load() - before; n != 0 || eng.Limits.LocalCacheHits() != 50 {
		t.Fatalf("%d store spends and %d cache hits during 50 denied checks, want 0 and 50", n, eng.Limits.LocalCacheHits())
	}
	// A look (cost 0) is not a denial the cache holds: it goes to the store.
	look := chk
	look.Cost = testkit.Ptr(int64(0))
	if _, err := look.Do(ctx, eng, acct); err != nil || cs.spends.Load() == before {
		t.Fatal("a look was answered from the cache", err)
	}
	if err := eng.Limits.Reset(ctx, acct, &limits.ResetRequest{Namespace: "n", Key: "k", Algorithm: engine.FixedWindow, WindowMS: testkit.Ptr(int64(3_600_000))}); err != nil {
		t.Fatal(err)
	}
	if d, err := chk.Do(ctx, eng, acct); err != nil || !d.Allowed {
		t.Fatalf("after the reset: %+v %v", d, err)
	}
}

// TestDecideReport: an RLQS report spends its allowed requests as far as they fit, the
// counter ending full when they do not, and counts every reported request in usage,
// the denied ones as blocked (spec §14.3).
func TestDecideReport(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
	fw := []engine.Limit{{Algorithm: engine.FixedWindow, Limit: 10, WindowMS: 60_000}}
	two := []engine.Limit{fw[0], {Algorithm: engine.SlidingWindow, Limit: 100, WindowMS: 3_600_000}}
	report := func(key string, limits []engine.Limit, allowed, denied int64) engine.ItemResult {
		t.Helper()
		out := make([]engine.ItemResult, 1)
		it := engine.Item{Key: key, Cost: allowed, Source: engine.Given, Limits: limits, Report: &engine.Report{Allowed: allowed, Denied: denied}}
		if _, err := f.Eng.Limits.Decide(ctx, acme, &engine.Query{Edge: engine.EdgeRLQS, Namespace: "n", Items: []engine.Item{it}}, out); err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	if r := report("k", fw, 4, 1); !r.Allowed || r.Remaining != 6 {
		t.Fatalf("fits: %+v", r)
	}
	if r := report("k", fw, 8, 0); r.Allowed || r.Remaining != 0 { // 6 of 8 spent
		t.Fatalf("saturates: %+v", r)
	}
	if r := report("k", fw, 0, 3); r.Allowed != true || r.Remaining != 0 { // a look
		t.Fatalf("look: %+v", r)
	}
	if r := report("big", fw, 50, 0); r.Allowed || r.Remaining != 0 { // more than the limit
		t.Fatalf("above the limit: %+v", r)
	}
	if r := report("two", two, 15, 0); r.Allowed || r.Remaining != 0 {
		t.Fatalf("two limits: %+v", r)
	}
	// The hour's counter got the 10 that fit the minute's.
	out := make([]engine.ItemResult, 1)
	if _, err := f.Eng.Limits.Decide(ctx, acme, &engine.Query{Namespace: "n", Items: []engine.Item{{Key: "two", Cost: 0, Source: engine.Given, Limits: two[1:]}}}, out); err != nil || out[0].Remaining != 90 {
		t.Fatalf("hour counter: %+v %v", out[0], err)
	}
	for _, bad := range []engine.Report{{Allowed: 1, Denied: -1}, {Allowed: 2, Denied: 0}} {
		it := engine.Item{Key: "k", Cost: 1, Source: engine.Given, Limits: fw, Report: &bad}
		if _, err := f.Eng.Limits.Decide(ctx, acme, &engine.Query{Namespace: "n", Items: []engine.Item{it}}, out); engine.CodeOf(err) != engine.CodeInvalidRequest {
			t.Errorf("report %+v: %v", bad, err)
		}
	}
	if err := f.Eng.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := f.Eng.Usage.Stats(ctx, acme, "n")
	if err != nil {
		t.Fatal(err)
	}
	// Reports: 5+8+3+50+15 requests, 1+3 denied; plus the one look.
	if st.Total != 82 || st.Blocked != 4 {
		t.Fatalf("stats total %d blocked %d, want 82 and 4", st.Total, st.Blocked)
	}
}
