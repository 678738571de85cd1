package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/leases"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/engine/webhooks"
	"github.com/leashd/leash/engine/wiring"
)

// twoEngines returns two engines, each on its own Store, sharing one Redis and one prefix:
// two Leash instances.
func twoEngines(t *testing.T, clockA, clockB engine.Clock) (a, b *wiring.Engine, sa, sb *Store, acct *engine.Account) {
	t.Helper()
	url := singleURL(t)
	prefix := uniquePrefix()
	// These tests check what two instances share, not timeouts: a generous ReadTimeout
	// keeps a busy machine from failing their calls (the default 500 ms did, under load).
	sa = openStore(t, Options{URL: url, Prefix: prefix, Clock: clockA, ReadTimeout: 5 * time.Second})
	sb = openStore(t, Options{URL: url, Prefix: prefix, Clock: clockB, ReadTimeout: 5 * time.Second})
	dir, err := engine.NewDirectory([]engine.AccountSpec{
		{ID: "acme", Plan: engine.BuiltinPlans()["pro"], KeyHashes: [][32]byte{engine.HashKey("k-acme")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	acct, _ = dir.Account("acme")
	opts := wiring.Options{Logger: quietLogger()}
	return wiring.New(engine.RolesOf(sa), dir, opts), wiring.New(engine.RolesOf(sb), dir, opts), sa, sb, acct
}

// TestTwoInstancesLeaseInvariant: 200 concurrent acquirers on one key with limit 5, half
// through each of two instances, never hold more than 5 leases. The holders' own count
// and Redis's count (sampled) are both checked.
func TestTwoInstancesLeaseInvariant(t *testing.T) {
	t.Parallel()
	a, b, sa, _, acct := twoEngines(t, nil, nil)
	ctx := context.Background()
	const limit, workers = 5, 200
	req := leases.AcquireRequest{Namespace: "jobs", Key: "gpu", Limit: testkit.Ptr(int64(limit)), WindowMS: testkit.Ptr(int64(30_000))}

	var held, maxHeld, granted, errs atomic.Int64
	var sampledMax atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		eng := a
		if i%2 == 1 {
			eng = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := eng.Leases.Acquire(ctx, acct, &req)
				if err != nil {
					if errs.Add(1) == 1 {
						t.Logf("first error: %v", err)
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if !d.Allowed {
					time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
					continue
				}
				granted.Add(1)
				n := held.Add(1)
				for {
					m := maxHeld.Load()
					if n <= m || maxHeld.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
				held.Add(-1)
				if _, err := eng.Leases.Release(ctx, acct, d.LeaseID); err != nil {
					if errs.Add(1) == 1 {
						t.Logf("first error: %v", err)
					}
				}
			}
		}()
	}
	// Sample Redis's own count of unexpired leases.
	k := sa.keys.Leases(engine.LeaseSet{Account: acct.ID, Namespace: req.Namespace, Key: req.Key})
	sampler := redis.NewClient(&redis.Options{Addr: sa.client.(*redis.Client).Options().Addr})
	defer sampler.Close()
	var samples atomic.Int64
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			now, err := sampler.Time(ctx).Result()
			if err == nil {
				n, err := sampler.ZCount(ctx, k[0], "("+itoa(now.UnixMilli()), "+inf").Result()
				if err == nil {
					samples.Add(1)
					if n > sampledMax.Load() {
						sampledMax.Store(n)
					}
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	// A fixed amount of work, not a fixed time: the same contention on a busy machine.
	testkit.Eventually(t, "1000 leases granted and 200 samples of Redis", 60*time.Second, func() bool {
		return granted.Load() >= 1000 && samples.Load() >= 200
	})
	close(stop)
	wg.Wait()
	<-sampleDone
	t.Logf("%d leases granted to %d acquirers on 2 instances; max held by callers %d, max in Redis over %d samples %d; %d errors",
		granted.Load(), workers, maxHeld.Load(), samples.Load(), sampledMax.Load(), errs.Load())
	if maxHeld.Load() > limit || sampledMax.Load() > limit {
		t.Fatalf("more than %d leases held at once: callers %d, Redis %d", limit, maxHeld.Load(), sampledMax.Load())
	}
	if granted.Load() < 50 || errs.Load() > 0 {
		t.Fatalf("granted %d leases with %d errors: the test did not exercise the limit", granted.Load(), errs.Load())
	}
	if maxHeld.Load() < limit-1 {
		t.Fatalf("never more than %d held: the test did not reach the limit", maxHeld.Load())
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestTwoInstancesShareCountsAndRules: counters, usage and rules written through one
// instance are seen by the other; a rule write reaches the other within 1 s.
func TestTwoInstancesShareCountsAndRules(t *testing.T) {
	t.Parallel()
	a, b, _, _, acct := twoEngines(t, nil, nil)
	ctx := context.Background()
	check := testkit.Check{Namespace: "api", Key: "user-1", Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(10)), WindowMS: testkit.Ptr(int64(3_600_000))}
	for i := range 10 {
		eng := a
		if i%2 == 1 {
			eng = b
		}
		d, err := check.Do(ctx, eng, acct)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed || d.Remaining != int64(9-i) {
			t.Fatalf("check %d: allowed %v remaining %d, want allowed with %d remaining", i, d.Allowed, d.Remaining, 9-i)
		}
	}
	for _, eng := range []*wiring.Engine{a, b} {
		if d, err := check.Do(ctx, eng, acct); err != nil || d.Allowed {
			t.Fatalf("11th check allowed (%v, %v): the instances do not share the counter", d, err)
		}
	}
	// Usage counted on both instances is summed in Redis.
	if err := a.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, eng := range []*wiring.Engine{a, b} {
		st, err := eng.Usage.Stats(ctx, acct, "api")
		if err != nil {
			t.Fatal(err)
		}
		if st.Total != 12 || st.Blocked != 2 || st.Month.Total != 12 {
			t.Fatalf("stats: total %d blocked %d month %d, want 12, 2, 12", st.Total, st.Blocked, st.Month.Total)
		}
	}

	// Rules: b caches "no rule", a writes one; b must use it within 1 s. Then a replaces
	// and deletes it, each seen by b within 1 s.
	noInline := testkit.Check{Namespace: "rules-ns", Key: "k"}
	if _, err := noInline.Do(ctx, b, acct); engine.CodeOf(err) != engine.CodeMissingLimit {
		t.Fatalf("before any rule: %v, want missing_limit", err)
	}
	var worst time.Duration
	for i, step := range []struct {
		put   *rules.RuleRequest
		limit int64 // the limit b must report; 0 = missing_limit
	}{
		{put: &rules.RuleRequest{Algorithm: testkit.Ptr("sliding_window"), Limit: testkit.Ptr(int64(100)), WindowMS: testkit.Ptr(int64(60_000))}, limit: 100},
		{put: &rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(7)), WindowMS: testkit.Ptr(int64(60_000))}, limit: 7},
		{put: nil, limit: 0},
	} {
		written := time.Now()
		if step.put != nil {
			if _, _, err := a.Rules.Put(ctx, acct, "rules-ns", step.put); err != nil {
				t.Fatal(err)
			}
		} else if _, err := a.Rules.Delete(ctx, acct, "rules-ns", engine.RateRule); err != nil {
			t.Fatal(err)
		}
		// The writer sees its own write at once.
		d, err := noInline.Do(ctx, a, acct)
		if step.limit == 0 {
			if engine.CodeOf(err) != engine.CodeMissingLimit {
				t.Fatalf("step %d: writer still sees a rule: %v %v", i, d, err)
			}
		} else if err != nil || d.Limit != step.limit {
			t.Fatalf("step %d: writer sees limit %d (%v), want %d", i, d.Limit, err, step.limit)
		}
		testkit.Eventually(t, fmt.Sprintf("step %d: the other instance sees the rule change", i), 3*time.Second, func() bool {
			d, err := noInline.Do(ctx, b, acct)
			if step.limit == 0 {
				return engine.CodeOf(err) == engine.CodeMissingLimit
			}
			return err == nil && d.Limit == step.limit
		})
		lag := time.Since(written)
		worst = max(worst, lag)
		t.Logf("step %d: rule change in force on the other instance after %v", i, lag.Round(time.Millisecond))
	}
	if worst >= time.Second {
		t.Fatalf("a rule change took %v to reach the other instance; the bound is 1 s", worst)
	}
}

// TestClockSkew: in production mode (no test clock) the instances' own clocks play no
// part: every script reads Redis TIME, so two instances give the verdicts one instance
// would, and report the same store time. As a control, two stores whose (test) clocks
// differ by 5 minutes disagree on the same counter, which is what Redis TIME prevents.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	a, b, sa, sb, acct := twoEngines(t, nil, nil)
	check := testkit.Check{Namespace: "skew", Key: "k", Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(20)), WindowMS: testkit.Ptr(int64(3_600_000))}
	allowed := 0
	var lastA, lastB int64
	for i := range 30 {
		eng := a
		if i%3 == 0 {
			eng = b
		}
		d, err := check.Do(ctx, eng, acct)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
		if eng == a {
			lastA = d.NowMS
		} else {
			lastB = d.NowMS
		}
	}
	if allowed != 20 {
		t.Fatalf("%d of 30 checks allowed across two instances, want exactly 20", allowed)
	}
	na, err := sa.NowMS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := sb.NowMS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := na - nb; d < -1000 || d > 1000 || lastA-lastB > 1000 || lastB-lastA > 1000 {
		t.Fatalf("the instances report different store times: %d vs %d", na, nb)
	}

	// Control: skewed test clocks on one counter give different windows and verdicts.
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ca, cb := testkit.NewFakeClock(base), testkit.NewFakeClock(base.Add(5*time.Minute))
	prefix := uniquePrefix()
	ta := openStore(t, Options{URL: singleURL(t), Prefix: prefix, Clock: ca})
	tb := openStore(t, Options{URL: singleURL(t), Prefix: prefix, Clock: cb})
	sp := engine.Spend{Counter: engine.Counter{Account: "acme", Namespace: "skew", Key: "k", Algorithm: engine.FixedWindow, WindowMS: 60_000}, Limit: 1, Cost: 1}
	da, err := ta.Spend(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	db, err := tb.Spend(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	if !da.Allowed || !db.Allowed {
		t.Fatalf("control: skewed clocks should each see a fresh window (a %v, b %v)", da.Allowed, db.Allowed)
	}
}

// TestTwoInstancesQuotaEventOnce: two instances on one Redis serve an account across its
// monthly quota at the same time, each flushing usage concurrently: exactly one
// usage.quota_exceeded event is queued for the month, whichever instance saw it first.
func TestTwoInstancesQuotaEventOnce(t *testing.T) {
	t.Parallel()
	url := singleURL(t)
	prefix := uniquePrefix()
	sa := openStore(t, Options{URL: url, Prefix: prefix})
	sb := openStore(t, Options{URL: url, Prefix: prefix})
	plan := engine.BuiltinPlans()["pro"]
	plan.MonthlyQuota = 50
	dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: plan}})
	if err != nil {
		t.Fatal(err)
	}
	acct, _ := dir.Account("acme")
	opts := wiring.Options{Logger: quietLogger()}
	engines := []*wiring.Engine{wiring.New(engine.RolesOf(sa), dir, opts), wiring.New(engine.RolesOf(sb), dir, opts)}
	ctx := context.Background()
	req := testkit.Check{Namespace: "api", Key: "k", Limit: testkit.Ptr(int64(1_000_000)), WindowMS: testkit.Ptr(int64(60_000))}

	// Each instance serves 40 checks and flushes after every 4, both at once: the
	// account crosses 50 while both are flushing.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, eng := range engines {
		wg.Go(func() {
			for i := range 40 {
				if _, err := req.Do(ctx, eng, acct); err != nil {
					errs <- err
					return
				}
				if i%4 == 3 {
					if err := eng.Usage.Flush(ctx); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for range 3 { // more flushes on both change nothing
		for _, eng := range engines {
			if err := eng.Usage.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	evs, err := sa.Claim(ctx, 100, 60_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != webhooks.EventQuotaExceeded || evs[0].Account != "acme" {
		t.Fatalf("outbox %+v, want one usage.quota_exceeded", evs)
	}
	var data struct {
		Month string
		Total int64
		Quota int64
	}
	if err := json.Unmarshal(evs[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	if data.Quota != 50 || data.Total <= 50 || data.Total > 80 || data.Month != time.Now().UTC().Format("2006-01") {
		t.Fatalf("event data %s", evs[0].Data)
	}
	if st, err := engines[1].Usage.Stats(ctx, acct, "api"); err != nil || st.Month.Total != 80 {
		t.Fatalf("month total %d (%v), want 80", st.Month.Total, err)
	}
}
