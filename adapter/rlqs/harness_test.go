package rlqs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/leashd/leash/adapter/rls"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/adapter/rlqs"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/store/redisstore"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/redistest"
)

// The harness: Leash instances serving RLQS (and RateLimitService) on loopback ports, and
// simulated Envoy proxies that speak the protocol from the go-control-plane protos and
// enforce their assignments locally as Envoy's rate_limit_quota filter does: a token
// bucket per token_bucket strategy (full when an assignment with another strategy
// arrives; the same strategy only extends its time-to-live), blanket rules, no
// assignment = ALLOW_ALL, an expired assignment kept (reuse_last_assignment), an
// abandoned bucket forgotten, usage reported every reporting interval (and at once for
// a new bucket), counts kept until a report is sent, reconnection after a broken stream.

// instance is one Leash process: an engine on a store and the gRPC listener.
type instance struct {
	t     *testing.T
	eng   *wiring.Engine
	rls   *rls.Service
	quota *rlqs.Service
	srv   *grpc.Server
	addr  string
	stop  sync.Once
}

// setup is what instances are built from.
type setup struct {
	descriptors string // YAML of one descriptor file ("" none)
	domains     map[string]string
	defaultAcct string
	opts        rlqs.Options // bounds and intervals; the rest is filled in
	// inMemory serves on an in-memory listener instead of a loopback port: for a test in a
	// synctest bubble (listenMem).
	inMemory bool
}

func loadDescriptors(t *testing.T, yaml string) *descriptors.Config {
	t.Helper()
	if yaml == "" {
		return nil
	}
	p := filepath.Join(t.TempDir(), "d.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := descriptors.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// startInstance serves on addr ("" for a new port) over store.
func startInstance(t *testing.T, store engine.Store, st setup, addr string) *instance {
	t.Helper()
	dir, err := engine.NewDirectory([]engine.AccountSpec{
		{ID: "acme", Plan: engine.BuiltinPlans()["scale"]},
		{ID: "other", Plan: engine.BuiltinPlans()["scale"]},
		{ID: "capped", Plan: engine.BuiltinPlans()["free"]},
	})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := wiring.New(engine.RolesOf(store), dir, wiring.Options{Logger: log})
	cfg := &domains.Config{Descriptors: loadDescriptors(t, st.descriptors), Routing: domains.Routing{Domains: st.domains, DefaultAccount: st.defaultAcct}}
	if err := cfg.Validate(dir); err != nil {
		t.Fatal(err)
	}
	rlsSvc := rls.NewService(cfg, rls.Options{Engine: eng, Accounts: eng.Accounts.Account, Logger: log})
	o := st.opts
	o.Engine, o.Demand, o.Accounts, o.Config, o.Logger = eng, store, eng.Accounts.Account, rlsSvc.Config, log
	quota := rlqs.NewService(o)
	srv, hs := rls.NewServerWith(rlsSvc, nil, rls.Limits{}, quota.ServerOptions()...)
	rls.RegisterQuota(srv, hs, quota)
	var ln net.Listener
	if st.inMemory {
		ln, addr = listenMem(t, addr)
	} else {
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		// A restarted instance takes its predecessor's port, once the kernel lets it go.
		testkit.Eventually(t, "listening on "+addr, 5*time.Second, func() bool {
			ln, err = net.Listen("tcp", addr)
			return err == nil
		})
		addr = ln.Addr().String()
	}
	in := &instance{t: t, eng: eng, rls: rlsSvc, quota: quota, srv: srv, addr: addr}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(in.kill)
	return in
}

// memPrefix begins the address of an instance on an in-memory listener.
const memPrefix = "passthrough:///mem-"

var (
	memNet  sync.Map     // address -> *bufconn.Listener
	memNext atomic.Int64 // the last address's number
)

// listenMem listens in memory on addr ("" for a new address), for a test in a synctest
// bubble: a connection there blocks on the bubble's own channels, so the bubble's fake
// time advances while the instance and its proxies all wait (a loopback socket would
// hold it still).
func listenMem(t *testing.T, addr string) (net.Listener, string) {
	if addr == "" {
		addr = fmt.Sprintf("%s%d", memPrefix, memNext.Add(1))
	}
	ln := bufconn.Listen(1 << 20)
	memNet.Store(addr, ln)
	t.Cleanup(func() { memNet.CompareAndDelete(addr, ln) })
	return ln, addr
}

// dialOptions are the options of a client of the instance at addr: in memory or on a
// loopback port.
func dialOptions(addr string) []grpc.DialOption {
	o := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if strings.HasPrefix(addr, memPrefix) {
		o = append(o, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			ln, ok := memNet.Load(addr)
			if !ok {
				return nil, fmt.Errorf("dial %s: no instance listens there", addr)
			}
			return ln.(*bufconn.Listener).DialContext(ctx)
		}))
	}
	return o
}

// kill stops the instance at once: its streams break.
func (in *instance) kill() {
	in.stop.Do(func() {
		in.quota.Shutdown()
		in.srv.Stop()
	})
}

func memStore(t *testing.T) engine.Store {
	s := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// redisStores returns n stores on one new redis-server, as n instances would have.
func redisStores(t *testing.T, n int) []engine.Store {
	t.Helper()
	srv := redistest.StartServer(t, false)
	out := make([]engine.Store, n)
	for i := range out {
		s, err := redisstore.Open(context.Background(), redisstore.Options{URL: srv.URL(), Prefix: "rlqs"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		out[i] = s
	}
	return out
}

// proxy is one simulated Envoy with one bucket.
type proxy struct {
	name     string
	domain   string
	bucket   map[string]string
	interval time.Duration

	mu        sync.Mutex
	rate      float64 // offered requests per second
	addr      string
	strategy  *typev3.RateLimitStrategy // nil: no assignment
	expires   time.Time
	tokens    float64
	refilled  time.Time
	carry     float64   // the fraction of a request arrived but not yet decided
	assignedN int       // assignments received
	firstAt   time.Time // the first assignment's arrival
	pending   struct{ allowed, denied uint64 }
	lastSent  time.Time
	admitted  map[int64]int64 // per aligned window (by wall clock, as the stores' clocks)
	offered   map[int64]int64
	windowMS  int64
	trace     []string // assignments received, for failure messages

	stopped chan struct{}
	done    chan struct{}
}

func newProxy(name, domain string, bucket map[string]string, rate float64, interval time.Duration, windowMS int64, addr string) *proxy {
	return &proxy{name: name, domain: domain, bucket: bucket, rate: rate, interval: interval, windowMS: windowMS, addr: addr,
		admitted: map[int64]int64{}, offered: map[int64]int64{}, stopped: make(chan struct{}), done: make(chan struct{})}
}

// start runs the proxy until stop.
func (p *proxy) start(t *testing.T) {
	go p.run()
	t.Cleanup(p.stop)
}

func (p *proxy) stop() {
	select {
	case <-p.stopped:
	default:
		close(p.stopped)
	}
	<-p.done
}

func (p *proxy) setAddr(a string)  { p.mu.Lock(); p.addr = a; p.mu.Unlock() }
func (p *proxy) setRate(r float64) { p.mu.Lock(); p.rate = r; p.mu.Unlock() }

// run connects (again after a break) and drives traffic and reports.
func (p *proxy) run() {
	defer close(p.done)
	for {
		select {
		case <-p.stopped:
			return
		default:
		}
		p.session()
		select {
		case <-p.stopped:
			return
		case <-time.After(30 * time.Millisecond): // reconnect backoff
		}
	}
}

// session is one stream: traffic, reports and assignments until it breaks or stop.
func (p *proxy) session() {
	p.mu.Lock()
	addr := p.addr
	p.mu.Unlock()
	conn, err := grpc.NewClient(addr, dialOptions(addr)...)
	if err != nil {
		p.traffic(30 * time.Millisecond)
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		p.traffic(30 * time.Millisecond)
		return
	}
	broken := make(chan struct{})
	go func() {
		defer close(broken)
		for {
			resp, err := st.Recv()
			if err != nil {
				return
			}
			p.apply(resp)
		}
	}()
	first := true
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stopped:
			_ = st.CloseSend()
			cancel()
			<-broken
			return
		case <-broken:
			return
		case <-tick.C:
		}
		p.traffic(0)
		p.mu.Lock()
		due := first || time.Since(p.lastSent) >= p.interval
		p.mu.Unlock()
		if due {
			if err := p.report(st, first); err != nil {
				cancel()
				<-broken
				return
			}
			first = false
		}
	}
}

// traffic admits or denies the requests that arrived since the last call (or sleeps d
// without a stream, still enforcing).
func (p *proxy) traffic(d time.Duration) {
	if d > 0 {
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			time.Sleep(5 * time.Millisecond)
			p.traffic(0)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.refilled.IsZero() {
		p.refilled = now
		return
	}
	dt := now.Sub(p.refilled).Seconds()
	// Requests arrive evenly at the offered rate; the fraction carries over.
	arrivals := p.rate*dt + p.carry
	n := int64(arrivals)
	p.carry = arrivals - float64(n)
	p.refill(now)
	w := now.UnixMilli() / p.windowMS
	for range n {
		p.offered[w]++
		if p.admit() {
			p.admitted[w]++
			p.pending.allowed++
		} else {
			p.pending.denied++
		}
	}
}

func (p *proxy) windows() map[int64]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.admitted)
}

// refill adds the tokens of the time since the last refill.
func (p *proxy) refill(now time.Time) {
	tb := p.strategy.GetTokenBucket()
	if tb != nil {
		rate := rlqs.RateOf(p.strategy)
		p.tokens = min(float64(tb.GetMaxTokens()), p.tokens+rate*now.Sub(p.refilled).Seconds())
	}
	p.refilled = now
}

// admit decides one request by the assignment in force.
func (p *proxy) admit() bool {
	switch {
	case p.strategy == nil:
		return true // no assignment: ALLOW_ALL
	case p.strategy.GetTokenBucket() != nil:
		if p.tokens >= 1 {
			p.tokens--
			return true
		}
		return false
	default:
		return p.strategy.GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL
	}
}

// report sends the usage since the last report.
func (p *proxy) report(st grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse], first bool) error {
	p.mu.Lock()
	m := &rlqsv3.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId:           &rlqsv3.BucketId{Bucket: p.bucket},
		NumRequestsAllowed: p.pending.allowed,
		NumRequestsDenied:  p.pending.denied,
	}}}
	if !p.lastSent.IsZero() {
		m.BucketQuotaUsages[0].TimeElapsed = durationpb.New(time.Since(p.lastSent))
	}
	if first {
		m.Domain = p.domain
	}
	sent := p.pending
	p.mu.Unlock()
	if err := st.Send(m); err != nil {
		return err
	}
	p.mu.Lock()
	p.pending.allowed -= sent.allowed
	p.pending.denied -= sent.denied
	p.lastSent = time.Now()
	p.mu.Unlock()
	return nil
}

// apply takes an assignment or abandonment, as the filter does.
func (p *proxy) apply(resp *rlqsv3.RateLimitQuotaResponse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range resp.GetBucketAction() {
		if !maps.Equal(a.GetBucketId().GetBucket(), p.bucket) {
			continue
		}
		if a.GetAbandonAction() != nil {
			p.strategy, p.tokens = nil, 0
			p.lastSent = time.Time{} // report again at once, as for a new bucket
			continue
		}
		qa := a.GetQuotaAssignmentAction()
		s := qa.GetRateLimitStrategy()
		now := time.Now()
		p.refill(now)
		if p.strategy == nil || !sameStrategy(p.strategy, s) {
			p.strategy = s
			p.tokens = float64(s.GetTokenBucket().GetMaxTokens()) // a new bucket starts full
		}
		p.expires = now.Add(qa.GetAssignmentTimeToLive().AsDuration())
		if len(p.trace) < 200 {
			p.trace = append(p.trace, fmt.Sprintf("%d.%03d %.1f/s %s", now.Unix()%100, now.Nanosecond()/1e6, rlqs.RateOf(s), s.GetBlanketRule()))
		}
		if p.assignedN == 0 {
			p.firstAt = now
		}
		p.assignedN++
	}
}

func sameStrategy(a, b *typev3.RateLimitStrategy) bool {
	return a.GetBlanketRule() == b.GetBlanketRule() && (a.GetTokenBucket() == nil) == (b.GetTokenBucket() == nil) &&
		(a.GetTokenBucket() == nil || a.GetTokenBucket().GetMaxTokens() == b.GetTokenBucket().GetMaxTokens() && rlqs.RateOf(a) == rlqs.RateOf(b))
}

// assigned returns the rate in force (requests/s; -1 for none or a blanket rule).
func (p *proxy) assigned() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.strategy.GetTokenBucket() == nil {
		return -1
	}
	return rlqs.RateOf(p.strategy)
}

// waitWindowStart sleeps until just after the next aligned window begins and returns its
// index.
func waitWindowStart(windowMS int64) int64 {
	now := time.Now().UnixMilli()
	next := (now/windowMS + 1) * windowMS
	time.Sleep(time.Duration(next-now+5) * time.Millisecond)
	return next / windowMS
}

var errNotYet = errors.New("not yet")

// eventually polls f until it returns nil or d passes; it returns the time taken.
func eventually(t *testing.T, d time.Duration, f func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := f()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("after %v: %v", d, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// raw is a hand-driven RLQS stream.
type raw struct {
	t    *testing.T
	st   grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]
	in   chan *rlqsv3.RateLimitQuotaResponse
	err  chan error
	stop context.CancelFunc
}

func openRaw(t *testing.T, addr string) *raw {
	t.Helper()
	conn, err := grpc.NewClient(addr, dialOptions(addr)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := &raw{t: t, st: st, in: make(chan *rlqsv3.RateLimitQuotaResponse, 100), err: make(chan error, 1), stop: cancel}
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				r.err <- err
				return
			}
			r.in <- m
		}
	}()
	return r
}

func usage(bucket map[string]string, allowed, denied uint64) *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage {
	return &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqsv3.BucketId{Bucket: bucket}, NumRequestsAllowed: allowed, NumRequestsDenied: denied,
		TimeElapsed: durationpb.New(100 * time.Millisecond)}
}

func (r *raw) send(domain string, us ...*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage) {
	r.t.Helper()
	if err := r.st.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: us}); err != nil {
		r.t.Fatalf("send: %v", err)
	}
}

// recv returns the next response, or nil when none comes within d.
func (r *raw) recv(d time.Duration) *rlqsv3.RateLimitQuotaResponse {
	r.t.Helper()
	select {
	case m := <-r.in:
		return m
	case err := <-r.err:
		r.t.Fatalf("the stream ended: %v", err)
	case <-time.After(d):
	}
	return nil
}

// ended returns the status the stream ended with, waiting up to 2 s.
func (r *raw) ended() error {
	r.t.Helper()
	select {
	case err := <-r.err:
		return err
	case m := <-r.in:
		r.t.Fatalf("a response instead of the end: %v", m)
	case <-time.After(2 * time.Second):
		r.t.Fatal("the stream did not end")
	}
	return nil
}
