package engine_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/memstore"
)

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
			eng := engine.New(s, dir, engine.Options{})
			acct, _ := dir.Account("bench")
			const nKeys = 100_000
			keys := make([]string, nKeys)
			for i := range keys {
				keys[i] = "user-" + strconv.Itoa(i)
			}
			limit, window, algName := int64(1_000_000_000), int64(60_000), alg
			ctx := context.Background()
			for _, k := range keys { // create every counter first: steady state is measured
				eng.Check(ctx, acct, &engine.CheckRequest{Namespace: "bench", Key: k, Algorithm: &algName, Limit: &limit, WindowMS: &window})
			}
			var worker atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(worker.Add(1)) * 7919
				req := engine.CheckRequest{Namespace: "bench", Algorithm: &algName, Limit: &limit, WindowMS: &window}
				for pb.Next() {
					i++
					req.Key = keys[i%nKeys]
					if _, err := eng.Check(ctx, acct, &req); err != nil {
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
	eng := engine.New(s, dir, engine.Options{})
	acct, _ := dir.Account("a")
	limit, window := int64(1_000_000_000), int64(60_000)
	req := engine.CheckRequest{Namespace: "n", Key: "k", Limit: &limit, WindowMS: &window}
	ctx := context.Background()
	eng.Check(ctx, acct, &req)
	if n := testing.AllocsPerRun(1000, func() { eng.Check(ctx, acct, &req) }); n != 0 {
		t.Fatalf("Check allocates %.1f times per decision; want 0", n)
	}
}
