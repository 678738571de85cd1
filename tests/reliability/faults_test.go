package reliability

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Fault injection against real Redis processes the tests start and kill by PID
// (docs/reliability.md). Each test runs a mixed load while the fault happens and checks
// every answer, then that Leash recovers without a restart.

// faultTimeout is store.redis.read_timeout and dial_timeout in these tests: long enough
// that a race-instrumented leash on a busy 2-core machine never times out while Redis is
// healthy (every 503 outside the fault fails the test).
const faultTimeout = time.Second

// answerBound is how long any request may take while Redis misbehaves: the store
// timeout plus room for the race detector on a busy 2-core machine.
const answerBound = 3 * time.Second

func phase(short, long time.Duration) time.Duration {
	if longRun() {
		return long
	}
	return short
}

// grpcLoad calls ShouldRateLimit in a loop from a few clients: every answer must be OK,
// or UNAVAILABLE (within answerBound) while allowed.
type grpcLoad struct {
	ok, unavailable atomic.Int64
	mu              sync.Mutex
	bad             []string
	cancel          context.CancelFunc
	wg              sync.WaitGroup
}

func startGRPCLoad(t *testing.T, c leashproc.RLSClient, clients int, allowUnavailable func() bool) *grpcLoad {
	ctx, cancel := context.WithCancel(context.Background())
	g := &grpcLoad{cancel: cancel}
	for range clients {
		g.wg.Go(func() {
			for ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				start := time.Now()
				_, err := c.ShouldRateLimit(rctx, leashproc.Request("n", leashproc.Counted()))
				el := time.Since(start)
				rcancel()
				if ctx.Err() != nil {
					return
				}
				switch {
				case err == nil:
					g.ok.Add(1)
				case status.Code(err) == codes.Unavailable && allowUnavailable() && el <= answerBound:
					g.unavailable.Add(1)
				default:
					g.mu.Lock()
					if len(g.bad) < 10 {
						g.bad = append(g.bad, el.String()+": "+err.Error())
					}
					g.mu.Unlock()
				}
			}
		})
	}
	t.Cleanup(g.stop)
	return g
}

func (g *grpcLoad) stop() {
	g.cancel()
	g.wg.Wait()
}

func (g *grpcLoad) check(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.bad) > 0 {
		t.Fatalf("gRPC answers:\n%s", strings.Join(g.bad, "\n"))
	}
}

func readyz(t *testing.T, admin string) int {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestRedisKilledUnderLoad: Redis is killed (SIGKILL) during a mixed load of checks,
// lease cycles and gRPC calls. Every HTTP request is answered 503 unavailable (or 200)
// within the bound, never hangs; gRPC answers UNAVAILABLE; /readyz turns 503. When Redis
// is started again, everything recovers without restarting Leash, no panic happened, and
// the goroutines return to their number before the load.
func TestRedisKilledUnderLoad(t *testing.T) {
	r := redistest.StartServer(t, false)
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=k", "LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL="+r.URL(),
		"LEASH_STORE_REDIS_READ_TIMEOUT="+faultTimeout.String(), "LEASH_STORE_REDIS_DIAL_TIMEOUT="+faultTimeout.String(),
		"LEASH_ADMIN_PPROF=true")
	base := "http://" + p.HTTP
	if code, _ := leashproc.Call(t, "POST", base+"/v1/limit", "k", `{"namespace":"w","key":"w","limit":5,"window_ms":1000}`); code != 200 {
		t.Fatalf("warm-up: %d", code)
	}
	before := goroutines(t, p.Admin)

	var outage atomic.Bool
	l := startLoad(t, loadConfig{bases: []string{base}, apiKey: "k", clients: 50, checkKeys: 200, leaseKeys: 5,
		leaseLimit: 3, leaseTTLMS: 30_000, leaseShare: 40, allow503: outage.Load})
	g := startGRPCLoad(t, leashproc.DialRLS(t, p.GRPC), 4, outage.Load)
	time.Sleep(phase(time.Second, 20*time.Second))
	if l.stats.checks.Load() == 0 || l.stats.acquires.Load() == 0 || g.ok.Load() == 0 {
		t.Fatalf("no traffic before the fault: %v", &l.stats)
	}

	outage.Store(true)
	r.Stop() // SIGKILL
	killed := time.Now()
	testkit.Eventually(t, "/readyz 503 with Redis down", 3*time.Second, func() bool { return readyz(t, p.Admin) == 503 })
	// Requests decided before the kill have answered by now; from here on no decision can
	// be made, so no 200 and no gRPC OK may come until Redis is back.
	time.Sleep(200 * time.Millisecond)
	ok200, okGRPC := l.stats.answered200(), g.ok.Load()
	time.Sleep(phase(1500*time.Millisecond, 20*time.Second))
	if l.stats.unavailable.Load() == 0 || g.unavailable.Load() == 0 {
		t.Fatalf("no 503 / UNAVAILABLE while Redis was down %v: %v; gRPC unavailable %d", time.Since(killed), &l.stats, g.unavailable.Load())
	}
	if n, ng := l.stats.answered200()-ok200, g.ok.Load()-okGRPC; n != 0 || ng != 0 {
		t.Fatalf("with Redis dead: %d HTTP 200 and %d gRPC OK answers", n, ng)
	}

	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	testkit.Eventually(t, "recovery after Redis returned", 10*time.Second, func() bool {
		code, _ := leashproc.Call(t, "POST", base+"/v1/limit", "k", `{"namespace":"w","key":"after","limit":5,"window_ms":1000}`)
		return code == 200 && readyz(t, p.Admin) == 200
	})
	recovered := time.Since(restarted)
	time.Sleep(300 * time.Millisecond) // requests sent before the recovery have answered
	u, gu := l.stats.unavailable.Load(), g.unavailable.Load()
	checksBefore := l.stats.checks.Load()
	time.Sleep(phase(time.Second, 20*time.Second))
	if l.stats.unavailable.Load() != u || g.unavailable.Load() != gu {
		t.Fatalf("503s after recovery: %d -> %d (gRPC %d -> %d)", u, l.stats.unavailable.Load(), gu, g.unavailable.Load())
	}
	if l.stats.checks.Load() == checksBefore {
		t.Fatal("no checks answered after recovery")
	}
	l.stop()
	g.stop()
	l.stats.check(t)
	g.check(t)
	if d := time.Duration(l.stats.maxLatency.Load()); d > answerBound {
		t.Fatalf("slowest answer took %v", d)
	}
	p.NoCrash(t)
	var after int
	testkit.Eventually(t, "goroutines back to their number before the load", 5*time.Second, func() bool {
		after = goroutines(t, p.Admin)
		return after <= before+10
	})
	t.Logf("Redis killed under load: %v; gRPC ok %d unavailable %d; recovered %v after Redis restarted; goroutines %d before, %d after",
		&l.stats, g.ok.Load(), g.unavailable.Load(), recovered, before, after)
}

// TestRedisPausedUnderLoad: Redis is frozen (SIGSTOP: connections stay open, nothing
// answers) under 100 concurrent clients. Every request is answered 503 within the bound,
// the connection pool stays within its size instead of growing with the waiting
// requests, and everything recovers when Redis resumes (SIGCONT).
func TestRedisPausedUnderLoad(t *testing.T) {
	const poolSize = 8
	r := redistest.StartServer(t, false)
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=k", "LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL="+r.URL(),
		"LEASH_STORE_REDIS_READ_TIMEOUT="+faultTimeout.String(), "LEASH_STORE_REDIS_DIAL_TIMEOUT="+faultTimeout.String(),
		"LEASH_STORE_REDIS_POOL_SIZE="+strconv.Itoa(poolSize))
	base := "http://" + p.HTTP
	var paused atomic.Bool
	l := startLoad(t, loadConfig{bases: []string{base}, apiKey: "k", clients: 100, checkKeys: 200, leaseKeys: 5,
		leaseLimit: 3, leaseTTLMS: 30_000, leaseShare: 30, allow503: paused.Load})
	time.Sleep(phase(time.Second, 20*time.Second))

	paused.Store(true)
	r.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { r.Signal(syscall.SIGCONT) })
	maxConns := 0.0
	end := time.Now().Add(phase(2*time.Second, 20*time.Second))
	for time.Now().Before(end) {
		maxConns = max(maxConns, metric(t, p, "leash_redis_pool_connections"))
		time.Sleep(100 * time.Millisecond)
	}
	if l.stats.unavailable.Load() == 0 {
		t.Fatalf("no 503 while Redis was frozen: %v", &l.stats)
	}
	// The command pool (pool_size), go-redis's separate pipeline pool (its default size)
	// and the decisions' one connection: far fewer than the 100 waiting clients.
	if bound := float64(poolSize + redis.DefaultPipelinePoolSize + 1); maxConns > bound {
		t.Fatalf("%v Redis connections open while frozen; want at most %v: pool size %d + pipeline pool %d + 1", maxConns, bound, poolSize, redis.DefaultPipelinePoolSize)
	}
	r.Signal(syscall.SIGCONT)
	testkit.Eventually(t, "recovery after Redis resumed", 10*time.Second, func() bool {
		code, _ := leashproc.Call(t, "POST", base+"/v1/limit", "k", `{"namespace":"w","key":"after","limit":5,"window_ms":1000}`)
		return code == 200 && readyz(t, p.Admin) == 200
	})
	time.Sleep(300 * time.Millisecond)
	u := l.stats.unavailable.Load()
	time.Sleep(phase(time.Second, 10*time.Second))
	if l.stats.unavailable.Load() != u {
		t.Fatalf("503s after Redis resumed: %d -> %d", u, l.stats.unavailable.Load())
	}
	l.stop()
	l.stats.check(t)
	if d := time.Duration(l.stats.maxLatency.Load()); d > answerBound {
		t.Fatalf("slowest answer took %v with Redis frozen", d)
	}
	p.NoCrash(t)
	t.Logf("Redis frozen under load: %v; Redis connections at most %v (pool size %d + pipeline pool %d + 1; 100 clients)", &l.stats, maxConns, poolSize, redis.DefaultPipelinePoolSize)
}

// TestClusterFailoverUnderLoad: a Redis Cluster (3 masters, 1 replica each) loses the
// master that holds the busiest lease sets during a load of lease cycles and checks. After
// the failover, checks and leases work again without restarting Leash, and the lease
// invariant held throughout: no answer reported more than limit active leases, the
// clients never held more than limit, and Redis never counted more than limit (sampled).
// With store.redis.wait_replicas: 1 no acknowledged lease is lost with the dead master;
// the promoted replica has no replica of its own until the dead node returns (as its
// replica), and until then leases on its slots are refused (503), not granted unsafely.
func TestClusterFailoverUnderLoad(t *testing.T) {
	c := redistest.StartCluster(t, 1)
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=k", "LEASH_STORE_BACKEND=redis",
		"LEASH_STORE_REDIS_CLUSTER_ADDRS="+strings.Join(c.Addrs(), ","), "LEASH_STORE_REDIS_WAIT_REPLICAS=1",
		"LEASH_STORE_REDIS_READ_TIMEOUT="+faultTimeout.String(), "LEASH_STORE_REDIS_DIAL_TIMEOUT="+faultTimeout.String())
	base := "http://" + p.HTTP
	const account, leaseKeys, limit = "dev", 6, 3
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRetries: -1, ClusterStateReloadInterval: time.Second})
	t.Cleanup(func() { rc.Close() })

	var failing atomic.Bool
	// Leases live 5 s: a lease whose release failed during the fault, or whose grant was
	// never answered, stays held until then (the conservative outcome), and with 60 s the
	// load's 6 keys could stay full long after the failover.
	l := startLoad(t, loadConfig{bases: []string{base}, apiKey: "k", clients: 40, checkKeys: 200, leaseKeys: leaseKeys,
		leaseLimit: limit, leaseTTLMS: 5_000, leaseShare: 60, allow503: failing.Load})
	s := startLeaseSampler(t, rc, account, leaseKeys)
	time.Sleep(phase(1500*time.Millisecond, 20*time.Second))
	if l.stats.acquires.Load() == 0 {
		t.Fatalf("no lease traffic before the fault: %v", &l.stats)
	}

	victim, err := c.MasterFor(context.Background(), "{leash:k:"+account+":jobs:k0}:lz")
	if err != nil {
		t.Fatal(err)
	}
	// A lease key of its own on the same master, to probe when leases work there again.
	probe := ""
	for i := 0; probe == ""; i++ {
		k := "p" + strconv.Itoa(i)
		if m, err := c.MasterFor(context.Background(), "{leash:k:"+account+":probe:"+k+"}:lz"); err == nil && m == victim {
			probe = k
		}
	}
	failing.Store(true)
	victim.Stop()
	killed := time.Now()
	before := l.stats.acquires.Load() - l.stats.acquireDenied.Load()
	// The dead node comes back once its replica has taken over, and rejoins as a replica.
	testkit.Eventually(t, "the replica promoted", 20*time.Second, func() bool {
		m, err := c.MasterFor(context.Background(), "{leash:k:"+account+":jobs:k0}:lz")
		return err == nil && m != victim
	})
	promoted := time.Since(killed)
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until a lease on the dead master's slots can be taken (acknowledged by the
	// returned node, now a replica) and given back again.
	testkit.Eventually(t, "leases on the failed-over slots", 20*time.Second, func() bool {
		code, out := leashproc.Call(t, "POST", base+"/v1/leases", "k", `{"namespace":"probe","key":"`+probe+`","limit":1,"window_ms":1000}`)
		if code != 200 || out["allowed"] != true {
			return false
		}
		code, _ = leashproc.Call(t, "DELETE", base+"/v1/leases/"+out["lease_id"].(string), "k", "")
		return code == 200
	})
	failedOver := time.Since(killed)
	time.Sleep(time.Second) // requests sent before have answered
	failing.Store(false)    // from here on, every request must succeed
	granted := l.stats.acquires.Load() - l.stats.acquireDenied.Load()
	afterStart := time.Now()
	// The load's own leases are granted again at the latest once those stranded by the
	// fault expire (5 s).
	testkit.Eventually(t, "a load lease granted after the failover", 10*time.Second, func() bool {
		return l.stats.acquires.Load()-l.stats.acquireDenied.Load() > granted
	})
	grantedAgain := time.Since(afterStart)
	time.Sleep(phase(1500*time.Millisecond, 20*time.Second))
	l.stop()
	s.stop()
	l.stats.check(t)
	if m := s.max.Load(); m > limit || s.samples.Load() == 0 {
		t.Fatalf("Redis counted %d unexpired leases on one key (limit %d) in %d samples", m, limit, s.samples.Load())
	}
	p.NoCrash(t)
	t.Logf("cluster failover under load: %v; leases granted %d before the kill, %d in all; replica promoted after %v, leases granted again after %v "+
		"(to the load: %v later); most leases Redis held on one key %d of %d (%d samples)",
		&l.stats, before, l.stats.acquires.Load()-l.stats.acquireDenied.Load(), promoted, failedOver, grantedAgain.Round(time.Millisecond),
		s.max.Load(), limit, s.samples.Load())
}
