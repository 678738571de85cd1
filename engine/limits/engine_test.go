package limits_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leashd/leash/testkit"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/leases"
	"github.com/leashd/leash/engine/limits"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/testkit/enginekit"
)

func TestCheckResolution(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
	if _, _, err := f.Eng.Rules.Put(ctx, acme, "api", &rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(2)), WindowMS: testkit.Ptr(int64(1000))}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		req       testkit.Check
		wantLimit int64
		wantCode  engine.Code
	}{
		{"rule supplies everything", testkit.Check{Namespace: "api", Key: "a"}, 2, ""},
		{"inline limit wins, rule window", testkit.Check{Namespace: "api", Key: "b", Limit: testkit.Ptr(int64(7))}, 7, ""},
		{"inline everything without rule", testkit.Check{Namespace: "none", Key: "a", Limit: testkit.Ptr(int64(4)), WindowMS: testkit.Ptr(int64(10))}, 4, ""},
		{"no rule, no window", testkit.Check{Namespace: "none", Key: "a", Limit: testkit.Ptr(int64(4))}, 0, engine.CodeMissingLimit},
		{"no rule, no limit", testkit.Check{Namespace: "none", Key: "a", WindowMS: testkit.Ptr(int64(4))}, 0, engine.CodeMissingLimit},
		{"unknown algorithm", testkit.Check{Namespace: "api", Key: "a", Algorithm: testkit.Ptr("leaky")}, 0, engine.CodeUnknownAlgorithm},
		{"concurrent_limit on a check", testkit.Check{Namespace: "api", Key: "a", Algorithm: testkit.Ptr("concurrent_limit")}, 0, engine.CodeInvalidRequest},
		{"cost above limit", testkit.Check{Namespace: "api", Key: "a", Cost: testkit.Ptr(int64(3))}, 0, engine.CodeInvalidRequest},
		{"negative cost", testkit.Check{Namespace: "api", Key: "a", Cost: testkit.Ptr(int64(-1))}, 0, engine.CodeInvalidRequest},
		{"limit zero inline", testkit.Check{Namespace: "api", Key: "a", Limit: testkit.Ptr(int64(0))}, 0, engine.CodeInvalidRequest},
		{"limit above max inline", testkit.Check{Namespace: "api", Key: "a", Limit: testkit.Ptr(engine.MaxLimit + 1)}, 0, engine.CodeInvalidRequest},
		{"window above max inline", testkit.Check{Namespace: "api", Key: "a", WindowMS: testkit.Ptr(engine.MaxWindowMS + 1)}, 0, engine.CodeInvalidRequest},
		{"bad namespace", testkit.Check{Namespace: "-api", Key: "a"}, 0, engine.CodeInvalidRequest},
		{"bad key", testkit.Check{Namespace: "api", Key: "a\x00"}, 0, engine.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
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
		})
	}
}

func TestDefaultAlgorithmIsSlidingWindow(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
	req := testkit.Check{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1000))}
	if _, err := req.Do(ctx, f.Eng, acme); err != nil {
		t.Fatal(err)
	}
	// The spend landed on the sliding_window counter, not on fixed_window's.
	if err := f.Eng.Limits.Reset(ctx, acme, &limits.ResetRequest{Namespace: "n", Key: "k", Algorithm: engine.FixedWindow, WindowMS: testkit.Ptr(int64(1000))}); engine.CodeOf(err) != engine.CodeKeyNotFound {
		t.Fatalf("fixed_window reset = %v, want key_not_found", err)
	}
	if err := f.Eng.Limits.Reset(ctx, acme, &limits.ResetRequest{Namespace: "n", Key: "k", Algorithm: engine.SlidingWindow, WindowMS: testkit.Ptr(int64(1000))}); err != nil {
		t.Fatalf("sliding_window reset = %v", err)
	}
}

func TestPlanGates(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	cheap := f.Accts["cheap"]
	_, err := (testkit.Check{Namespace: "n", Key: "k", Algorithm: testkit.Ptr("token_bucket"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))}).Do(ctx, f.Eng, cheap)
	enginekit.WantCode(t, err, engine.CodeAlgorithmNotOnPlan)
	_, _, err = f.Eng.Rules.Put(ctx, cheap, "n", &rules.RuleRequest{Algorithm: testkit.Ptr("concurrent_limit"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))})
	enginekit.WantCode(t, err, engine.CodeAlgorithmNotOnPlan)
	_, err = f.Eng.Leases.Acquire(ctx, cheap, &leases.AcquireRequest{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))})
	enginekit.WantCode(t, err, engine.CodeConcurrentNotOnPlan)
	if _, err := (testkit.Check{Namespace: "n", Key: "k", Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))}).Do(ctx, f.Eng, cheap); err != nil {
		t.Fatalf("fixed_window on free: %v", err)
	}
}

type downStore struct{ engine.Store }

var errDown = errors.New("dial tcp 10.0.0.1:6379: connection refused")

func (downStore) Spend(context.Context, engine.Spend) (engine.Decision, error) {
	return engine.Decision{}, errDown
}

func TestStoreFailureIsUnavailable(t *testing.T) {
	f := enginekit.New(t, func(s engine.Store) engine.Store { return downStore{s} })
	_, err := (testkit.Check{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))}).Do(context.Background(), f.Eng, f.Accts["acme"])
	enginekit.WantCode(t, err, engine.CodeUnavailable)
	var e *engine.Error
	if !errors.As(err, &e) || !errors.Is(err, errDown) {
		t.Fatalf("the cause must stay reachable for logs: %v", err)
	}
	if e.Message != "service temporarily unavailable" {
		t.Fatalf("message leaks detail: %q", e.Message)
	}
}
