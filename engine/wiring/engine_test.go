package wiring_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/leases"
	"github.com/leashd/leash/engine/limits"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/engine/usage"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// start is 2026-11-22 10:00:00 UTC.
var start = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

type fixture struct {
	eng   *wiring.Engine
	store engine.Store
	clock *clock
	accts map[string]*engine.Account
}

func plans() map[string]engine.Plan {
	p := engine.BuiltinPlans()
	tiny := p["pro"]
	tiny.Name, tiny.HardCap, tiny.MonthlyQuota = "tiny", testkit.Ptr(int64(3)), 2
	p["tiny"] = tiny
	return p
}

func newFixture(t *testing.T, wrap func(engine.Store) engine.Store) *fixture {
	t.Helper()
	c := &clock{t: start}
	ms := memstore.New(memstore.Options{Clock: c})
	t.Cleanup(func() { ms.Close() })
	var s engine.Store = ms
	if wrap != nil {
		s = wrap(ms)
	}
	p := plans()
	dir, err := engine.NewDirectory([]engine.AccountSpec{
		{ID: "acme", Plan: p["pro"], KeyHashes: [][32]byte{engine.HashKey("k-acme")}},
		{ID: "other", Plan: p["pro"], KeyHashes: [][32]byte{engine.HashKey("k-other")}},
		{ID: "cheap", Plan: p["free"], KeyHashes: [][32]byte{engine.HashKey("k-cheap")}},
		{ID: "capped", Plan: p["tiny"], KeyHashes: [][32]byte{engine.HashKey("k-capped")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{eng: wiring.New(engine.RolesOf(s), dir, wiring.Options{}), store: s, clock: c, accts: map[string]*engine.Account{}}
	for _, a := range dir.Accounts() {
		f.accts[a.ID] = a
	}
	return f
}

func wantCode(t *testing.T, err error, code engine.Code) {
	t.Helper()
	if got := engine.CodeOf(err); got != code {
		t.Fatalf("error = %v (code %q), want code %q", err, got, code)
	}
}

func TestAuthenticate(t *testing.T) {
	f := newFixture(t, nil)
	if a, ok := f.eng.Accounts.Authenticate("k-acme"); !ok || a.ID != "acme" {
		t.Fatalf("Authenticate(k-acme) = %v, %v", a, ok)
	}
	if _, ok := f.eng.Accounts.Authenticate("nope"); ok {
		t.Fatal("unknown key authenticated")
	}
}

func TestCheckResolution(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	acme := f.accts["acme"]
	if _, _, err := f.eng.Rules.Put(ctx, acme, "api", &rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(2)), WindowMS: testkit.Ptr(int64(1000))}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		req       testkit.Check
		wantLimit int64
		wantCode  engine.Code
	}{
		{"rule supplies everything", testkit.Check{Namespace: "api", Key: "a"}, 2, ""},
		{"inline limit wins, rule window", testkit.Check{Namespace: "api", Key: "b", Limit: testkit.Ptr(int64(7))}, 7, ""},
		{"inline everything without rule", testkit.Check{Namespace: "none", Key: "a", Limit: testkit.Ptr(int64(4)), WindowMS: testkit.Ptr(int64(10))}, 4, ""},
		{"no rule, no window", testkit.Check{Namespace: "none", Key: "a", Limit: testkit.Ptr(int64(4))}, 0, engine.CodeMissingLimit},
		{"no rule, no limit", testkit.Check{Namespace: "none", Key: "a", WindowMS: testkit.Ptr(int64(4))}, 0, engine.CodeMissingLimit},
		{"unknown algorithm", testkit.Check{Namespace: "api", Key: "a", Algorithm: testkit.Ptr("leaky")}, 0, engine.CodeUnknownAlgorithm},
		{"concurrent_limit on a check", testkit.Check{Namespace: "api", Key: "a", Algorithm: testkit.Ptr("concurrent_limit")}, 0, engine.CodeInvalidRequest},
		{"cost above limit", testkit.Check{Namespace: "api", Key: "a", Cost: testkit.Ptr(int64(3))}, 0, engine.CodeInvalidRequest},
		{"negative cost", testkit.Check{Namespace: "api", Key: "a", Cost: testkit.Ptr(int64(-1))}, 0, engine.CodeInvalidRequest},
		{"limit zero inline", testkit.Check{Namespace: "api", Key: "a", Limit: testkit.Ptr(int64(0))}, 0, engine.CodeInvalidRequest},
		{"limit above max inline", testkit.Check{Namespace: "api", Key: "a", Limit: testkit.Ptr(engine.MaxLimit + 1)}, 0, engine.CodeInvalidRequest},
		{"window above max inline", testkit.Check{Namespace: "api", Key: "a", WindowMS: testkit.Ptr(engine.MaxWindowMS + 1)}, 0, engine.CodeInvalidRequest},
		{"bad namespace", testkit.Check{Namespace: "-api", Key: "a"}, 0, engine.CodeInvalidRequest},
		{"bad key", testkit.Check{Namespace: "api", Key: "a\x00"}, 0, engine.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tc.req.Do(ctx, f.eng, acme)
			if tc.wantCode != "" {
				wantCode(t, err, tc.wantCode)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed || d.Limit != tc.wantLimit {
				t.Fatalf("decision = %+v, want allowed with limit %d", d, tc.wantLimit)
			}
		})
	}
}

func TestDefaultAlgorithmIsSlidingWindow(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	acme := f.accts["acme"]
	req := testkit.Check{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1000))}
	if _, err := req.Do(ctx, f.eng, acme); err != nil {
		t.Fatal(err)
	}
	// The spend landed on the sliding_window counter, not on fixed_window's.
	if err := f.eng.Limits.Reset(ctx, acme, &limits.ResetRequest{Namespace: "n", Key: "k", Algorithm: engine.FixedWindow, WindowMS: testkit.Ptr(int64(1000))}); engine.CodeOf(err) != engine.CodeKeyNotFound {
		t.Fatalf("fixed_window reset = %v, want key_not_found", err)
	}
	if err := f.eng.Limits.Reset(ctx, acme, &limits.ResetRequest{Namespace: "n", Key: "k", Algorithm: engine.SlidingWindow, WindowMS: testkit.Ptr(int64(1000))}); err != nil {
		t.Fatalf("sliding_window reset = %v", err)
	}
}

func TestPlanGates(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	cheap := f.accts["cheap"]
	_, err := (testkit.Check{Namespace: "n", Key: "k", Algorithm: testkit.Ptr("token_bucket"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))}).Do(ctx, f.eng, cheap)
	wantCode(t, err, engine.CodeAlgorithmNotOnPlan)
	_, _, err = f.eng.Rules.Put(ctx, cheap, "n", &rules.RuleRequest{Algorithm: testkit.Ptr("concurrent_limit"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))})
	wantCode(t, err, engine.CodeAlgorithmNotOnPlan)
	_, err = f.eng.Leases.Acquire(ctx, cheap, &leases.AcquireRequest{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))})
	wantCode(t, err, engine.CodeConcurrentNotOnPlan)
	if _, err := (testkit.Check{Namespace: "n", Key: "k", Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))}).Do(ctx, f.eng, cheap); err != nil {
		t.Fatalf("fixed_window on free: %v", err)
	}
}

func TestRuleValidation(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	acme := f.accts["acme"]
	tests := []struct {
		name string
		req  rules.RuleRequest
		code engine.Code
	}{
		{"missing algorithm", rules.RuleRequest{Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))}, engine.CodeInvalidRequest},
		{"missing limit", rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), WindowMS: testkit.Ptr(int64(1))}, engine.CodeInvalidRequest},
		{"negative window", rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(-1))}, engine.CodeInvalidRequest},
		{"limit 0", rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(0)), WindowMS: testkit.Ptr(int64(1))}, engine.CodeInvalidRule},
		{"limit above max", rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(engine.MaxLimit + 1), WindowMS: testkit.Ptr(int64(1))}, engine.CodeInvalidRule},
		{"window above max", rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(engine.MaxWindowMS + 1)}, engine.CodeInvalidRule},
		{"unknown algorithm", rules.RuleRequest{Algorithm: testkit.Ptr("x"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))}, engine.CodeUnknownAlgorithm},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := f.eng.Rules.Put(ctx, acme, "n", &tc.req)
			wantCode(t, err, tc.code)
		})
	}
	r, created, err := f.eng.Rules.Put(ctx, acme, "n", &rules.RuleRequest{Algorithm: testkit.Ptr("token_bucket"), Limit: testkit.Ptr(engine.MaxLimit), WindowMS: testkit.Ptr(engine.MaxWindowMS), Name: testkit.Ptr("max")})
	if err != nil || !created || r.Namespace != "n" || r.Limit != engine.MaxLimit {
		t.Fatalf("PutRule at the bounds = %+v %v %v", r, created, err)
	}
}

func TestLeaseLifecycleAndIsolation(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	acme, other := f.accts["acme"], f.accts["other"]
	req := leases.AcquireRequest{Namespace: "jobs", Key: "k", Limit: testkit.Ptr(int64(2)), WindowMS: testkit.Ptr(int64(5000))}
	d1, err := f.eng.Leases.Acquire(ctx, acme, &req)
	if err != nil || !d1.Allowed || d1.Active != 1 || d1.ResetMS != 5000 || d1.LeaseID == "" {
		t.Fatalf("first acquire = %+v, %v", d1, err)
	}
	if _, err := f.eng.Leases.Acquire(ctx, acme, &req); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)
	d3, err := f.eng.Leases.Acquire(ctx, acme, &req)
	if err != nil || d3.Allowed || d3.LeaseID != "" || d3.Active != 2 || d3.ResetMS != 4000 {
		t.Fatalf("third acquire = %+v, %v; want denied, active 2, reset 4000", d3, err)
	}
	// other holds one lease on the same namespace and key; releasing acme's id as other
	// frees nothing and reports other's own count.
	if _, err := f.eng.Leases.Acquire(ctx, other, &req); err != nil {
		t.Fatal(err)
	}
	rel, err := f.eng.Leases.Release(ctx, other, d1.LeaseID)
	if err != nil || rel.Released || rel.Active != 1 {
		t.Fatalf("cross-account release = %+v, %v; want released false, active 1", rel, err)
	}
	ren, err := f.eng.Leases.Renew(ctx, other, d1.LeaseID, nil)
	if err != nil || ren.Renewed {
		t.Fatalf("cross-account renew = %+v, %v", ren, err)
	}
	ren, err = f.eng.Leases.Renew(ctx, acme, d1.LeaseID, nil)
	if err != nil || !ren.Renewed || ren.ResetMS != 5000 || ren.Active != 2 {
		t.Fatalf("renew = %+v, %v", ren, err)
	}
	rel, err = f.eng.Leases.Release(ctx, acme, d1.LeaseID)
	if err != nil || !rel.Released || rel.Active != 1 {
		t.Fatalf("release = %+v, %v", rel, err)
	}
	rel, err = f.eng.Leases.Release(ctx, acme, d1.LeaseID)
	if err != nil || rel.Released || rel.Active != 1 {
		t.Fatalf("second release = %+v, %v", rel, err)
	}
	for _, bad := range []string{"", "x", "l1.bad", d1.LeaseID + "x", d1.LeaseID[:len(d1.LeaseID)-1]} {
		_, err := f.eng.Leases.Release(ctx, acme, bad)
		wantCode(t, err, engine.CodeInvalidLeaseID)
	}
}

func TestLeaseRuleFallback(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	acme := f.accts["acme"]
	_, err := f.eng.Leases.Acquire(ctx, acme, &leases.AcquireRequest{Namespace: "jobs", Key: "k"})
	wantCode(t, err, engine.CodeMissingLimit)
	if _, _, err := f.eng.Rules.Put(ctx, acme, "jobs", &rules.RuleRequest{Algorithm: testkit.Ptr("concurrent_limit"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(3000))}); err != nil {
		t.Fatal(err)
	}
	d, err := f.eng.Leases.Acquire(ctx, acme, &leases.AcquireRequest{Namespace: "jobs", Key: "k", WindowMS: testkit.Ptr(int64(100))})
	if err != nil || !d.Allowed || d.Limit != 1 || d.ResetMS != 100 {
		t.Fatalf("acquire with rule limit and inline window = %+v, %v", d, err)
	}
}

// failingUsage makes AddUsage fail a given number of times, optionally after applying the
// batch (a lost acknowledgement).
type failingUsage struct {
	engine.Store
	failures   atomic.Int32
	applyFirst bool
}

func (s *failingUsage) AddUsage(ctx context.Context, b engine.UsageBatch) error {
	if s.failures.Add(-1) >= 0 {
		if s.applyFirst {
			if err := s.Store.AddUsage(ctx, b); err != nil {
				return err
			}
		}
		return errors.New("connection reset")
	}
	return s.Store.AddUsage(ctx, b)
}

func TestUsageFlushRetriedOnceApplied(t *testing.T) {
	for _, applyFirst := range []bool{false, true} {
		name := "failed before applying"
		if applyFirst {
			name = "acknowledgement lost"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var fs *failingUsage
			f := newFixture(t, func(s engine.Store) engine.Store {
				fs = &failingUsage{Store: s, applyFirst: applyFirst}
				fs.failures.Store(2)
				return fs
			})
			acme := f.accts["acme"]
			req := testkit.Check{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(60000))}
			for range 3 { // 1 allowed, 2 denied
				if _, err := req.Do(ctx, f.eng, acme); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 2 {
				if err := f.eng.Usage.Flush(ctx); err == nil {
					t.Fatalf("flush %d succeeded; the store was failing", i)
				}
				if _, err := req.Do(ctx, f.eng, acme); err != nil { // counted into a later batch
					t.Fatal(err)
				}
			}
			if err := f.eng.Usage.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := f.eng.Usage.Stats(ctx, acme, "n")
			if err != nil {
				t.Fatal(err)
			}
			if st.Total != 5 || st.Blocked != 4 || st.Month.Total != 5 {
				t.Fatalf("stats total %d blocked %d month %d; want 5, 4, 5", st.Total, st.Blocked, st.Month.Total)
			}
		})
	}
}

func TestUsageCountsDecisionsOnly(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	acme := f.accts["acme"]
	check := testkit.Check{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(60000))}
	check.Do(ctx, f.eng, acme)                                                                                                                                  // allowed
	check.Do(ctx, f.eng, acme)                                                                                                                                  // denied
	(testkit.Check{Namespace: "n", Key: "k"}).Do(ctx, f.eng, acme)                                                                                              // error: missing_limit
	f.eng.Limits.Reset(ctx, acme, &limits.ResetRequest{Namespace: "n", Key: "k", WindowMS: testkit.Ptr(int64(60000))})                                          // not a decision
	d, _ := f.eng.Leases.Acquire(ctx, acme, &leases.AcquireRequest{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1000))}) // allowed
	f.eng.Leases.Acquire(ctx, acme, &leases.AcquireRequest{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1000))})         // denied
	f.eng.Leases.Renew(ctx, acme, d.LeaseID, nil)
	f.eng.Leases.Release(ctx, acme, d.LeaseID)
	(testkit.Check{Namespace: "elsewhere", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))}).Do(ctx, f.eng, acme)
	if err := f.eng.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := f.eng.Usage.Stats(ctx, acme, "n")
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 4 || st.Blocked != 2 {
		t.Fatalf("namespace n: total %d blocked %d, want 4 and 2", st.Total, st.Blocked)
	}
	if st.Month.Total != 5 || st.Month.Month.String() != "2026-11" || st.Month.Quota != 10_000_000 || st.Month.OverQuota {
		t.Fatalf("month = %+v", st.Month)
	}
	if len(st.Days) != usage.StatsDays || st.Days[29].Day.String() != "2026-11-22" || st.Days[0].Day.String() != "2026-10-24" || st.Days[29].Total != 4 || st.Days[28].Total != 0 {
		t.Fatalf("days = %+v", st.Days)
	}
	other, err := f.eng.Usage.Stats(ctx, f.accts["other"], "n")
	if err != nil || other.Total != 0 || other.Month.Total != 0 {
		t.Fatalf("other account's stats = %+v, %v", other, err)
	}
}

func TestHardCap(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	capped := f.accts["capped"] // hard_cap 3, quota 2
	check := testkit.Check{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(100)), WindowMS: testkit.Ptr(int64(1000))}
	for i := range 3 {
		if _, err := check.Do(ctx, f.eng, capped); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	// Counted locally, before any flush: the cap already holds.
	_, err := check.Do(ctx, f.eng, capped)
	wantCode(t, err, engine.CodeHardCapExceeded)
	_, err = f.eng.Leases.Acquire(ctx, capped, &leases.AcquireRequest{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))})
	wantCode(t, err, engine.CodeHardCapExceeded)
	var e *engine.Error
	errors.As(err, &e)
	// 2026-11-22 10:00 UTC to 2026-12-01 00:00 UTC.
	if want := int64((8*24 + 14) * 3600); e.RetryAfterSec != want {
		t.Fatalf("RetryAfterSec = %d, want %d", e.RetryAfterSec, want)
	}
	if err := f.eng.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = check.Do(ctx, f.eng, capped)
	wantCode(t, err, engine.CodeHardCapExceeded)
	st, _ := f.eng.Usage.Stats(ctx, capped, "n")
	if st.Month.Total != 3 || !st.Month.OverQuota || st.Month.HardCap == nil || *st.Month.HardCap != 3 {
		t.Fatalf("month = %+v", st.Month)
	}
	// A new month starts from zero.
	f.clock.Advance(9 * 24 * time.Hour)
	if err := f.eng.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := check.Do(ctx, f.eng, capped); err != nil {
		t.Fatalf("check in the next month: %v", err)
	}
}

func TestRunFlushesOnStop(t *testing.T) {
	f := newFixture(t, nil)
	acme := f.accts["acme"]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.eng.Usage.Run(ctx, time.Second) }()
	for range 7 {
		if _, err := (testkit.Check{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(100)), WindowMS: testkit.Ptr(int64(1000))}).Do(context.Background(), f.eng, acme); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st, err := f.eng.Usage.Stats(context.Background(), acme, "n")
	if err != nil || st.Total != 7 {
		t.Fatalf("after Run stopped: total %d, err %v; want 7", st.Total, err)
	}
}

type downStore struct{ engine.Store }

var errDown = errors.New("dial tcp 10.0.0.1:6379: connection refused")

func (downStore) Spend(context.Context, engine.Spend) (engine.Decision, error) {
	return engine.Decision{}, errDown
}

func TestStoreFailureIsUnavailable(t *testing.T) {
	f := newFixture(t, func(s engine.Store) engine.Store { return downStore{s} })
	_, err := (testkit.Check{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))}).Do(context.Background(), f.eng, f.accts["acme"])
	wantCode(t, err, engine.CodeUnavailable)
	var e *engine.Error
	if !errors.As(err, &e) || !errors.Is(err, errDown) {
		t.Fatalf("the cause must stay reachable for logs: %v", err)
	}
	if e.Message != "service temporarily unavailable" {
		t.Fatalf("message leaks detail: %q", e.Message)
	}
}

// TestConcurrentChecksAndFlush: usage counted while flushes run is neither lost nor raced.
func TestConcurrentChecksAndFlush(t *testing.T) {
	f := newFixture(t, nil)
	acme := f.accts["acme"]
	ctx := context.Background()
	const workers, each = 4, 300
	var wg sync.WaitGroup
	stop := make(chan struct{})
	flusherDone := make(chan struct{})
	go func() {
		defer close(flusherDone)
		for {
			select {
			case <-stop:
				return
			default:
				if err := f.eng.Usage.Flush(ctx); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ns := "n"
				if i%2 == 1 {
					ns = "m" // a second shard, so one of them is often empty at flush time
				}
				req := testkit.Check{Namespace: ns, Key: itoaKey(w), Limit: testkit.Ptr(int64(1_000_000)), WindowMS: testkit.Ptr(int64(60000))}
				if _, err := req.Do(ctx, f.eng, acme); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-flusherDone
	if err := f.eng.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := f.eng.Usage.Stats(ctx, acme, "n")
	if err != nil {
		t.Fatal(err)
	}
	if st.Month.Total != workers*each || st.Total != workers*each/2 {
		t.Fatalf("month total %d, namespace n total %d; want %d and %d", st.Month.Total, st.Total, workers*each, workers*each/2)
	}
}

func itoaKey(i int) string { return "worker-" + string(rune('a'+i)) }

// TestNewNeedsEveryRole: an engine missing a store role is refused at construction, not
// at its first request.
func TestNewNeedsEveryRole(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { ms.Close() })
	roles := engine.RolesOf(ms)
	roles.Usage = nil
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted roles without a UsageStore")
		}
	}()
	wiring.New(roles, nil, wiring.Options{})
}
