package reliability

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// TestThreeInstancesUnderLoad: three leash processes share one Redis; 500 concurrent
// clients spread over them run checks and lease cycles for a bounded time. While Redis is
// healthy no request fails (no 5xx at all), the lease invariant holds at every instant
// (checked on every answer, by the clients' own count, and by sampling Redis), and each
// process's Go heap stays within a stated bound. After a clean shutdown of all three, the
// usage totals equal exactly the answers the clients got (nothing lost, nothing counted
// twice) and no lease their holders released is still counted.
func TestThreeInstancesUnderLoad(t *testing.T) {
	const clients, leaseKeys, limit = 500, 10, 5
	const heapGrowthBound = 64 << 20
	r := redistest.StartServer(t, false)
	// A 2 s store timeout: this test is about healthy Redis, and a race-instrumented leash
	// on a busy 2-core machine can stall longer than the 500 ms default.
	env := []string{"LEASH_DEV_API_KEY=k", "LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL=" + r.URL(),
		"LEASH_STORE_REDIS_READ_TIMEOUT=2s", "LEASH_SHUTDOWN_DRAIN_DELAY=100ms"}
	procs := make([]*leashproc.Proc, 3)
	for i := range procs {
		procs[i] = leashproc.Start(t, binary, nil, env...)
	}
	var bases []string
	for _, p := range procs {
		bases = append(bases, "http://"+p.HTTP)
	}
	rc := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rc.Close() })

	l := startLoad(t, loadConfig{bases: bases, apiKey: "k", clients: clients, checkKeys: 1000, leaseKeys: leaseKeys,
		leaseLimit: limit, leaseTTLMS: 30_000, leaseShare: 30})
	s := startLeaseSampler(t, rc, "dev", leaseKeys)
	time.Sleep(time.Second)
	heap0 := make([]float64, len(procs))
	for i, p := range procs {
		heap0[i] = metric(t, p, "go_memstats_heap_inuse_bytes")
	}
	run := phase(4*time.Second, 60*time.Second)
	time.Sleep(run)
	heap1 := make([]float64, len(procs))
	for i, p := range procs {
		heap1[i] = metric(t, p, "go_memstats_heap_inuse_bytes")
	}
	l.stop() // every lease taken is released before this returns
	s.stop()
	l.stats.check(t)
	if m := s.max.Load(); m > limit || s.samples.Load() == 0 {
		t.Fatalf("Redis counted %d unexpired leases on one key (limit %d) in %d samples", m, limit, s.samples.Load())
	}
	for i := range procs {
		if heap1[i]-heap0[i] > heapGrowthBound {
			t.Fatalf("instance %d: Go heap in use grew from %.0f to %.0f bytes under load", i, heap0[i], heap1[i])
		}
	}

	// Clean shutdown of all three: each exits 0 and flushes its usage.
	for _, p := range procs {
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(10 * time.Second) // one bound for all three
	for i, p := range procs {
		select {
		case err := <-p.Exited:
			if err != nil {
				t.Fatalf("instance %d exit: %v", i, err)
			}
		case <-deadline:
			t.Fatalf("instance %d did not exit within 10 s of SIGTERM", i)
		}
	}
	// Nothing is left counted: every lease was released by its holder.
	for k := range leaseKeys {
		key := "{leash:k:dev:jobs:k" + strconv.Itoa(k) + "}:lz"
		if n, err := countUnexpired.Run(context.Background(), rc, []string{key}).Int64(); err != nil || n != 0 {
			t.Fatalf("lease set k%d still counts %d leases (%v) after every holder released", k, n, err)
		}
	}

	p := leashproc.Start(t, binary, nil, env...)
	base := "http://" + p.HTTP
	stat := func(ns string) (total, blocked, month float64) {
		code, out := leashproc.Call(t, "GET", base+"/v1/namespaces/"+ns+"/stats", "k", "")
		if code != 200 {
			t.Fatalf("stats %s: %d %v", ns, code, out)
		}
		return out["total"].(float64), out["blocked"].(float64), out["month"].(map[string]any)["total"].(float64)
	}
	apiTotal, apiBlocked, month := stat("api")
	jobsTotal, jobsBlocked, _ := stat("jobs")
	st := &l.stats
	if int64(apiTotal) != st.checks.Load() || int64(apiBlocked) != st.checksDenied.Load() ||
		int64(jobsTotal) != st.acquires.Load() || int64(jobsBlocked) != st.acquireDenied.Load() ||
		int64(month) != st.checks.Load()+st.acquires.Load() {
		t.Fatalf("usage after shutdown: api %v/%v, jobs %v/%v, month %v; clients got checks %d/%d denied, acquires %d/%d denied",
			apiTotal, apiBlocked, jobsTotal, jobsBlocked, month, st.checks.Load(), st.checksDenied.Load(), st.acquires.Load(), st.acquireDenied.Load())
	}
	t.Logf("three instances, %d clients, %v: %v; decisions/s %.0f; most leases Redis held on one key %d of %d (%d samples); "+
		"heap in use MiB %.1f->%.1f, %.1f->%.1f, %.1f->%.1f; usage after shutdown equals the answers (%d)",
		clients, run, st, float64(st.checks.Load()+st.acquires.Load())/(run+time.Second).Seconds(), s.max.Load(), limit, s.samples.Load(),
		heap0[0]/(1<<20), heap1[0]/(1<<20), heap0[1]/(1<<20), heap1[1]/(1<<20), heap0[2]/(1<<20), heap1[2]/(1<<20), int64(month))
}
