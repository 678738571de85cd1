package redisstore

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/redisstore/lua"
)

// BenchmarkSpend is the measurement of docs/redis.md ("Connections"):
//
//	go test -run='^$' -bench=BenchmarkSpend -benchtime=3s ./store/redisstore/
//
// It runs sliding_window spends over 1,000 keys from 2, 8, 16 and 128 concurrent
// goroutines (RunParallel with parallelism 1, 4, 8, 64 on 2 CPUs) against the harness's
// redis-server (or LEASH_TEST_REDIS_URL), production mode (Redis TIME): decisions on the
// node's pipe (package respipe).
func BenchmarkSpend(b *testing.B) {
	url := singleURL(b)
	for _, par := range []int{1, 4, 8, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", par*runtime.GOMAXPROCS(0)), func(b *testing.B) {
			s := openStore(b, Options{URL: url})
			ctx := context.Background()
			var next atomic.Int64
			var errs atomic.Int64
			b.SetParallelism(par)
			redis0, self0 := redisCPU(), selfCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := next.Add(1)
				for pb.Next() {
					i++
					sp := engine.Spend{
						Counter: engine.Counter{Account: "acme", Namespace: "api", Key: fmt.Sprintf("user:%d", i%1000), Algorithm: engine.SlidingWindow, WindowMS: 60_000},
						Limit:   1_000_000_000,
						Cost:    1,
					}
					if _, err := s.Spend(ctx, sp); err != nil {
						errs.Add(1)
					}
				}
			})
			b.StopTimer()
			if n := errs.Load(); n > 0 {
				b.Fatalf("%d spends failed", n)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "spends/s")
			b.ReportMetric(float64((selfCPU()-self0).Microseconds())/float64(b.N), "client-cpu-µs/op")
			if redis0 >= 0 {
				b.ReportMetric(float64((redisCPU()-redis0).Microseconds())/float64(b.N), "redis-cpu-µs/op")
			}
		})
	}
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is the harness redis-server's user+system CPU time, or -1 when the server is
// not the harness's (LEASH_TEST_REDIS_URL).
func redisCPU() time.Duration {
	if shared.single == nil || os.Getenv("LEASH_TEST_REDIS_URL") != "" {
		return -1
	}
	d, err := shared.single.CPU()
	if err != nil {
		return -1
	}
	return d
}

// BenchmarkMergedSpendScript is the table of docs/performance.md ("Merged Spend calls"):
//
//	go test -run='^$' -bench=BenchmarkMergedSpendScript -benchtime=200000x ./store/redisstore/
//
// It sends spend.lua as the pipe does when that many Spend requests wait together
// (keys=1: one per call), 50 decisions per round trip (a go-redis pipeline), over 10,000
// fixed_window counters, and reports the harness redis-server's CPU per decision.
func BenchmarkMergedSpendScript(b *testing.B) {
	url := singleURL(b)
	for _, width := range []int{1, 2, 4, 8, 16, 50} {
		b.Run(fmt.Sprintf("keys=%d", width), func(b *testing.B) {
			benchSpendScript(b, openStore(b, Options{URL: url}), engine.FixedWindow, width, 50)
		})
	}
}

// BenchmarkSpendScriptByAlgorithm is spend.lua alone, 50 requests to a call over 10,000
// counters, per algorithm (docs/performance.md):
//
//	go test -run='^$' -bench=BenchmarkSpendScriptByAlgorithm -benchtime=200000x ./store/redisstore/
func BenchmarkSpendScriptByAlgorithm(b *testing.B) {
	url := singleURL(b)
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
		b.Run(alg.String(), func(b *testing.B) {
			benchSpendScript(b, openStore(b, Options{URL: url, Prefix: uniquePrefix()}), alg, 50, 1000)
		})
	}
}

// benchSpendScript sends spend.lua with width requests to a call, perTrip requests to a
// round trip (a go-redis pipeline), over 10,000 counters of alg (a limit of 10^9 a minute),
// and reports the harness redis-server's CPU per decision.
func benchSpendScript(b *testing.B, s *Store, alg engine.Algorithm, width, perTrip int) {
	ctx := context.Background()
	if err := s.scripts.Spend.Load(ctx, s.client).Err(); err != nil {
		b.Fatal(err)
	}
	redis0 := redisCPU()
	b.ResetTimer()
	k := 0
	for n := 0; n < b.N; {
		p := s.client.Pipeline()
		for j := 0; j+width <= perTrip && n < b.N; j += width {
			keys := make([]string, width)
			args := []any{"t", 0}
			for q := range keys {
				k++
				keys[q] = s.keys.Counter(engine.Counter{Account: "acme", Namespace: "api", Key: fmt.Sprintf("user:%d", k%10_000), Algorithm: alg, WindowMS: 60_000})
				args = append(args, lua.AlgCode(alg), 1_000_000_000, 60_000, 1)
			}
			s.scripts.Spend.EvalSha(ctx, p, keys, args...)
			n += width
		}
		if _, err := p.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if redis0 >= 0 {
		b.ReportMetric(float64((redisCPU()-redis0).Microseconds())/float64(b.N), "redis-cpu-µs/decision")
	}
}

// BenchmarkDecisionRoad is the figure of docs/redis.md ("Why the pipe stays") that decides which
// road decisions take to Redis:
//
//	go test -run='^$' -bench=BenchmarkDecisionRoad -benchtime=200000x ./store/redisstore/
//
// Both sub-benchmarks make the same sliding_window decisions over 1,000 counters from about
// 64 goroutines (RunParallel) against the harness's redis-server. respipe: Store.Spend,
// as served (the pipe, Spend requests waiting together merged into one spend.lua call).
// goredis: the same spend.lua EVALSHA sent through the Store's go-redis client, one call
// per decision. Each reports decisions/s, and the redis-server's and this process's CPU
// (utime + stime) per decision.
func BenchmarkDecisionRoad(b *testing.B) {
	url := singleURL(b)
	par := max(1, 64/runtime.GOMAXPROCS(0))
	spends := make([]engine.Spend, 1000)
	for i := range spends {
		spends[i] = engine.Spend{
			Counter: engine.Counter{Account: "acme", Namespace: "api", Key: fmt.Sprintf("user:%d", i), Algorithm: engine.SlidingWindow, WindowMS: 60_000},
			Limit:   1_000_000_000,
			Cost:    1,
		}
	}
	road := func(b *testing.B, decide func(s *Store, sp *engine.Spend) error) {
		s := openStore(b, Options{URL: url})
		var next, errs atomic.Int64
		b.SetParallelism(par)
		redis0, self0 := redisCPU(), selfCPU()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := next.Add(1) * 97
			for pb.Next() {
				i++
				if err := decide(s, &spends[i%int64(len(spends))]); err != nil {
					errs.Add(1)
				}
			}
		})
		b.StopTimer()
		if n := errs.Load(); n > 0 {
			b.Fatalf("%d decisions failed", n)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		b.ReportMetric(float64((selfCPU()-self0).Microseconds())/float64(b.N), "client-cpu-µs/decision")
		if redis0 >= 0 {
			b.ReportMetric(float64((redisCPU()-redis0).Microseconds())/float64(b.N), "redis-cpu-µs/decision")
		}
		if st := s.pipes.Stats(); st.Commands > 0 {
			b.ReportMetric(float64(st.Calls)/float64(st.Commands), "decisions/command")
		}
	}
	ctx := context.Background()
	b.Run("respipe", func(b *testing.B) {
		road(b, func(s *Store, sp *engine.Spend) error {
			_, err := s.Spend(ctx, *sp)
			return err
		})
	})
	b.Run("goredis", func(b *testing.B) {
		road(b, func(s *Store, sp *engine.Spend) error {
			keys := []string{s.keys.Counter(sp.Counter)}
			r, err := s.client.EvalSha(ctx, s.scripts.Spend.Hash(), keys,
				"t", s.slack, lua.AlgCode(sp.Counter.Algorithm), sp.Limit, sp.Counter.WindowMS, sp.Cost).Int64Slice()
			if err == nil && len(r) != 4 {
				err = fmt.Errorf("reply %v", r)
			}
			return err
		})
	})
}
