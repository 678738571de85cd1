package limits_test

import (
	"context"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/audit"
	"github.com/leashd/leash/engine/limits"
	"github.com/leashd/leash/engine/usage"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
)

// portOnly hides every method of the store but the Port's: the Limiter decides with its
// port alone.
type portOnly struct{ limits.Port }

// usagePort is the usage capability's port of the same store.
type usagePort struct{ usage.Port }

// fixedDir serves one directory.
type fixedDir struct{ d *engine.Directory }

func (f fixedDir) Directory() *engine.Directory { return f.d }

type harness struct {
	lim   *limits.Limiter
	meter *usage.Meter
	log   *audit.Log
	store *memstore.Store
	acme  *engine.Account
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ms := memstore.New(memstore.Options{Clock: testkit.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))})
	t.Cleanup(func() { ms.Close() })
	dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: engine.BuiltinPlans()["pro"]}})
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := dir.Account("acme")
	h := &harness{store: ms, acme: acme, log: audit.New(ms, nil)}
	h.meter = usage.New(usagePort{ms}, fixedDir{dir}, usage.Options{})
	h.lim = limits.New(portOnly{ms}, h.meter, h.log, limits.Options{LocalCacheMaxEntries: 16})
	return h
}

func (h *harness) check(t *testing.T, key string, limit int64) engine.ItemResult {
	t.Helper()
	q := engine.Query{Edge: engine.EdgeLimit, Namespace: "api", StrictCost: true,
		Items: []engine.Item{engine.CheckItem(key, engine.Inline{Limit: &limit, WindowMS: testkit.Ptr(int64(60_000))}, nil)}}
	out := make([]engine.ItemResult, 1)
	if _, err := h.lim.Decide(context.Background(), h.acme, &q, out); err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// TestLimiterDecidesCountsAndResets: over its port alone the Limiter spends, denies past
// the limit, counts every decision in the Meter, and a reset (audited) frees the counter.
func TestLimiterDecidesCountsAndResets(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for i, want := range []bool{true, true, false} {
		if r := h.check(t, "u1", 2); r.Allowed != want || !r.Limited {
			t.Fatalf("check %d: %+v, want allowed=%v", i, r, want)
		}
	}
	if err := h.meter.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := h.meter.Stats(ctx, h.acme, "api")
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 3 || st.Blocked != 1 {
		t.Fatalf("stats: total %d blocked %d, want 3 and 1", st.Total, st.Blocked)
	}
	reset := &limits.ResetRequest{Namespace: "api", Key: "u1", Algorithm: engine.SlidingWindow, WindowMS: testkit.Ptr(int64(60_000))}
	if err := h.lim.Reset(ctx, h.acme, reset); err != nil {
		t.Fatal(err)
	}
	if r := h.check(t, "u1", 2); !r.Allowed {
		t.Fatalf("after reset: %+v, want allowed", r)
	}
	reset.Key = "never-used"
	if err := h.lim.Reset(ctx, h.acme, reset); engine.CodeOf(err) != engine.CodeKeyNotFound {
		t.Fatalf("reset of an unused key: %v, want key_not_found", err)
	}
	page, err := h.log.List(ctx, "acme", "", 10, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 1 || page.Entries[0].Action != engine.AuditCounterReset {
		t.Fatalf("audit: %+v, want one counter.reset", page.Entries)
	}
}

// TestLimiterRuleFromPort: an item without a limit takes the namespace's rule the port
// reads; with no rule it is missing_limit.
func TestLimiterRuleFromPort(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	q := engine.Query{Edge: engine.EdgeLimit, Namespace: "api", Items: []engine.Item{engine.CheckItem("k", engine.Inline{}, nil)}}
	out := make([]engine.ItemResult, 1)
	if _, err := h.lim.Decide(ctx, h.acme, &q, out); engine.CodeOf(err) != engine.CodeMissingLimit {
		t.Fatalf("no rule: %v, want missing_limit", err)
	}
	if _, err := h.store.PutRule(ctx, "acme", "api", engine.Rule{Algorithm: engine.FixedWindow, Limit: 1, WindowMS: 1000}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		if _, err := h.lim.Decide(ctx, h.acme, &q, out); err != nil {
			t.Fatal(err)
		}
		if out[0].Allowed != want || out[0].Limit.Algorithm != engine.FixedWindow || out[0].Limit.Limit != 1 {
			t.Fatalf("check %d: %+v, want allowed=%v under the rule", i, out[0], want)
		}
	}
	if h.lim.LocalCacheHits() != 0 {
		t.Fatalf("cache hits %d before any repeated denial", h.lim.LocalCacheHits())
	}
}
