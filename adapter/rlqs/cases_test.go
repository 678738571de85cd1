package rlqs_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/leashd/leash/adapter/rls"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/adapter/rlqs"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
)

// budget is the bucket's steady budget in requests per second.
func (s scale) budget() float64 { return float64(s.limit) * 1000 / float64(s.windowMS) }

// joinAndLeave: with two heavy proxies running, a third joins and gets an assignment
// within two reporting intervals; when it leaves, the others' shares grow back to the
// whole budget within one assignment TTL.
func joinAndLeave(t *testing.T, s scale, join string, a, b *proxy) {
	t.Helper()
	ttl := rlqs.DefaultTTLIntervals * s.interval
	// The two have reported their demand, and a window begins: the steps below fit in
	// its first half, where the window's pace alone sets the budget.
	time.Sleep(5 * s.interval)
	waitWindowStart(s.windowMS)
	eventually(t, 2*time.Second, func() error { // settled: the two share the budget
		if a.assigned()+b.assigned() < 0.9*s.budget() {
			return fmt.Errorf("two proxies assigned %v + %v of %v", a.assigned(), b.assigned(), s.budget())
		}
		return nil
	})
	c := newProxy("joiner", "web", search, 1000, s.interval, s.windowMS, join)
	c.start(t)
	start := time.Now()
	took := eventually(t, 2*time.Second, func() error {
		if c.assigned() <= 0 {
			return errNotYet
		}
		return nil
	})
	if took > 2*s.interval {
		t.Errorf("the joining proxy's first assignment took %v, more than two reporting intervals (%v)", took, 2*s.interval)
	}
	t.Logf("joined: assignment after %v", time.Since(start))
	// The three converge on equal shares of what is assigned (the budget, unless a
	// loaded machine put the counter behind its pace and the clamp lowered it).
	var before float64
	eventually(t, 10*s.interval, func() error {
		x, y := c.assigned(), a.assigned()+b.assigned()
		if before = min(x+y, s.budget()); x < 0.25*before || y > 0.8*before {
			return fmt.Errorf("joiner's share %v, the others' %v, of %v", x, y, s.budget())
		}
		return nil
	})
	c.stop()
	start = time.Now()
	took = eventually(t, 2*time.Second, func() error {
		if sum := a.assigned() + b.assigned(); sum < 0.9*before {
			return fmt.Errorf("after the leave: %v of the %v the three had", sum, before)
		}
		return nil
	})
	t.Logf("left: share freed after %v", took)
	if took > ttl {
		t.Errorf("the share of the proxy that left came back after %v, more than one TTL (%v)", took, ttl)
		for _, p := range []*proxy{a, b, c} {
			p.mu.Lock()
			t.Logf("%s (left at %d.%03d): %v", p.name, start.Unix()%100, start.Nanosecond()/1e6, p.trace)
			p.mu.Unlock()
		}
	}
}

// TestJoinAndLeave on one instance.
func TestJoinAndLeave(t *testing.T) {
	t.Parallel()
	// In a synctest bubble: its intervals and TTLs are the bubble's time, which no load stretches.
	synctest.Test(t, func(t *testing.T) {
		s := testScale()
		st := s.setup()
		st.opts.ReportingInterval = s.interval
		st.inMemory = true
		in := startInstance(t, memStore(t), st, "")
		a := newProxy("a", "web", search, 1000, s.interval, s.windowMS, in.addr)
		b := newProxy("b", "web", search, 1000, s.interval, s.windowMS, in.addr)
		a.start(t)
		b.start(t)
		joinAndLeave(t, s, in.addr, a, b)
	})
}

// TestTwoInstancesOneRedis: the proxies spread over two Leash instances sharing one
// Redis divide the limit as if on one (the demand entries are in the store), and a
// proxy joining or leaving on one instance moves the shares of the other's proxies.
func TestTwoInstancesOneRedis(t *testing.T) {
	t.Parallel()
	s := testScale()
	st := s.setup()
	st.opts.ReportingInterval = s.interval
	stores := redisStores(t, 2)
	one := startInstance(t, stores[0], st, "")
	two := startInstance(t, stores[1], st, "")
	light := newProxy("light", "web", search, 10, s.interval, s.windowMS, one.addr)
	mid := newProxy("mid", "web", search, 100, s.interval, s.windowMS, two.addr)
	heavy := newProxy("heavy", "web", search, 1000, s.interval, s.windowMS, one.addr)
	for _, p := range []*proxy{light, mid, heavy} {
		p.start(t)
	}
	first := measure(s, s.windows)
	checkTotal(t, s, first, light, mid, heavy)
	// Windows on the wall clock (Redis keeps it): on a loaded machine a report or an
	// assignment can come a reporting interval late, which costs the light proxy a few
	// requests at a window's start. A light proxy the heavy ones crowded out would get
	// a third of the limit's share or less; TestThreeProxiesShareOneLimit holds the
	// 90 % bound in a bubble's time.
	for w := first; w < first+int64(s.windows); w++ {
		if l := light.windows()[w]; l < 10*s.windowMS/1000*3/4 {
			t.Errorf("window %d: the light proxy admitted %d", w-first, l)
		}
	}
	light.stop() // a and b: mid on two, heavy on one; the joiner on two
	joinAndLeave(t, s, two.addr, mid, heavy)
}

// TestRestartUnderLoad: an instance (on Redis) killed under load and started again on
// its address: the proxies keep enforcing their last assignments meanwhile, reconnect,
// report what they admitted in between, and the total per window stays within the bound.
func TestRestartUnderLoad(t *testing.T) {
	t.Parallel()
	s := testScale()
	st := s.setup()
	st.opts.ReportingInterval = s.interval
	stores := redisStores(t, 2)
	in := startInstance(t, stores[0], st, "")
	ps := []*proxy{
		newProxy("light", "web", search, 10, s.interval, s.windowMS, in.addr),
		newProxy("mid", "web", search, 100, s.interval, s.windowMS, in.addr),
		newProxy("heavy", "web", search, 1000, s.interval, s.windowMS, in.addr),
	}
	for _, p := range ps {
		p.start(t)
	}
	time.Sleep(10 * s.interval)
	first := waitWindowStart(s.windowMS) // warm-up done
	time.Sleep(time.Duration(s.windowMS/3) * time.Millisecond)
	before := ps[2].windows()[first]
	rate := ps[2].assigned()
	in.kill()
	// Down for well under the assignments' TTL (3 intervals), so the proxies are back
	// before the demand entries they left expire (a longer outage: spec §14.4's bound).
	down := s.interval
	time.Sleep(down)
	during := ps[2].windows()[first] - before
	// Enforcing the last assignment: about its rate, neither nothing nor everything.
	if want := rate * down.Seconds(); float64(during) < 0.3*want || float64(during) > 2*want+3 {
		t.Errorf("while the instance was down the heavy proxy admitted %d, want about %.0f", during, want)
	}
	again := startInstance(t, stores[1], st, in.addr)
	eventually(t, 2*time.Second, func() error {
		for _, p := range ps {
			p.mu.Lock()
			n := p.assignedN
			p.mu.Unlock()
			if n < 2 {
				return fmt.Errorf("%s not reassigned", p.name)
			}
		}
		return nil
	})
	_ = again
	time.Sleep(time.Until(time.UnixMilli((first + int64(s.windows)) * s.windowMS).Add(50 * time.Millisecond)))
	checkTotal(t, s, first, ps...)
}

// TestEdgesShareOneCounter: RLQS reports, RateLimitService calls and /v1/limit checks
// on the same counter see each other's usage (spec §14.3).
func TestEdgesShareOneCounter(t *testing.T) {
	t.Parallel()
	// In a synctest bubble: waiting out a reply that must not come takes no wall time.
	synctest.Test(t, func(t *testing.T) {
		st := setup{descriptors: `
domain: web
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 100}
`, domains: map[string]string{"web": "acme"}}
		st.inMemory = true
		in := startInstance(t, memStore(t), st, "")
		bob := map[string]string{"user": "bob"}
		r := openRaw(t, in.addr)
		r.send("web", usage(bob, 30, 0))
		if a := r.recv(2 * time.Second); a.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket() == nil {
			t.Fatalf("first assignment: %v", a)
		}
		conn, err := grpc.NewClient(in.addr, dialOptions(in.addr)...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rlsClient := rlsv3.NewRateLimitServiceClient(conn)
		ask := func() *rlsv3.RateLimitResponse_DescriptorStatus {
			t.Helper()
			resp, err := rlsClient.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "web", Descriptors: []*rlcommon.RateLimitDescriptor{
				{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: "bob"}}}}})
			if err != nil {
				t.Fatal(err)
			}
			return resp.Statuses[0]
		}
		if got := ask(); got.Code != rlsv3.RateLimitResponse_OK || got.LimitRemaining != 69 {
			t.Fatalf("RLS after the RLQS report: %v", got)
		}
		// The /v1/limit check of the same counter: namespace = domain, key = the counter key.
		acct, _ := in.eng.Accounts.Account("acme")
		chk := testkit.Check{Namespace: "web", Key: domains.CounterKey([]descriptors.Entry{{Key: "user", Value: "bob"}}), Algorithm: testkit.Ptr("fixed_window"),
			Limit: testkit.Ptr(int64(100)), WindowMS: testkit.Ptr(int64(60_000)), Cost: testkit.Ptr(int64(68))}
		if d, err := chk.Do(context.Background(), in.eng, acct); err != nil || !d.Allowed || d.Remaining != 1 {
			t.Fatalf("/v1 check: %+v %v", d, err)
		}
		// RLQS sees it: the next report's share is what remains (1 request over the minute).
		r.send("", usage(bob, 1, 0))
		a := r.recv(2 * time.Second)
		if got := a.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy(); got.GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL && rlqs.RateOf(got) > 1 {
			t.Fatalf("assignment after the counter filled: %v", got)
		}
		if got := ask(); got.Code != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("RLS after all three spent the counter: %v", got)
		}
		// Usage: 1 per request on every edge. RLQS reported 31 requests (and 4 denied ones
		// below), RLS decided 2 descriptors (1 over), /v1 one check.
		r.send("", usage(bob, 0, 4))
		_ = r.recv(300 * time.Millisecond)
		if err := in.eng.Usage.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		st2, err := in.eng.Usage.Stats(context.Background(), acct, "web")
		if err != nil {
			t.Fatal(err)
		}
		if st2.Total != 38 || st2.Blocked != 5 {
			t.Fatalf("usage total %d blocked %d, want 38 and 5", st2.Total, st2.Blocked)
		}
	})
}

func action(t *testing.T, resp *rlqsv3.RateLimitQuotaResponse, bucket map[string]string) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	t.Helper()
	for _, a := range resp.GetBucketAction() {
		if fmt.Sprint(a.GetBucketId().GetBucket()) == fmt.Sprint(bucket) {
			return a
		}
	}
	t.Fatalf("no action for %v in %v", bucket, resp)
	return nil
}

// TestAssignmentKinds: unlimited, a limit of 0, no rule, the hard cap (spec §14.2), and
// abandon_action for a bucket whose rule a reload removed (spec §14.5).
func TestAssignmentKinds(t *testing.T) {
	t.Parallel()
	// In a synctest bubble: its waits for replies are the bubble's time.
	synctest.Test(t, func(t *testing.T) {
		s := testScale()
		st := s.setup()
		st.domains["capped"] = "capped"
		st.inMemory = true
		in := startInstance(t, memStore(t), st, "")
		r := openRaw(t, in.addr)
		open, closed, none := map[string]string{"api": "open"}, map[string]string{"api": "closed"}, map[string]string{"x": "y"}
		r.send("web", usage(search, 0, 0), usage(open, 5, 0), usage(closed, 0, 5), usage(none, 5, 0))
		resp := r.recv(2 * time.Second)
		for b, want := range map[*map[string]string]string{&open: "ALLOW_ALL", &closed: "DENY_ALL", &none: "ALLOW_ALL"} {
			if got := action(t, resp, *b).GetQuotaAssignmentAction().GetRateLimitStrategy().GetBlanketRule().String(); got != want {
				t.Errorf("%v: %s, want %s", *b, got, want)
			}
		}
		if tb := action(t, resp, search).GetQuotaAssignmentAction(); tb.GetRateLimitStrategy().GetTokenBucket() == nil || tb.GetAssignmentTimeToLive().AsDuration() <= 0 {
			t.Errorf("search: %v", tb)
		}
		// A reload drops the search descriptor: its next report is answered with abandon,
		// and a new subscription gets the fallback (no namespace rule: ALLOW_ALL).
		cfg := *in.rls.Config()
		cfg.Descriptors = loadDescriptors(t, "domain: web\ndescriptors:\n  - key: api\n    value: open\n    rate_limit: {unlimited: true}\n")
		in.rls.SetConfig(&cfg)
		r.send("", usage(search, 3, 0))
		if a := action(t, r.recv(2*time.Second), search); a.GetAbandonAction() == nil {
			t.Fatalf("after the reload: %v", a)
		}
		r.send("", usage(search, 1, 0))
		if a := action(t, r.recv(2*time.Second), search); a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetBlanketRule() != typev3.RateLimitStrategy_ALLOW_ALL {
			t.Fatalf("resubscribed: %v", a)
		}

		// The hard cap: every bucket of the account DENY_ALL.
		c := openRaw(t, in.addr)
		c.send("capped", usage(none, 0, 1_000_000))
		if a := action(t, c.recv(2*time.Second), none); a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetBlanketRule() != typev3.RateLimitStrategy_ALLOW_ALL {
			t.Fatalf("under the cap: %v", a)
		}
		c.send("", usage(none, 1, 0))
		if a := action(t, c.recv(2*time.Second), none); a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL {
			t.Fatalf("over the cap: %v", a)
		}
	})
}

// TestBadInput: bad streams end with a clear status; bad bucket entries are ignored and
// the stream goes on; a flood of distinct buckets stops at the bounds (spec §14.6).
func TestBadInput(t *testing.T) {
	t.Parallel()
	// In a synctest bubble: waiting out replies that must not come takes no wall time.
	synctest.Test(t, func(t *testing.T) {
		s := testScale()
		st := s.setup()
		st.opts.MaxBucketsPerStream, st.opts.MaxBucketsPerAccount = 20, 30
		var buckets atomic.Int64 // tracked by the service
		st.opts.Counters.Buckets = func(d int) { buckets.Add(int64(d)) }
		st.inMemory = true
		in := startInstance(t, memStore(t), st, "")
		for _, tc := range []struct {
			name, domain string
			code         codes.Code
		}{
			{"no domain", "", codes.InvalidArgument},
			{"not a namespace", "-bad", codes.InvalidArgument},
			{"unmapped", "nowhere", codes.FailedPrecondition},
		} {
			r := openRaw(t, in.addr)
			r.send(tc.domain, usage(search, 1, 0))
			if err := r.ended(); status.Code(err) != tc.code {
				t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
			}
		}

		r := openRaw(t, in.addr)
		wide := map[string]string{}
		for i := range 33 {
			wide[strconv.Itoa(i)] = "v"
		}
		r.send("web",
			&rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{},        // no bucket id
			usage(map[string]string{}, 1, 0),                             // an empty one
			usage(map[string]string{"api": "neg"}, math.MaxUint64, 0),    // a negative count, as sent by a careless client
			usage(map[string]string{"api": "neg2"}, 0, math.MaxUint64-1), // the same, denied
			usage(wide, 1, 0),   // too many entries
			usage(search, 1, 0)) // the one good entry
		resp := r.recv(2 * time.Second)
		if len(resp.GetBucketAction()) != 1 || action(t, resp, search) == nil {
			t.Fatalf("bad entries answered: %v", resp)
		}
		// The stream is still up and serves the good bucket.
		r.send("", usage(search, 0, 0), &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{})
		_ = r.recv(300 * time.Millisecond)

		// A flood: each stream tracks at most 20 buckets, the account 30 on this instance.
		flood := func(r *raw, from int) int {
			var us []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage
			for i := range 50 {
				us = append(us, usage(map[string]string{"user": strconv.Itoa(from + i)}, 1, 0))
			}
			r.send("", us...)
			n := 0
			for {
				m := r.recv(500 * time.Millisecond)
				if m == nil {
					return n
				}
				n += len(m.GetBucketAction())
			}
		}
		if n := flood(r, 0); n != 19 { // search is the stream's first bucket
			t.Errorf("the first stream got %d assignments for 50 new buckets, want 19", n)
		}
		r2 := openRaw(t, in.addr)
		r2.send("web")
		if n := flood(r2, 100); n != 10 {
			t.Errorf("the second stream got %d, want the account's remaining 10", n)
		}
		r.stop() // its 20 buckets are released
		testkit.Eventually(t, "the ended stream's buckets released", 5*time.Second, func() bool { return buckets.Load() == 10 })
		r3 := openRaw(t, in.addr)
		r3.send("web")
		if n := flood(r3, 200); n != 20 {
			t.Errorf("after the first stream ended a new one got %d, want 20", n)
		}
	})
}

// TestServedBesideRateLimitService: one listener serves both services; health reports
// the quota service and reflection lists it (spec §14.1).
func TestServedBesideRateLimitService(t *testing.T) {
	t.Parallel()
	in := startInstance(t, memStore(t), testScale().setup(), "")
	conn, err := grpc.NewClient(in.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: rlqs.ServiceName})
	if err != nil || st.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health of %s: %v %v", rlqs.ServiceName, st, err)
	}
	names := leashproc.ReflectedServices(t, conn)
	if !names[rlqs.ServiceName] || !names[rls.ServiceName] {
		t.Errorf("reflection lists %v", names)
	}
}

// TestLostInstanceFreesShare: when an instance goes away with its streams (its demand
// entries left in the store) and its proxy does not come back, the other instance's proxy
// gets the whole budget once the entries expire: within one TTL, plus its next report.
func TestLostInstanceFreesShare(t *testing.T) {
	t.Parallel()
	s := testScale()
	st := s.setup()
	st.opts.ReportingInterval = s.interval
	stores := redisStores(t, 2)
	one := startInstance(t, stores[0], st, "")
	two := startInstance(t, stores[1], st, "")
	a := newProxy("a", "web", search, 1000, s.interval, s.windowMS, one.addr)
	b := newProxy("b", "web", search, 1000, s.interval, s.windowMS, two.addr)
	a.start(t)
	b.start(t)
	time.Sleep(5 * s.interval)
	waitWindowStart(s.windowMS)
	eventually(t, 2*time.Second, func() error {
		if x := a.assigned(); x <= 0 || x > 0.6*s.budget() {
			return fmt.Errorf("a's share %v of %v", x, s.budget())
		}
		return nil
	})
	two.kill()
	b.stop()
	ttl := rlqs.DefaultTTLIntervals * s.interval
	took := eventually(t, 2*time.Second, func() error {
		if x := a.assigned(); x < 0.9*s.budget() {
			return fmt.Errorf("a's share %v of %v", x, s.budget())
		}
		return nil
	})
	t.Logf("the lost instance's share came back after %v", took)
	// The entries expire one TTL after the lost stream's last report (up to an interval
	// before the loss), then a learns it at its next report (up to an interval later).
	if took > ttl+2*s.interval {
		t.Errorf("the lost instance's share came back after %v, more than one TTL (%v) and a report", took, ttl)
	}
}
