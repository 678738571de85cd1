package redisstore

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
)

// The pool-vs-pipeline measurement of docs/redis.md:
//
//	go test -run='^$' -bench=BenchmarkSpend -benchtime=3s ./engine/redisstore/
//
// Each benchmark runs sliding_window spends over 1,000 keys from 2, 8, 16 and 128
// concurrent goroutines (RunParallel with parallelism 1, 4, 8, 64 on 2 CPUs) against the harness's
// redis-server (or LEASH_TEST_REDIS_URL), production mode (Redis TIME).
func benchSpend(b *testing.B, mode pipelineMode) {
	url := singleURL(b)
	for _, par := range []int{1, 4, 8, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", par*runtime.GOMAXPROCS(0)), func(b *testing.B) {
			s := openStore(b, Options{URL: url, pipeline: mode})
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
	shared.single.mu.Lock()
	cmd := shared.single.cmd
	shared.single.mu.Unlock()
	if cmd == nil {
		return -1
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if err != nil {
		return -1
	}
	// Fields after the command name in parentheses; utime and stime are fields 14 and 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return -1
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// BenchmarkSpendPool: every spend takes a pooled connection for one round trip.
func BenchmarkSpendPool(b *testing.B) { benchSpend(b, pipelinePool) }

// BenchmarkSpendAutoPipeline: concurrent spends are coalesced into pipelines by go-redis'
// AsyncAutoPipeline.
func BenchmarkSpendAutoPipeline(b *testing.B) { benchSpend(b, pipelineAuto) }

// BenchmarkSpendAdaptive: the pool while at most 4 spends are in flight, pipelines above
// (the default).
func BenchmarkSpendAdaptive(b *testing.B) { benchSpend(b, pipelineAdaptive) }
