package limits_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
)

// checker reuses one query of one item, as the HTTP edge does per pooled request.
type checker struct {
	q    engine.Query
	item [1]engine.Item
	res  [1]engine.ItemResult
}

func newChecker(ns string, alg engine.Algorithm, limit, window *int64) *checker {
	c := &checker{}
	c.item[0] = engine.Item{Cost: 1, Source: engine.FromRule, Inline: engine.Inline{Algorithm: alg, Limit: limit, WindowMS: window}}
	c.q = engine.Query{Namespace: ns, Items: c.item[:], StrictCost: true}
	return c
}

func (c *checker) check(ctx context.Context, eng *wiring.Engine, a *engine.Account, key string) error {
	c.item[0].Key = key
	_, err := eng.Limits.Decide(ctx, a, &c.q, c.res[:])
	return err
}

// BenchmarkEngineCheck is the engine's decision rate on the memory store: parallel checks
// over 100,000 keys with inline values (no rule lookup), usage counting included.
//
//	go test -run='^$' -bench=EngineCheck -benchmem -cpu 2 ./engine/
func BenchmarkEngineCheck(b *testing.B) {
	for _, alg := range []string{"fixed_window", "sliding_window", "token_bucket"} {
		b.Run(alg, func(b *testing.B) {
			s := memstore.New(memstore.Options{})
			defer s.Close()
			dir, _ := engine.NewDirectory([]engine.AccountSpec{{ID: "bench", Plan: engine.BuiltinPlans()["scale"]}})
			eng := wiring.New(engine.RolesOf(s), dir, wiring.Options{})
			acct, _ := dir.Account("bench")
			const nKeys = 100_000
			keys := make([]string, nKeys)
			for i := range keys {
				keys[i] = "user-" + strconv.Itoa(i)
			}
			limit, window := int64(1_000_000_000), int64(60_000)
			ctx := context.Background()
			first := newChecker("bench", engine.AlgorithmOf(alg), &limit, &window)
			for _, k := range keys { // create every counter first: steady state is measured
				if err := first.check(ctx, eng, acct, k); err != nil {
					b.Fatal(err)
				}
			}
			var worker atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(worker.Add(1)) * 7919
				c := newChecker("bench", engine.AlgorithmOf(alg), &limit, &window)
				for pb.Next() {
					i++
					if err := c.check(ctx, eng, acct, keys[i%nKeys]); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// TestCheckAllocations: a check on an existing counter allocates nothing.
func TestCheckAllocations(t *testing.T) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	dir, _ := engine.NewDirectory([]engine.AccountSpec{{ID: "a", Plan: engine.BuiltinPlans()["scale"]}})
	eng := wiring.New(engine.RolesOf(s), dir, wiring.Options{})
	acct, _ := dir.Account("a")
	limit, window := int64(1_000_000_000), int64(60_000)
	c := newChecker("n", engine.AlgorithmUnknown, &limit, &window)
	ctx := context.Background()
	if err := c.check(ctx, eng, acct, "k"); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() { _ = c.check(ctx, eng, acct, "k") }); n != 0 {
		t.Fatalf("Check allocates %.1f times per decision; want 0", n)
	}
}

// BenchmarkEngineCheckRule is a check that takes its limit from the namespace's rule (the
// memory store's rule read included): a rule without overrides, and one with 1,000
// overrides on a key that has none and on one that has one (spec §6.7: a map lookup).
//
//	go test -run='^$' -bench=EngineCheckRule -benchmem ./engine/
func BenchmarkEngineCheckRule(b *testing.B) {
	many := make([]rules.OverrideRequest, engine.MaxOverrides)
	for i := range many {
		k, l := "vip-"+strconv.Itoa(i), int64(2_000_000_000/2)
		many[i] = rules.OverrideRequest{Key: &k, Limit: &l}
	}
	for _, bc := range []struct {
		name      string
		overrides []rules.OverrideRequest
		key       string
	}{
		{"no_overrides", nil, "user-1"},
		{"1000_overrides/other_key", many, "user-1"},
		{"1000_overrides/overridden_key", many, "vip-500"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := memstore.New(memstore.Options{})
			defer s.Close()
			dir, _ := engine.NewDirectory([]engine.AccountSpec{{ID: "bench", Plan: engine.BuiltinPlans()["scale"]}})
			eng := wiring.New(engine.RolesOf(s), dir, wiring.Options{})
			acct, _ := dir.Account("bench")
			ctx := context.Background()
			alg, limit, window := "token_bucket", int64(1_000_000_000), int64(60_000)
			if _, _, err := eng.Rules.Put(ctx, acct, "bench", &rules.RuleRequest{Algorithm: &alg, Limit: &limit, WindowMS: &window, Overrides: bc.overrides}); err != nil {
				b.Fatal(err)
			}
			c := newChecker("bench", engine.AlgorithmUnknown, nil, nil)
			if err := c.check(ctx, eng, acct, bc.key); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := c.check(ctx, eng, acct, bc.key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
