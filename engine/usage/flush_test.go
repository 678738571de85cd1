package usage_test

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
	"github.com/leashd/leash/engine/usage"
	"github.com/leashd/leash/testkit/enginekit"
)

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
			f := enginekit.New(t, func(s engine.Store) engine.Store {
				fs = &failingUsage{Store: s, applyFirst: applyFirst}
				fs.failures.Store(2)
				return fs
			})
			acme := f.Accts["acme"]
			req := testkit.Check{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(60000))}
			for range 3 { // 1 allowed, 2 denied
				if _, err := req.Do(ctx, f.Eng, acme); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 2 {
				if err := f.Eng.Usage.Flush(ctx); err == nil {
					t.Fatalf("flush %d succeeded; the store was failing", i)
				}
				if _, err := req.Do(ctx, f.Eng, acme); err != nil { // counted into a later batch
					t.Fatal(err)
				}
			}
			if err := f.Eng.Usage.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := f.Eng.Usage.Stats(ctx, acme, "n")
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
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
	check := testkit.Check{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(60000))}
	check.Do(ctx, f.Eng, acme)                                                                                                                                  // allowed
	check.Do(ctx, f.Eng, acme)                                                                                                                                  // denied
	(testkit.Check{Namespace: "n", Key: "k"}).Do(ctx, f.Eng, acme)                                                                                              // error: missing_limit
	f.Eng.Limits.Reset(ctx, acme, &limits.ResetRequest{Namespace: "n", Key: "k", WindowMS: testkit.Ptr(int64(60000))})                                          // not a decision
	d, _ := f.Eng.Leases.Acquire(ctx, acme, &leases.AcquireRequest{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1000))}) // allowed
	f.Eng.Leases.Acquire(ctx, acme, &leases.AcquireRequest{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1000))})         // denied
	f.Eng.Leases.Renew(ctx, acme, d.LeaseID, nil)
	f.Eng.Leases.Release(ctx, acme, d.LeaseID)
	(testkit.Check{Namespace: "elsewhere", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))}).Do(ctx, f.Eng, acme)
	if err := f.Eng.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := f.Eng.Usage.Stats(ctx, acme, "n")
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
	other, err := f.Eng.Usage.Stats(ctx, f.Accts["other"], "n")
	if err != nil || other.Total != 0 || other.Month.Total != 0 {
		t.Fatalf("other account's stats = %+v, %v", other, err)
	}
}

func TestHardCap(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	capped := f.Accts["capped"] // hard_cap 3, quota 2
	check := testkit.Check{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(100)), WindowMS: testkit.Ptr(int64(1000))}
	for i := range 3 {
		if _, err := check.Do(ctx, f.Eng, capped); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	// Counted locally, before any flush: the cap already holds.
	_, err := check.Do(ctx, f.Eng, capped)
	enginekit.WantCode(t, err, engine.CodeHardCapExceeded)
	_, err = f.Eng.Leases.Acquire(ctx, capped, &leases.AcquireRequest{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))})
	enginekit.WantCode(t, err, engine.CodeHardCapExceeded)
	var e *engine.Error
	errors.As(err, &e)
	// 2026-11-22 10:00 UTC to 2026-12-01 00:00 UTC.
	if want := int64((8*24 + 14) * 3600); e.RetryAfterSec != want {
		t.Fatalf("RetryAfterSec = %d, want %d", e.RetryAfterSec, want)
	}
	if err := f.Eng.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = check.Do(ctx, f.Eng, capped)
	enginekit.WantCode(t, err, engine.CodeHardCapExceeded)
	st, _ := f.Eng.Usage.Stats(ctx, capped, "n")
	if st.Month.Total != 3 || !st.Month.OverQuota || st.Month.HardCap == nil || *st.Month.HardCap != 3 {
		t.Fatalf("month = %+v", st.Month)
	}
	// A new month starts from zero.
	f.Clock.Advance(9 * 24 * time.Hour)
	if err := f.Eng.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := check.Do(ctx, f.Eng, capped); err != nil {
		t.Fatalf("check in the next month: %v", err)
	}
}

func TestRunFlushesOnStop(t *testing.T) {
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.Eng.Usage.Run(ctx, time.Second) }()
	for range 7 {
		if _, err := (testkit.Check{Namespace: "n", Key: "k", Limit: testkit.Ptr(int64(100)), WindowMS: testkit.Ptr(int64(1000))}).Do(context.Background(), f.Eng, acme); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st, err := f.Eng.Usage.Stats(context.Background(), acme, "n")
	if err != nil || st.Total != 7 {
		t.Fatalf("after Run stopped: total %d, err %v; want 7", st.Total, err)
	}
}

// TestConcurrentChecksAndFlush: usage counted while flushes run is neither lost nor raced.
func TestConcurrentChecksAndFlush(t *testing.T) {
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
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
				if err := f.Eng.Usage.Flush(ctx); err != nil {
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
				if _, err := req.Do(ctx, f.Eng, acme); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-flusherDone
	if err := f.Eng.Usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := f.Eng.Usage.Stats(ctx, acme, "n")
	if err != nil {
		t.Fatal(err)
	}
	if st.Month.Total != workers*each || st.Total != workers*each/2 {
		t.Fatalf("month total %d, namespace n total %d; want %d and %d", st.Month.Total, st.Total, workers*each, workers*each/2)
	}
}

func itoaKey(i int) string { return "worker-" + string(rune('a'+i)) }
