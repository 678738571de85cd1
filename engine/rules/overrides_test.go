package rules_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/leases"
	"github.com/leashd/leash/engine/limits"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/enginekit"
)

func override(key string, limit int64, window *int64) rules.OverrideRequest {
	return rules.OverrideRequest{Key: &key, Limit: &limit, WindowMS: window}
}

// TestOverrideResolution: a check on an overridden key takes the override's limit and
// window, an inline value still wins field by field, other keys keep the rule's, and a
// reset resolves to the override's counter (spec §4.2, §6.7).
func TestOverrideResolution(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
	_, _, err := f.Eng.Rules.Put(ctx, acme, "api", &rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(2)), WindowMS: testkit.Ptr(int64(1000)),
		Overrides: []rules.OverrideRequest{override("gold", 5, testkit.Ptr(int64(60_000))), override("silver", 3, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                  string
		req                   testkit.Check
		wantLimit, wantWindow int64 // the window shows as reset_ms: fixed windows align to it
		wantCode              engine.Code
	}{
		{"override limit and window", testkit.Check{Key: "gold"}, 5, 60_000, ""},
		{"override limit, rule window", testkit.Check{Key: "silver"}, 3, 1000, ""},
		{"no override", testkit.Check{Key: "bronze"}, 2, 1000, ""},
		{"keys are exact", testkit.Check{Key: "Gold"}, 2, 1000, ""},
		{"inline limit wins", testkit.Check{Key: "gold", Limit: testkit.Ptr(int64(9))}, 9, 60_000, ""},
		{"inline window wins", testkit.Check{Key: "gold", WindowMS: testkit.Ptr(int64(2000))}, 5, 2000, ""},
		{"inline both", testkit.Check{Key: "gold", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(4000))}, 1, 4000, ""},
		{"cost up to the override's limit", testkit.Check{Key: "silver", Cost: testkit.Ptr(int64(3))}, 3, 1000, ""},
		{"cost above the override's limit", testkit.Check{Key: "silver", Cost: testkit.Ptr(int64(4))}, 0, 0, engine.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.Clock.Advance(0)
			tc.req.Namespace = "api"
			d, err := tc.req.Do(ctx, f.Eng, acme)
			if tc.wantCode != "" {
				enginekit.WantCode(t, err, tc.wantCode)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed || d.Limit != tc.wantLimit {
				t.Fatalf("decision = %+v, want allowed with limit %d", d, tc.wantLimit)
			}
			if want := tc.wantWindow - enginekit.Start.UnixMilli()%tc.wantWindow; d.ResetMS != want {
				t.Fatalf("reset_ms = %d, want %d (window %d)", d.ResetMS, want, tc.wantWindow)
			}
			// Reset the counter the check spent: the same resolution finds it.
			rr := &limits.ResetRequest{Namespace: "api", Key: tc.req.Key, WindowMS: tc.req.WindowMS}
			if err := f.Eng.Limits.Reset(ctx, acme, rr); err != nil {
				t.Fatalf("reset: %v", err)
			}
		})
	}
	// The override's counter is its own: five units of gold fit, a sixth does not.
	for i := range 6 {
		d, err := (testkit.Check{Namespace: "api", Key: "gold"}).Do(ctx, f.Eng, acme)
		if err != nil || d.Allowed != (i < 5) {
			t.Fatalf("gold check %d = %+v, %v", i+1, d, err)
		}
	}

	// The Envoy fallback (RuleIfAny) resolves the same way.
	out := make([]engine.ItemResult, 2)
	q := &engine.Query{Edge: engine.EdgeEnvoy, Namespace: "api", Items: []engine.Item{
		{Key: "silver", Cost: 1, Source: engine.RuleIfAny}, {Key: "tin", Cost: 1, Source: engine.RuleIfAny}}}
	if _, err := f.Eng.Limits.Decide(ctx, acme, q, out); err != nil {
		t.Fatal(err)
	}
	if got, want := out[0].Limit, (engine.Limit{Algorithm: engine.FixedWindow, Limit: 3, WindowMS: 1000}); got != want || !out[0].Allowed {
		t.Fatalf("fallback on an overridden key = %+v, want %+v", out[0], want)
	}
	if got, want := out[1].Limit, (engine.Limit{Algorithm: engine.FixedWindow, Limit: 2, WindowMS: 1000}); got != want {
		t.Fatalf("fallback on another key = %+v, want %+v", out[1], want)
	}

	// Replacing the rule without overrides drops them.
	if _, _, err := f.Eng.Rules.Put(ctx, acme, "api", &rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(2)), WindowMS: testkit.Ptr(int64(1000))}); err != nil {
		t.Fatal(err)
	}
	if d, err := (testkit.Check{Namespace: "api", Key: "silver", Cost: testkit.Ptr(int64(0))}).Do(ctx, f.Eng, acme); err != nil || d.Limit != 2 {
		t.Fatalf("after the replace: %+v, %v; want the rule's limit 2", d, err)
	}
}

// TestLeaseOverrides: an acquisition on an overridden key takes the concurrent rule's
// override; inline values still win (spec §5.1, §6.7).
func TestLeaseOverrides(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
	_, _, err := f.Eng.Rules.Put(ctx, acme, "jobs", &rules.RuleRequest{Algorithm: testkit.Ptr("concurrent_limit"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(30_000)),
		Overrides: []rules.OverrideRequest{override("batch", 3, testkit.Ptr(int64(5000))), override("etl", 2, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		req            leases.AcquireRequest
		limit, resetMS int64
	}{
		{"override", leases.AcquireRequest{Key: "batch"}, 3, 5000},
		{"override, rule window", leases.AcquireRequest{Key: "etl"}, 2, 30_000},
		{"no override", leases.AcquireRequest{Key: "web"}, 1, 30_000},
		{"inline limit wins", leases.AcquireRequest{Key: "batch", Limit: testkit.Ptr(int64(7))}, 7, 5000},
		{"inline window wins", leases.AcquireRequest{Key: "batch", WindowMS: testkit.Ptr(int64(100))}, 3, 100},
	}
	for _, tc := range tests {
		tc.req.Namespace = "jobs"
		d, err := f.Eng.Leases.Acquire(ctx, acme, &tc.req)
		if err != nil || !d.Allowed || d.Limit != tc.limit || d.ResetMS != tc.resetMS {
			t.Errorf("%s: %+v, %v; want allowed, limit %d, reset_ms %d", tc.name, d, err, tc.limit, tc.resetMS)
		}
	}
}

// TestOverrideValidation: the overrides' checks sit in the rule write's order (spec §6.3,
// §6.7): field errors are invalid_request, ranges, the count and duplicate keys are
// invalid_rule, before unknown_algorithm and the plan gate; each message names the field.
func TestOverrideValidation(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	rule := func(alg string, limit int64, o ...rules.OverrideRequest) rules.RuleRequest {
		return rules.RuleRequest{Algorithm: &alg, Limit: &limit, WindowMS: testkit.Ptr(int64(1000)), Overrides: o}
	}
	many := make([]rules.OverrideRequest, engine.MaxOverrides+1)
	for i := range many {
		many[i] = override(fmt.Sprintf("k%d", i), 1, nil)
	}
	tests := []struct {
		name    string
		acct    string
		req     rules.RuleRequest
		code    engine.Code
		message string // a part of the message
	}{
		{"missing key", "acme", rule("fixed_window", 1, rules.OverrideRequest{Limit: testkit.Ptr(int64(1))}), engine.CodeInvalidRequest, "overrides[0].key is required"},
		{"bad key", "acme", rule("fixed_window", 1, override("ok", 1, nil), override("a\x7f", 1, nil)), engine.CodeInvalidRequest, "overrides[1].key"},
		{"empty key", "acme", rule("fixed_window", 1, override("", 1, nil)), engine.CodeInvalidRequest, "overrides[0].key"},
		{"long key", "acme", rule("fixed_window", 1, override(strings.Repeat("k", 513), 1, nil)), engine.CodeInvalidRequest, "overrides[0].key"},
		{"missing limit", "acme", rule("fixed_window", 1, rules.OverrideRequest{Key: testkit.Ptr("k")}), engine.CodeInvalidRequest, "overrides[0].limit is required"},
		{"negative limit", "acme", rule("fixed_window", 1, override("k", -1, nil)), engine.CodeInvalidRequest, "overrides[0].limit"},
		{"negative window", "acme", rule("fixed_window", 1, override("k", 1, testkit.Ptr(int64(-1)))), engine.CodeInvalidRequest, "overrides[0].window_ms"},
		{"field error before the rule's range", "acme", rule("fixed_window", 0, rules.OverrideRequest{Key: testkit.Ptr("k")}), engine.CodeInvalidRequest, "overrides[0].limit"},
		{"rule range before the overrides'", "acme", rule("fixed_window", 0, override("k", 0, nil)), engine.CodeInvalidRule, "limit must be"},
		{"limit 0", "acme", rule("fixed_window", 1, override("k", 0, nil)), engine.CodeInvalidRule, "overrides[0].limit"},
		{"limit above max", "acme", rule("fixed_window", 1, override("k", engine.MaxLimit+1, nil)), engine.CodeInvalidRule, "overrides[0].limit"},
		{"window 0", "acme", rule("fixed_window", 1, override("k", 1, testkit.Ptr(int64(0)))), engine.CodeInvalidRule, "overrides[0].window_ms"},
		{"window above max", "acme", rule("fixed_window", 1, override("j", 1, nil), override("k", 1, testkit.Ptr(engine.MaxWindowMS+1))), engine.CodeInvalidRule, "overrides[1].window_ms"},
		{"duplicate key", "acme", rule("fixed_window", 1, override("a", 1, nil), override("b", 1, nil), override("a", 2, nil)), engine.CodeInvalidRule, "overrides[2].key repeats the key of overrides[0]"},
		{"too many", "acme", rule("fixed_window", 1, many...), engine.CodeInvalidRule, "at most 1000"},
		{"range before unknown algorithm", "acme", rule("leaky", 1, override("k", 0, nil)), engine.CodeInvalidRule, "overrides[0].limit"},
		{"unknown algorithm", "acme", rule("leaky", 1, override("k", 1, nil)), engine.CodeUnknownAlgorithm, "algorithm"},
		{"range before the plan gate", "cheap", rule("concurrent_limit", 1, override("k", 0, nil)), engine.CodeInvalidRule, "overrides[0].limit"},
		{"plan gate", "cheap", rule("token_bucket", 1, override("k", 1, nil)), engine.CodeAlgorithmNotOnPlan, "token_bucket"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := f.Eng.Rules.Put(ctx, f.Accts[tc.acct], "n", &tc.req)
			enginekit.WantCode(t, err, tc.code)
			if e := err.(*engine.Error); !strings.Contains(e.Message, tc.message) {
				t.Fatalf("message %q does not contain %q", e.Message, tc.message)
			}
		})
	}
	if rs, err := f.Eng.Rules.List(ctx, f.Accts["acme"], "n"); err != nil || len(rs) != 0 {
		t.Fatalf("a refused write stored something: %+v, %v", rs, err)
	}

	// The most a rule takes, and the reply carries them in order.
	r, created, err := f.Eng.Rules.Put(ctx, f.Accts["acme"], "n", &rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1000)),
		Overrides: many[:engine.MaxOverrides]})
	if err != nil || !created || r.Overrides.Len() != engine.MaxOverrides || r.Overrides.List()[7].Key != "k7" {
		t.Fatalf("PutRule with %d overrides = %d overrides, %v, %v", engine.MaxOverrides, r.Overrides.Len(), created, err)
	}
}

// TestOverridesConcurrentWritesAndChecks: rule writes that change the overrides race with
// checks and leases that read them (run with -race); every check sees one whole rule.
func TestOverridesConcurrentWritesAndChecks(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
	done := make(chan struct{})
	errs := make(chan error, 3)
	go func() {
		defer func() { errs <- nil }()
		for i := range 200 {
			limit := int64(10 + i%2*10) // the rule's limit and gold's move together
			_, _, err := f.Eng.Rules.Put(ctx, acme, "api", &rules.RuleRequest{Algorithm: testkit.Ptr("sliding_window"), Limit: &limit, WindowMS: testkit.Ptr(int64(60_000)),
				Overrides: []rules.OverrideRequest{override("gold", 100*limit, nil), override("k"+fmt.Sprint(i), 1, nil)}})
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	for range 2 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				d, err := (testkit.Check{Namespace: "api", Key: "gold", Cost: testkit.Ptr(int64(0))}).Do(ctx, f.Eng, acme)
				if err != nil && engine.CodeOf(err) != engine.CodeMissingLimit {
					errs <- err
					return
				}
				if err == nil && d.Limit != 1000 && d.Limit != 2000 {
					errs <- fmt.Errorf("gold's limit %d is from no written rule", d.Limit)
					return
				}
			}
		}()
	}
	// The first to end (the writer, or a checker that failed) stops the checkers; every
	// goroutine has ended before the test reports, so none spins on after a failure.
	first := <-errs
	close(done)
	for range 2 {
		if err := <-errs; first == nil {
			first = err
		}
	}
	if first != nil {
		t.Fatal(first)
	}
}
