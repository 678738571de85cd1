package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The load generator of the reliability tests: clients that mix rate-limit checks and
// lease acquire/release cycles against one or more leash instances, and check what every
// answer may be, as it arrives:
//
//   - every response is complete and is 200, or (when allowed) 503 unavailable;
//   - the lease invariant (spec §5.2): no allowed acquire reports more than limit active
//     leases, and the leases the clients hold by their own count never exceed limit. That
//     count is a lower bound of the truth (an acquire is counted when its answer arrives,
//     a release when it is sent), so exceeding limit proves a violation;
//   - usage: every 200 answer of /v1/limit and POST /v1/leases counts one (spec §7.1),
//     a denial also counts as blocked; the tests compare these with the stats.
//
// A sampler (leaseSampler) reads the lease sets' unexpired counts in Redis directly.

// longRun reports whether the long variants were asked for (make reliability-long). The
// variable is not LEASH_-prefixed: leash would read it as a config key.
func longRun() bool { return os.Getenv("RELIABILITY_LONG") == "1" }

// loadConfig describes a load.
type loadConfig struct {
	bases      []string // HTTP base URLs; client i uses bases[i % len]
	apiKey     string
	clients    int
	checkKeys  int // keys of namespace "api" (limit 1,000,000 per minute: rarely denied)
	leaseKeys  int // keys of namespace "jobs"
	leaseLimit int64
	leaseTTLMS int64
	leaseShare int           // percent of operations that are lease cycles
	timeout    time.Duration // client-side bound on one request (a hang fails the test)
	allow503   func() bool   // whether a 503 unavailable is acceptable right now
}

// loadStats is what a load saw.
type loadStats struct {
	checks, checksDenied     atomic.Int64 // 200 answers of /v1/limit, and the denials among them
	acquires, acquireDenied  atomic.Int64 // 200 answers of POST /v1/leases
	released, releaseMissing atomic.Int64 // DELETE answers released true / false
	unavailable              atomic.Int64 // 503 unavailable answers
	transportErrs            atomic.Int64 // no answer (connection refused/reset, client timeout)
	maxLatency503            atomic.Int64 // ns, the slowest 503
	maxLatency               atomic.Int64 // ns, the slowest answer of any kind

	mu         sync.Mutex
	violations []string
	other      map[string]int // unexpected statuses, by "op status"
}

func (s *loadStats) violate(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.violations) < 20 {
		s.violations = append(s.violations, fmt.Sprintf(format, a...))
	}
}

func (s *loadStats) unexpected(op string, status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.other == nil {
		s.other = map[string]int{}
	}
	k := op + " " + strconv.Itoa(status)
	if s.other[k] == 0 && len(s.violations) < 20 {
		s.violations = append(s.violations, fmt.Sprintf("%s answered %d %s", op, status, body))
	}
	s.other[k]++
}

// check fails the test on any violation or unexpected answer.
func (s *loadStats) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.violations) > 0 || len(s.other) > 0 {
		t.Fatalf("load violations (%v):\n%s", s.other, strings.Join(s.violations, "\n"))
	}
}

// answered200 is the number of 200 answers: checks, acquires and releases.
func (s *loadStats) answered200() int64 {
	return s.checks.Load() + s.acquires.Load() + s.released.Load() + s.releaseMissing.Load()
}

func (s *loadStats) String() string {
	return fmt.Sprintf("checks %d (denied %d), acquires %d (denied %d), released %d (not held %d), 503 %d (slowest %v), no answer %d, slowest answer %v",
		s.checks.Load(), s.checksDenied.Load(), s.acquires.Load(), s.acquireDenied.Load(), s.released.Load(),
		s.releaseMissing.Load(), s.unavailable.Load(), time.Duration(s.maxLatency503.Load()), s.transportErrs.Load(),
		time.Duration(s.maxLatency.Load()))
}

// load is a running load; stop ends it and waits for every client.
type load struct {
	cfg    loadConfig
	stats  loadStats
	held   []atomic.Int64 // per lease key: held by the clients' own count
	client *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startLoad(t *testing.T, cfg loadConfig) *load {
	t.Helper()
	if cfg.timeout == 0 {
		cfg.timeout = 5 * time.Second
	}
	if cfg.allow503 == nil {
		cfg.allow503 = func() bool { return false }
	}
	tr := &http.Transport{MaxIdleConns: cfg.clients, MaxIdleConnsPerHost: cfg.clients, MaxConnsPerHost: cfg.clients}
	l := &load{cfg: cfg, held: make([]atomic.Int64, cfg.leaseKeys), client: &http.Client{Transport: tr}}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for i := range cfg.clients {
		l.wg.Go(func() { l.run(ctx, i) })
	}
	t.Cleanup(l.stop)
	return l
}

// stop ends the load, waits for the clients and closes their connections.
func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
	l.client.CloseIdleConnections()
}

func (l *load) run(ctx context.Context, i int) {
	rng := rand.New(rand.NewPCG(uint64(i), 42))
	base := l.cfg.bases[i%len(l.cfg.bases)]
	for ctx.Err() == nil {
		if rng.IntN(100) < l.cfg.leaseShare {
			l.leaseCycle(ctx, base, rng)
		} else {
			l.check(ctx, base, rng)
		}
	}
}

// do sends one request and returns its status and body; ok is false when there was no
// answer. A request once sent is not cut off by stop: it completes (within the timeout),
// so no lease is granted to a client that never learns its id.
func (l *load) do(ctx context.Context, method, url, body string) (status int, out []byte, ok bool) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.cfg.apiKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := l.client.Do(req)
	if err == nil {
		out, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	el := time.Since(start).Nanoseconds()
	if err != nil {
		// Leash itself stays up through every fault: it must always answer.
		l.stats.transportErrs.Add(1)
		l.stats.violate("%s %s: no answer after %v: %v", method, url, time.Duration(el), err)
		return 0, nil, false
	}
	maxInto(&l.stats.maxLatency, el)
	if resp.StatusCode == http.StatusServiceUnavailable {
		maxInto(&l.stats.maxLatency503, el)
	}
	return resp.StatusCode, out, true
}

func maxInto(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// answered sorts out the statuses every operation shares; it reports whether the answer
// is a 200 to decode.
func (l *load) answered(op string, status int, body []byte) bool {
	switch {
	case status == http.StatusOK:
		return true
	case status == http.StatusServiceUnavailable && l.cfg.allow503() && strings.Contains(string(body), `"code":"unavailable"`):
		l.stats.unavailable.Add(1)
	default:
		l.stats.unexpected(op, status, string(body))
	}
	return false
}

func (l *load) check(ctx context.Context, base string, rng *rand.Rand) {
	body := `{"namespace":"api","key":"c` + strconv.Itoa(rng.IntN(l.cfg.checkKeys)) +
		`","algorithm":"sliding_window","limit":1000000,"window_ms":60000}`
	status, out, ok := l.do(ctx, http.MethodPost, base+"/v1/limit", body)
	if !ok || !l.answered("check", status, out) {
		return
	}
	var d struct{ Allowed *bool }
	if json.Unmarshal(out, &d) != nil || d.Allowed == nil {
		l.stats.violate("check: bad body %s", out)
		return
	}
	l.stats.checks.Add(1)
	if !*d.Allowed {
		l.stats.checksDenied.Add(1)
	}
}

func (l *load) leaseCycle(ctx context.Context, base string, rng *rand.Rand) {
	k := rng.IntN(l.cfg.leaseKeys)
	body := fmt.Sprintf(`{"namespace":"jobs","key":"k%d","limit":%d,"window_ms":%d}`, k, l.cfg.leaseLimit, l.cfg.leaseTTLMS)
	status, out, ok := l.do(ctx, http.MethodPost, base+"/v1/leases", body)
	if !ok || !l.answered("acquire", status, out) {
		return
	}
	var d struct {
		Allowed *bool
		LeaseID string `json:"lease_id"`
		Active  int64
	}
	if json.Unmarshal(out, &d) != nil || d.Allowed == nil {
		l.stats.violate("acquire: bad body %s", out)
		return
	}
	l.stats.acquires.Add(1)
	if !*d.Allowed {
		l.stats.acquireDenied.Add(1)
		time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		return
	}
	if d.Active > l.cfg.leaseLimit {
		l.stats.violate("acquire k%d: active %d over limit %d", k, d.Active, l.cfg.leaseLimit)
	}
	if n := l.held[k].Add(1); n > l.cfg.leaseLimit {
		l.stats.violate("k%d: clients hold %d leases, limit %d", k, n, l.cfg.leaseLimit)
	}
	time.Sleep(time.Duration(1+rng.IntN(5)) * time.Millisecond)
	l.held[k].Add(-1) // before the release is sent: the count stays a lower bound
	// Released even when the load is stopping, so no lease outlives its holder.
	status, out, ok = l.do(ctx, http.MethodDelete, base+"/v1/leases/"+d.LeaseID, "")
	if !ok || !l.answered("release", status, out) {
		return
	}
	var r struct{ Released *bool }
	if json.Unmarshal(out, &r) != nil || r.Released == nil {
		l.stats.violate("release: bad body %s", out)
		return
	}
	if *r.Released {
		l.stats.released.Add(1)
	} else {
		l.stats.releaseMissing.Add(1)
	}
}

// leaseSampler reads, every few milliseconds, how many unexpired leases each lease key
// holds in Redis (by Redis's own clock, in one script), and keeps the largest.
type leaseSampler struct {
	max     atomic.Int64
	samples atomic.Int64
	cancel  context.CancelFunc
	done    chan struct{}
}

// countUnexpired counts a lease set's members whose expiry is after Redis's now.
var countUnexpired = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')`)

func startLeaseSampler(t *testing.T, rc redis.UniversalClient, account string, keys int) *leaseSampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &leaseSampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			for k := range keys {
				key := "{leash:k:" + account + ":jobs:k" + strconv.Itoa(k) + "}:lz"
				sctx, c := context.WithTimeout(ctx, 200*time.Millisecond)
				n, err := countUnexpired.Run(sctx, rc, []string{key}).Int64()
				c()
				if err == nil {
					s.samples.Add(1)
					maxInto(&s.max, n)
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *leaseSampler) stop() {
	s.cancel()
	<-s.done
}

// goroutines reads the goroutine count from /debug/pprof/goroutine (admin.pprof on).
func goroutines(t *testing.T, admin string) int {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	first, _, _ := strings.Cut(string(b), "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(first, "goroutine profile: total "))
	if err != nil {
		t.Fatalf("goroutine profile: %q", first)
	}
	return n
}
