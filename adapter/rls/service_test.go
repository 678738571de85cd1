package rls_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leashd/leash/adapter/rls"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/metrics"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit/storetest"
)

// edgeConfig exercises every matching rule; the comments say what each descriptor is for.
const edgeConfig = `
domain: edge
descriptors:
  # bare key: one counter per user value
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  # exact value beats the bare key
  - key: user
    value: vip
    rate_limit: {unit: minute, requests_per_unit: 5}
  # wildcard: one counter per path
  - key: path
    value: "/api/*"
    rate_limit: {unit: second, requests_per_unit: 2}
  # wildcard with share_threshold: one counter for every matching path
  - key: path
    value: "/shared/*"
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 2}
  # nested: only tenant+user has a limit
  - key: tenant
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: internal
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: multi
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: minute, requests_per_unit: 3}
  - key: tenseconds
    rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: 10}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket}
  - key: route
    value: old
    rate_limit: {name: old_limit, unit: minute, requests_per_unit: 1}
  - key: route2
    rate_limit:
      unit: minute
      requests_per_unit: 100
      replaces: [{name: old_limit}]
`

// flakyStore fails every operation while down is set.
type flakyStore struct {
	engine.Store
	down   atomic.Bool
	spends atomic.Int64 // Spend calls
}

var errDown = errors.New("store down (test)")

func (f *flakyStore) SpendAll(ctx context.Context, s []engine.Spend, out []engine.Decision) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.SpendAll(ctx, s, out)
}

func (f *flakyStore) Spend(ctx context.Context, sp engine.Spend) (engine.Decision, error) {
	f.spends.Add(1)
	if f.down.Load() {
		return engine.Decision{}, errDown
	}
	return f.Store.Spend(ctx, sp)
}

func (f *flakyStore) Rules(ctx context.Context, account, ns string) (engine.Rules, error) {
	if f.down.Load() {
		return engine.Rules{}, errDown
	}
	return f.Store.Rules(ctx, account, ns)
}

func (f *flakyStore) Ping(ctx context.Context) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.Ping(ctx)
}

type harness struct {
	t      testing.TB
	clock  *testkit.FakeClock
	store  *flakyStore
	eng    *wiring.Engine
	acct   *engine.Account
	svc    *rls.Service
	cfg    *domains.Config
	client rlsv3.RateLimitServiceClient
	conn   *grpc.ClientConn
	shadow atomic.Int64
	// globalShadow counts requests answered OK by the global shadow mode.
	globalShadow atomic.Int64
}

// newHarness serves the descriptor files (name → YAML) over a real loopback listener,
// with domain "edge" (and any other domain of the files) on account "acme".
func newHarness(t testing.TB, plan engine.Plan, files map[string]string) *harness {
	return newHarnessWith(t, plan, files, harnessOptions{})
}

// harnessOptions change a harness: the adapter's and the engine's options, and the
// clock (RealClock: the memory store's real clock instead of the fake one).
type harnessOptions struct {
	adapter   func(*rls.Options)
	engine    wiring.Options
	realClock bool
	// inMemory serves on an in-memory listener (bufconn) instead of a loopback port: for a
	// test in a synctest bubble, where a connection on a socket would hold the bubble's
	// time still.
	inMemory bool
}

func newHarnessWith(t testing.TB, plan engine.Plan, files map[string]string, o harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, clock: testkit.NewFakeClock(time.UnixMilli(storetest.BaseMS))}
	mo := memstore.Options{Clock: h.clock}
	if o.realClock {
		h.clock, mo.Clock = nil, nil
	}
	ms := memstore.New(mo)
	t.Cleanup(func() { _ = ms.Close() })
	h.store = &flakyStore{Store: ms}
	dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: plan}})
	if err != nil {
		t.Fatal(err)
	}
	h.acct, _ = dir.Account("acme")
	h.eng = wiring.New(engine.RolesOf(h.store), dir, o.engine)
	cfg := &domains.Config{Routing: domains.Routing{Domains: map[string]string{"edge": "acme", "other": "acme"}}}
	if len(files) > 0 {
		cfg.Descriptors = loadFiles(t, files)
	}
	if err := cfg.Validate(dir); err != nil && !strings.Contains(err.Error(), "maps to no account") {
		t.Fatal(err)
	}
	h.cfg = cfg
	opts := rls.Options{
		Engine: h.eng, Accounts: h.eng.Accounts.Account, ResponseHeaders: true,
		Counters: rls.Counters{ShadowDenial: func() { h.shadow.Add(1) }, GlobalShadow: func() { h.globalShadow.Add(1) }},
	}
	if o.adapter != nil {
		o.adapter(&opts)
	}
	h.svc = rls.NewService(cfg, opts)
	srv, _ := rls.NewServer(h.svc, nil)
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	var ln net.Listener
	if o.inMemory {
		mem := bufconn.Listen(1 << 20)
		ln = mem
		dial = append(dial, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return mem.DialContext(ctx) }))
	} else if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	target := ln.Addr().String()
	if o.inMemory {
		target = "passthrough:///bufconn"
	}
	h.conn, err = grpc.NewClient(target, dial...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.conn.Close() })
	h.client = rlsv3.NewRateLimitServiceClient(h.conn)
	return h
}

func loadFiles(t testing.TB, files map[string]string) *descriptors.Config {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := descriptors.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func scalePlan() engine.Plan { return engine.BuiltinPlans()["scale"] }

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (h *harness) call(req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	h.t.Helper()
	if req.Domain == "" {
		req.Domain = "edge"
	}
	resp, err := h.client.ShouldRateLimit(context.Background(), req)
	if err != nil {
		h.t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	return resp
}

// one sends one descriptor and returns its status.
func (h *harness) one(d *rlcommon.RateLimitDescriptor) *rlsv3.RateLimitResponse_DescriptorStatus {
	h.t.Helper()
	return h.call(&rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{d}}).Statuses[0]
}

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// want checks a status: its code, and for a limited one the limit and remaining; limit
// 0 means "no current_limit".
func (h *harness) want(st *rlsv3.RateLimitResponse_DescriptorStatus, code rlsv3.RateLimitResponse_Code, limit uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, remaining uint32) {
	h.t.Helper()
	if st.GetCode() != code {
		h.t.Errorf("code = %v, want %v (status %v)", st.GetCode(), code, st)
	}
	if limit == 0 {
		if st.GetCurrentLimit() != nil {
			h.t.Errorf("current_limit = %v, want none", st.GetCurrentLimit())
		}
		return
	}
	cl := st.GetCurrentLimit()
	if cl.GetRequestsPerUnit() != limit || cl.GetUnit() != unit || st.GetLimitRemaining() != remaining {
		h.t.Errorf("limit %d/%v remaining %d, want %d/%v remaining %d", cl.GetRequestsPerUnit(), cl.GetUnit(), st.GetLimitRemaining(), limit, unit, remaining)
	}
}

const (
	second = rlsv3.RateLimitResponse_RateLimit_SECOND
	minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour   = rlsv3.RateLimitResponse_RateLimit_HOUR
)

func TestMatching(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	// Bare key: per value, exactly 3 per minute.
	for i := range 3 {
		h.want(h.one(desc("user", "alice")), ok, 3, minute, uint32(2-i))
	}
	h.want(h.one(desc("user", "alice")), over, 3, minute, 0)
	h.want(h.one(desc("user", "bob")), ok, 3, minute, 2) // another value, another counter
	// Exact value wins over the bare key.
	h.want(h.one(desc("user", "vip")), ok, 5, minute, 4)
	// Wildcard: each path its own counter.
	h.want(h.one(desc("path", "/api/a")), ok, 2, second, 1)
	h.want(h.one(desc("path", "/api/a")), ok, 2, second, 0)
	h.want(h.one(desc("path", "/api/a")), over, 2, second, 0)
	h.want(h.one(desc("path", "/api/b")), ok, 2, second, 1)
	// share_threshold: all matching paths share one counter.
	h.want(h.one(desc("path", "/shared/a")), ok, 2, second, 1)
	h.want(h.one(desc("path", "/shared/b")), ok, 2, second, 0)
	h.want(h.one(desc("path", "/shared/c")), over, 2, second, 0)
	// A path no rule matches (and no namespace rule): OK, no limit.
	h.want(h.one(desc("path", "/other")), ok, 0, 0, 0)
	// Depth must match: shorter and longer requests do not match.
	h.want(h.one(desc("tenant", "t1")), ok, 0, 0, 0)
	h.want(h.one(desc("tenant", "t1", "user", "u")), ok, 2, hour, 1)
	h.want(h.one(desc("user", "alice", "extra", "x")), ok, 0, 0, 0)
	// A descriptor with no entries is OK.
	h.want(h.one(&rlcommon.RateLimitDescriptor{}), ok, 0, 0, 0)
}

func TestUnlimitedShadowAndBlocked(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	for range 5 {
		st := h.one(desc("internal", "svc"))
		h.want(st, ok, 0, 0, 0)
		if st.GetLimitRemaining() != 4294967295 {
			t.Fatalf("unlimited limit_remaining = %d", st.GetLimitRemaining())
		}
	}
	// shadow_mode: the second request is over its limit but answered OK and counted in a metric.
	h.want(h.one(desc("shadow", "x")), ok, 1, minute, 0)
	resp := h.call(&rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{desc("shadow", "x")}})
	if resp.OverallCode != ok || resp.Statuses[0].Code != ok {
		t.Fatalf("shadow mode answered %v", resp)
	}
	if h.shadow.Load() != 1 {
		t.Fatalf("shadow denials = %d, want 1", h.shadow.Load())
	}
	// requests_per_unit 0 blocks everything.
	resp = h.call(&rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{desc("blocked", "x")}})
	if resp.OverallCode != over {
		t.Fatalf("blocked: %v", resp)
	}
	if st := resp.Statuses[0]; st.Code != over || st.CurrentLimit.GetUnit() != minute || st.CurrentLimit.GetRequestsPerUnit() != 0 {
		t.Fatalf("blocked status = %v", st)
	}
}

func TestRateLimitsAllOrNothing(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	m := desc("multi", "m")
	h.want(h.one(m), ok, 2, second, 1)
	h.want(h.one(m), ok, 2, second, 0)
	// The per-second limit denies; the per-minute counter is not spent.
	h.want(h.one(m), over, 2, second, 0)
	h.clock.Advance(time.Second)
	// Minute: 2 of 3 used; one more fits, and then the minute limit is the most restrictive.
	h.want(h.one(m), ok, 3, minute, 0)
	h.want(h.one(m), over, 3, minute, 0)
}

func TestUnitMultiplierAndAlgorithm(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	st := h.one(desc("tenseconds", "x"))
	h.want(st, ok, 1, second, 0)
	if got := st.GetDurationUntilReset().AsDuration(); got != 10*time.Second {
		t.Fatalf("duration_until_reset = %v, want 10s (BaseMS is a multiple of 10 s)", got)
	}
	h.want(h.one(desc("tenseconds", "x")), over, 1, second, 0)
	// token_bucket: 10 per second refills one token every 100 ms.
	for i := range 10 {
		h.want(h.one(desc("bucket", "b")), ok, 10, second, uint32(9-i))
	}
	h.want(h.one(desc("bucket", "b")), over, 10, second, 0)
	h.clock.Advance(100 * time.Millisecond)
	h.want(h.one(desc("bucket", "b")), ok, 10, second, 0)
}

func TestReplaces(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	both := &rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{desc("route", "old"), desc("route2", "new")}}
	for range 3 {
		resp := h.call(both)
		h.want(resp.Statuses[0], ok, 0, 0, 0) // replaced: no limit, nothing spent
		if resp.OverallCode != ok {
			t.Fatalf("replaced: %v", resp)
		}
	}
	// Alone, the old limit applies and its counter was never spent.
	h.want(h.one(desc("route", "old")), ok, 1, minute, 0)
	h.want(h.one(desc("route", "old")), over, 1, minute, 0)
}

func TestHitsAddend(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	// Request-level hits_addend.
	st := h.call(&rlsv3.RateLimitRequest{HitsAddend: 2, Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "carol")}}).Statuses[0]
	h.want(st, ok, 3, minute, 1)
	// Per-descriptor 0 looks without spending, and overrides the request's.
	look := desc("user", "carol")
	look.HitsAddend = wrapperspb.UInt64(0)
	h.want(h.call(&rlsv3.RateLimitRequest{HitsAddend: 3, Descriptors: []*rlcommon.RateLimitDescriptor{look}}).Statuses[0], ok, 3, minute, 1)
	// More than the limit: over with nothing remaining, as the peer reports; nothing spent.
	big := desc("user", "carol")
	big.HitsAddend = wrapperspb.UInt64(5)
	h.want(h.call(&rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{big}}).Statuses[0], over, 3, minute, 0)
	h.want(h.one(desc("user", "carol")), ok, 3, minute, 0)
	h.want(h.one(desc("user", "carol")), over, 3, minute, 0)
}

// TestFixedWindowReplies: on the Envoy endpoint a fixed window's duration_until_reset is
// the time to the end of the current window whatever was spent, and an OVER_LIMIT
// descriptor has no remaining (spec §9.7), as the peer answers (its
// src/limiter/base_limiter.go). The clock is 25 s into a minute.
func TestFixedWindowReplies(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	h.clock.Advance(25 * time.Second)
	toEnd := 35 * time.Second // BaseMS is a whole minute
	reset := func(st *rlsv3.RateLimitResponse_DescriptorStatus) time.Duration {
		t.Helper()
		return st.GetDurationUntilReset().AsDuration()
	}
	look := desc("user", "frank")
	look.HitsAddend = wrapperspb.UInt64(0)
	big := desc("user", "frank")
	big.HitsAddend = wrapperspb.UInt64(11)
	cases := []struct {
		name      string
		d         *rlcommon.RateLimitDescriptor
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
	}{
		{"nothing spent yet, a look", look, ok, 3},
		{"hits_addend above the limit", big, over, 0},
		{"one spent", desc("user", "frank"), ok, 2},
		{"a look after spending", look, ok, 2},
		{"above the limit after spending", big, over, 0},
	}
	for _, c := range cases {
		st := h.one(c.d)
		h.want(st, c.code, 3, minute, c.remaining)
		if got := reset(st); got != toEnd {
			t.Errorf("%s: duration_until_reset = %v, want %v (the end of the minute)", c.name, got, toEnd)
		}
	}
	// Denied by the count: 0 remaining, the window's end.
	h.one(desc("user", "frank"))
	h.one(desc("user", "frank"))
	st := h.one(desc("user", "frank"))
	h.want(st, over, 3, minute, 0)
	if got := reset(st); got != toEnd {
		t.Errorf("over by count: duration_until_reset = %v, want %v", got, toEnd)
	}
}

// TestHeaderDescriptorTieBreak: the RateLimit-* headers describe the descriptor with the
// least remaining; among equals an over-limit one, then the longer reset, then the first
// (spec §9.7).
func TestHeaderDescriptorTieBreak(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	h.clock.Advance(500 * time.Millisecond)
	// user (3/minute) and path (2/second) both used up: both over with 0 left.
	for range 3 {
		h.one(desc("user", "gina"))
	}
	h.one(desc("path", "/api/x"))
	h.one(desc("path", "/api/x"))
	resp := h.call(&rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "gina"), desc("path", "/api/x")}})
	hdr := headerMap(resp.ResponseHeadersToAdd)
	// Both over with 0 left: the longer reset (the minute's) wins.
	want := map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "0", "RateLimit-Reset": "60", "Retry-After": "60"}
	for k, v := range want {
		if hdr[k] != v {
			t.Errorf("header %s = %q, want %q (all: %v)", k, hdr[k], v, hdr)
		}
	}
	// Equal remaining, one over and one allowed: the over-limit one.
	h2 := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	h2.one(desc("path", "/api/y"))
	h2.one(desc("path", "/api/y")) // path: 0 left, next is over
	h2.one(desc("user", "hal"))
	h2.one(desc("user", "hal")) // user: 1 left, the request's spend takes it to 0
	resp = h2.call(&rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "hal"), desc("path", "/api/y")}})
	hdr = headerMap(resp.ResponseHeadersToAdd)
	if hdr["RateLimit-Limit"] != "2" || hdr["RateLimit-Remaining"] != "0" || hdr["Retry-After"] == "" {
		t.Errorf("equal remaining: headers = %v, want the over-limit path descriptor (limit 2)", hdr)
	}
}

func TestLimitOverride(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	// The override with the rule's unit shares the rule's counter (spec §9.5).
	h.want(h.one(desc("user", "dave")), ok, 3, minute, 2)
	h.want(h.one(desc("user", "dave")), ok, 3, minute, 1)
	o := desc("user", "dave")
	o.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE}
	h.want(h.one(o), over, 2, minute, 0)
	// An override applies to a descriptor no file matches, too.
	n := desc("nomatch", "x")
	n.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	h.want(h.one(n), ok, 1, hour, 0)
	h.want(h.one(n), over, 1, hour, 0)
}

func TestSeveralDescriptorsAndHeaders(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	h.one(desc("user", "erin"))
	resp := h.call(&rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{
		desc("user", "erin"), desc("user", "vip"), desc("blocked", "b"),
	}})
	if resp.OverallCode != over {
		t.Fatalf("overall = %v", resp.OverallCode)
	}
	// The allowed descriptors spent even though the request as a whole is over the limit.
	h.want(resp.Statuses[0], ok, 3, minute, 1)
	h.want(resp.Statuses[1], ok, 5, minute, 4)
	if st := resp.Statuses[2]; st.Code != over || st.CurrentLimit.GetRequestsPerUnit() != 0 {
		t.Fatalf("blocked status = %v", st)
	}
	hdr := headerMap(resp.ResponseHeadersToAdd)
	if hdr["RateLimit-Limit"] != "0" || hdr["RateLimit-Remaining"] != "0" || hdr["Retry-After"] == "" {
		t.Fatalf("headers = %v", hdr)
	}
	// All allowed: the most restrictive is the one with the fewest remaining; no Retry-After.
	resp = h.call(&rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "vip"), desc("user", "erin")}})
	hdr = headerMap(resp.ResponseHeadersToAdd)
	want := map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "0", "RateLimit-Reset": "60"}
	for k, v := range want {
		if hdr[k] != v {
			t.Errorf("header %s = %q, want %q (all: %v)", k, hdr[k], v, hdr)
		}
	}
	if _, ok := hdr["Retry-After"]; ok {
		t.Errorf("Retry-After on an allowed reply: %v", hdr)
	}
}

func headerMap(hs []*corev3.HeaderValue) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[h.GetKey()] = h.GetValue()
	}
	return m
}

func TestFallbackToNamespaceRule(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	d := desc("client", "c1")
	h.want(h.one(d), ok, 0, 0, 0)
	_, _, err := h.eng.Rules.Put(context.Background(), h.acct, "edge", &rules.RuleRequest{
		Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(60_000)),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.want(h.one(d), ok, 1, minute, 0)
	h.want(h.one(d), over, 1, minute, 0)
	// A configured descriptor is not affected by the rule.
	h.want(h.one(desc("user", "frank")), ok, 3, minute, 2)
}

// TestFallbackHonoursOverrides: an unmatched descriptor falls back to the namespace's rate
// rule as that rule applies to the descriptor's counter key (spec §9.5, §9.8, §6.7): an
// override on key "client=vip" (with its own window) and one on a two-entry key.
func TestFallbackHonoursOverrides(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	vip := domains.CounterKey([]descriptors.Entry{{Key: "client", Value: "vip"}})
	pair := domains.CounterKey([]descriptors.Entry{{Key: "client", Value: "a&b"}, {Key: "path", Value: "/x"}})
	if vip != "client=vip" || pair != "client=a%26b&path=/x" {
		t.Fatalf("counter keys %q, %q", vip, pair)
	}
	_, _, err := h.eng.Rules.Put(context.Background(), h.acct, "edge", &rules.RuleRequest{
		Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(60_000)),
		Overrides: []rules.OverrideRequest{
			{Key: &vip, Limit: testkit.Ptr(int64(3)), WindowMS: testkit.Ptr(int64(3_600_000))},
			{Key: &pair, Limit: testkit.Ptr(int64(2))},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, rem := range []uint32{2, 1, 0} {
		h.want(h.one(desc("client", "vip")), ok, 3, hour, rem)
	}
	h.want(h.one(desc("client", "vip")), over, 3, hour, 0)
	h.want(h.one(desc("client", "a&b", "path", "/x")), ok, 2, minute, 1)
	h.want(h.one(desc("client", "a&b", "path", "/x")), ok, 2, minute, 0)
	h.want(h.one(desc("client", "a&b", "path", "/x")), over, 2, minute, 0)
	// Any other key keeps the rule's limit.
	h.want(h.one(desc("client", "c1")), ok, 1, minute, 0)
	h.want(h.one(desc("client", "c1")), over, 1, minute, 0)
	// A descriptor's own limit override (Envoy's dynamic limit) still wins over the rule's.
	d := desc("client", "vip2")
	d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_SECOND}
	h.want(h.one(d), ok, 5, second, 4)
}

func TestSharesCounterWithV1Limit(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	// POST /v1/limit with namespace = domain, key = CounterKey, fixed_window, 60000 ms.
	key := domains.CounterKey([]descriptors.Entry{{Key: "user", Value: "gina"}})
	if key != "user=gina" {
		t.Fatalf("CounterKey = %q", key)
	}
	d, err := (testkit.Check{
		Namespace: "edge", Key: key, Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(3)), WindowMS: testkit.Ptr(int64(60_000)),
	}).Do(context.Background(), h.eng, h.acct)
	if err != nil || d.Remaining != 2 {
		t.Fatalf("Check = %+v, %v", d, err)
	}
	h.want(h.one(desc("user", "gina")), ok, 3, minute, 1)
}

func TestCounterKey(t *testing.T) {
	long := make([]byte, 600)
	for i := range long {
		long[i] = 'a'
	}
	tests := []struct {
		entries []descriptors.Entry
		want    string
	}{
		{[]descriptors.Entry{{Key: "remote_address", Value: "10.0.0.1"}}, "remote_address=10.0.0.1"},
		{[]descriptors.Entry{{Key: "user", Value: "alice"}, {Key: "path", Value: "/a&b=c%"}}, "user=alice&path=/a%26b%3Dc%25"},
		{[]descriptors.Entry{{Key: "k", Value: "tab\there\x7f"}}, "k=tab%09here%7F"},
		{[]descriptors.Entry{{Key: "k", Value: "caf\u00e9 \u0085 \xff"}}, "k=caf\u00e9 %C2%85 %FF"},
		{[]descriptors.Entry{{Key: "k", Value: ""}}, "k="},
		{[]descriptors.Entry{{Key: "k", Value: string(long)}}, "sha256:"},
	}
	for _, tc := range tests {
		got := domains.CounterKey(tc.entries)
		if tc.want == "sha256:" {
			if len(got) != 7+64 || got[:7] != "sha256:" {
				t.Errorf("long key = %q", got)
			}
		} else if got != tc.want {
			t.Errorf("CounterKey(%v) = %q, want %q", tc.entries, got, tc.want)
		}
		if !engine.ValidKey(got) {
			t.Errorf("CounterKey(%v) = %q is not a valid /v1 key", tc.entries, got)
		}
	}
}

func TestBadRequests(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	ctx := context.Background()
	for name, req := range map[string]*rlsv3.RateLimitRequest{
		"empty domain":   {Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "a")}},
		"no descriptors": {Domain: "edge"},
	} {
		_, err := h.client.ShouldRateLimit(ctx, req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want InvalidArgument", name, err)
		}
	}
	// A domain in no file and mapped to no account: OK, counted nowhere.
	resp := h.call(&rlsv3.RateLimitRequest{Domain: "unmapped", Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "a")}})
	if resp.OverallCode != ok || len(resp.Statuses) != 1 || resp.Statuses[0].Code != ok {
		t.Fatalf("unmapped domain: %v", resp)
	}
}

func TestHardCap(t *testing.T) {
	plan := scalePlan()
	plan.HardCap = testkit.Ptr(int64(2))
	m := metrics.New()
	h := newHarnessWith(t, plan, map[string]string{"edge.yaml": edgeConfig}, harnessOptions{
		engine: wiring.Options{Observer: m.Observer(nil, 0.8)},
	})
	h.one(desc("user", "a"))
	h.one(desc("unmatched", "x")) // unmatched descriptors count too (spec §9.9)
	resp := h.call(&rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "a"), desc("internal", "i")}})
	if resp.OverallCode != over || resp.Statuses[0].Code != over || resp.Statuses[1].Code != over {
		t.Fatalf("over the hard cap: %v", resp)
	}
	// 2027-01-16 00:00 UTC to 2027-02-01 00:00 UTC.
	if got := headerMap(resp.ResponseHeadersToAdd)["Retry-After"]; got != "1382400" {
		t.Fatalf("Retry-After = %q, want 1382400", got)
	}
	// The engine counts the refusal, at the envoy edge (spec §12.2).
	var capped []string
	for _, line := range strings.Split(scrape(t, m), "\n") {
		if strings.HasPrefix(line, "leash_hard_cap_denials_total{") {
			capped = append(capped, line)
		}
	}
	if want := `leash_hard_cap_denials_total{account="acme",endpoint="envoy"} 1`; len(capped) != 1 || capped[0] != want {
		t.Fatalf("hard-cap refusals counted %q, want %q", capped, want)
	}
}

func TestStoreFailureAndHealth(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	hc := healthpb.NewHealthClient(h.conn)
	ctx := context.Background()
	st, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: rls.ServiceName})
	if err != nil || st.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v", st, err)
	}
	h.store.down.Store(true)
	for _, d := range []*rlcommon.RateLimitDescriptor{desc("user", "a"), desc("client", "fallback")} {
		start := time.Now()
		_, err := h.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{d}})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("store down: got %v, want Unavailable", err)
		}
		if msg := status.Convert(err).Message(); msg != "rate-limit store unavailable" {
			t.Fatalf("message leaks detail: %q", msg)
		}
		if time.Since(start) > time.Second {
			t.Fatalf("took %v", time.Since(start))
		}
	}
	// Health follows the store.
	srv, hs := rls.NewServer(h.svc, nil)
	defer srv.Stop()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rls.WatchHealth(wctx, hs, h.eng.Ping, 10*time.Millisecond, 100*time.Millisecond, discardLogger())
	}()
	waitHealth(t, hs, healthpb.HealthCheckResponse_NOT_SERVING)
	h.store.down.Store(false)
	waitHealth(t, hs, healthpb.HealthCheckResponse_SERVING)
	cancel()
	<-done
	h.want(h.one(desc("user", "a")), ok, 3, minute, 2)
}

func waitHealth(t *testing.T, hs interface {
	Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error)
}, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	testkit.Eventually(t, "health "+want.String(), 2*time.Second, func() bool {
		st, err := hs.Check(context.Background(), &healthpb.HealthCheckRequest{Service: rls.ServiceName})
		return err == nil && st.Status == want
	})
}

func TestReflectionListsService(t *testing.T) {
	h := newHarness(t, scalePlan(), nil)
	names := leashproc.ReflectedServices(t, h.conn)
	for _, want := range []string{rls.ServiceName, "grpc.health.v1.Health"} {
		if !names[want] {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
}

func TestValidate(t *testing.T) {
	free := engine.BuiltinPlans()["free"]
	dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: free}})
	if err != nil {
		t.Fatal(err)
	}
	tb := loadFiles(t, map[string]string{"tb.yaml": "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket}\n"})
	tests := []struct {
		name string
		cfg  domains.Config
		want string // part of the error; "" for none
	}{
		{"mapped", domains.Config{Descriptors: tb, Routing: domains.Routing{DefaultAccount: "acme"}}, "token_bucket is not available on plan free"},
		{"unmapped domain", domains.Config{Descriptors: tb}, `domain "edge" maps to no account`},
		{"missing account", domains.Config{Descriptors: tb, Routing: domains.Routing{Domains: map[string]string{"edge": "nobody"}}}, `no account "nobody"`},
		{"no files", domains.Config{Routing: domains.Routing{DefaultAccount: "acme"}}, ""},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate(dir)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := tests[0].cfg.Validate(dir); err == nil || !strings.Contains(err.Error(), "tb.yaml") {
		t.Errorf("the error must name the file: %v", err)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
