package usage_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/leases"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
)

// capObserver records the hard-cap refusals the engine reports.
type capObserver struct {
	mu      sync.Mutex
	refused []string // account/edge
}

func (*capObserver) Decided(*engine.Account, *engine.Query, *engine.Item, *engine.ItemResult) {}

func (o *capObserver) HardCapRefused(a *engine.Account, edge engine.Edge) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused = append(o.refused, a.ID+"/"+string(edge))
}

// TestHardCapObserved: the usage capability, where the hard cap lives, reports each refusal with
// the edge that asked, whichever edge it is (Decide for limit, envoy and rlqs; Acquire
// for leases); a call under the cap reports none.
func TestHardCapObserved(t *testing.T) {
	ctx := context.Background()
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { ms.Close() })
	capped, open := engine.BuiltinPlans()["pro"], engine.BuiltinPlans()["pro"]
	capped.HardCap = testkit.Ptr(int64(0)) // refuses every call
	dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "capped", Plan: capped}, {ID: "open", Plan: open}})
	if err != nil {
		t.Fatal(err)
	}
	obs := &capObserver{}
	eng := wiring.New(engine.RolesOf(ms), dir, wiring.Options{Observer: obs})
	item := engine.CheckItem("k", engine.Inline{Algorithm: engine.FixedWindow, Limit: testkit.Ptr(int64(100)), WindowMS: testkit.Ptr(int64(1000))}, nil)
	for _, id := range []string{"capped", "open"} {
		a, _ := dir.Account(id)
		for _, edge := range []engine.Edge{engine.EdgeLimit, engine.EdgeEnvoy, engine.EdgeRLQS} {
			var r [1]engine.ItemResult
			_, err := eng.Limits.Decide(ctx, a, &engine.Query{Edge: edge, Namespace: "n", Items: []engine.Item{item}}, r[:])
			if (engine.CodeOf(err) == engine.CodeHardCapExceeded) != (id == "capped") {
				t.Fatalf("%s at %s: %v", id, edge, err)
			}
		}
		_, err := eng.Leases.Acquire(ctx, a, &leases.AcquireRequest{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1000))})
		if (engine.CodeOf(err) == engine.CodeHardCapExceeded) != (id == "capped") {
			t.Fatalf("%s acquiring: %v", id, err)
		}
	}
	if want := []string{"capped/limit", "capped/envoy", "capped/rlqs", "capped/leases"}; !slices.Equal(obs.refused, want) {
		t.Fatalf("refusals observed %q, want %q", obs.refused, want)
	}
}
