package engine_test

import (
	"context"
	"testing"

	"github.com/leashd/leash/engine"
)

func TestCheckAll(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	acme := f.accts["acme"]
	limits := []engine.LimitSpec{
		{Algorithm: engine.FixedWindow, Limit: 2, WindowMS: 1000},
		{Algorithm: engine.SlidingWindow, Limit: 5, WindowMS: 60_000},
	}
	check := func(cost int64, shadow bool) []engine.Decision {
		t.Helper()
		out := make([]engine.Decision, len(limits))
		if err := f.eng.CheckAll(ctx, acme, &engine.MultiCheck{Namespace: "n", Key: "k", Limits: limits, Cost: cost, Shadow: shadow}, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if d := check(2, false); !d[0].Allowed || !d[1].Allowed || d[0].Remaining != 0 || d[1].Remaining != 3 {
		t.Fatalf("first = %+v", d)
	}
	if d := check(1, false); d[0].Allowed || !d[1].Allowed || d[1].Remaining != 2 {
		t.Fatalf("second (per-second limit denies; the minute counter reports without spending) = %+v", d)
	}
	if d := check(1, true); d[0].Allowed {
		t.Fatalf("shadow = %+v", d)
	}
	// A cost above a limit is denied for that limit, and nothing is spent.
	if d := check(3, false); d[0].Allowed || !d[1].Allowed || d[1].Remaining != 3 {
		t.Fatalf("cost 3 = %+v", d)
	}
	f.eng.CountCheck(acme, "n")
	if err := f.eng.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := f.eng.Stats(ctx, acme, "n")
	if err != nil {
		t.Fatal(err)
	}
	// 5 checks; blocked: the second and the cost-3 one (the shadow denial is not blocked).
	if st.Total != 5 || st.Blocked != 2 {
		t.Fatalf("stats total %d blocked %d, want 5 and 2", st.Total, st.Blocked)
	}

	bad := []struct {
		name   string
		a      *engine.Account
		limits []engine.LimitSpec
		code   engine.Code
	}{
		{"no limits", acme, nil, engine.CodeInvalidRequest},
		{"lease algorithm", acme, []engine.LimitSpec{{Algorithm: engine.ConcurrentLimit, Limit: 1, WindowMS: 1}}, engine.CodeInvalidRequest},
		{"zero limit", acme, []engine.LimitSpec{{Algorithm: engine.FixedWindow, Limit: 0, WindowMS: 1}}, engine.CodeInvalidRequest},
		{"not on plan", f.accts["cheap"], []engine.LimitSpec{{Algorithm: engine.TokenBucket, Limit: 1, WindowMS: 1000}}, engine.CodeAlgorithmNotOnPlan},
	}
	for _, tc := range bad {
		out := make([]engine.Decision, 1)
		err := f.eng.CheckAll(ctx, tc.a, &engine.MultiCheck{Namespace: "n", Key: "k", Limits: tc.limits, Cost: 1}, out)
		if engine.CodeOf(err) != tc.code {
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.code)
		}
	}
}
