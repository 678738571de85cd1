package leases_test

import (
	"context"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/leases"
	"github.com/leashd/leash/engine/usage"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
)

// portOnly hides every method of the store but the Port's.
type portOnly struct{ leases.Port }

type usagePort struct{ usage.Port }

type fixedDir struct{ d *engine.Directory }

func (f fixedDir) Directory() *engine.Directory { return f.d }

// TestLeasesOverPort: over its port alone a lease is taken up to the limit, listed, freed
// and not renewed once freed; the rule's limit applies when none is sent; each acquisition
// is counted, and plans without leases are refused.
func TestLeasesOverPort(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	ms := memstore.New(memstore.Options{Clock: clock})
	t.Cleanup(func() { ms.Close() })
	p := engine.BuiltinPlans()
	dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: p["pro"]}, {ID: "cheap", Plan: p["free"]}})
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := dir.Account("acme")
	cheap, _ := dir.Account("cheap")
	meter := usage.New(usagePort{ms}, fixedDir{dir}, usage.Options{})
	l := leases.New(portOnly{ms}, meter)

	req := &leases.AcquireRequest{Namespace: "jobs", Key: "gpu", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(30_000))}
	first, err := l.Acquire(ctx, acme, req)
	if err != nil || !first.Allowed || first.LeaseID == "" {
		t.Fatalf("first acquire: %+v, %v", first, err)
	}
	if second, err := l.Acquire(ctx, acme, req); err != nil || second.Allowed {
		t.Fatalf("second acquire over limit 1: %+v, %v", second, err)
	}
	list, err := l.List(ctx, acme, "jobs", "gpu")
	if err != nil || list.Active != 1 || len(list.Leases) != 1 || list.Leases[0].LeaseID != first.LeaseID {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if rel, err := l.Release(ctx, acme, first.LeaseID); err != nil || !rel.Released {
		t.Fatalf("release: %+v, %v", rel, err)
	}
	if ren, err := l.Renew(ctx, acme, first.LeaseID, nil); err != nil || ren.Renewed {
		t.Fatalf("renew of a released lease: %+v, %v", ren, err)
	}
	if _, err := l.Release(ctx, acme, "not-a-lease"); engine.CodeOf(err) != engine.CodeInvalidLeaseID {
		t.Fatalf("release of a bad id: %v", err)
	}

	noLimit := &leases.AcquireRequest{Namespace: "jobs", Key: "cpu"}
	if _, err := l.Acquire(ctx, acme, noLimit); engine.CodeOf(err) != engine.CodeMissingLimit {
		t.Fatalf("no limit and no rule: %v, want missing_limit", err)
	}
	if _, err := ms.PutRule(ctx, "acme", "jobs", engine.Rule{Algorithm: engine.ConcurrentLimit, Limit: 2, WindowMS: 10_000}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		d, err := l.Acquire(ctx, acme, noLimit)
		if err != nil || d.Allowed != want || d.Limit != 2 {
			t.Fatalf("acquire %d under the rule: %+v, %v", i, d, err)
		}
	}
	if _, err := l.Acquire(ctx, cheap, req); engine.CodeOf(err) != engine.CodeConcurrentNotOnPlan {
		t.Fatalf("free plan: %v, want concurrent_not_on_plan", err)
	}

	if err := meter.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := meter.Stats(ctx, acme, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 5 || st.Blocked != 2 {
		t.Fatalf("usage: total %d blocked %d, want 5 acquisitions, 2 refused", st.Total, st.Blocked)
	}
}
