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
)

// BenchmarkSpend is the measurement of docs/redis.md ("Connections"):
//
//	go test -run='^$' -bench=BenchmarkSpend -benchtime=3s ./engine/redisstore/
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
