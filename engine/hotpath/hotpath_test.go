package hotpath_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/hotpath"
)

// The hot path's time-based rules, on a fake store in a synctest bubble (its clock moves
// only when every goroutine waits): a slice decides only within hotpath.Valid of the store's
// last answer, a fence read stops it, and an idle one goes back. The store-backed tests
// (store/redisstore: reserve_test.go, reserve_exact_test.go) hold the same rules against
// real Redis, several instances, freezes and cuts.

// fakeStore is a store of fixed windows that can reserve: one counter state per key, the
// grants per key and holder, a fence log, and a switch that stops it answering.
type fakeStore struct {
	mu       sync.Mutex
	count    map[string]int64 // per key, the current window's count (the window never ends here)
	grants   map[string]hotpath.Call
	granted  map[string]int64
	fences   []string
	down     bool
	reserves int
	spends   int
}

func newFake() *fakeStore {
	return &fakeStore{count: map[string]int64{}, grants: map[string]hotpath.Call{}, granted: map[string]int64{}}
}

var errDown = errors.New("fake store: down")

func (f *fakeStore) CounterKey(c engine.Counter) string      { return c.Key }
func (f *fakeStore) MultiNode() bool                         { return false }
func (f *fakeStore) PingNodes(context.Context, func(string)) {}

func (f *fakeStore) Answering() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.down
}

func (f *fakeStore) Reserve(_ context.Context, key string, sp *engine.Spend, c hotpath.Call) (hotpath.Reply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return hotpath.Reply{}, errDown
	}
	f.reserves++
	if g, ok := f.grants[key]; ok {
		back := f.granted[key]
		if g.Seq == c.Ack {
			back -= c.Used
		}
		f.count[key] -= back
		delete(f.grants, key)
		delete(f.granted, key)
	}
	now := time.Now().UnixMilli()
	rep := hotpath.Reply{NowMS: now, Window: now / sp.Counter.WindowMS}
	if f.count[key]+sp.Cost <= sp.Limit {
		f.count[key] += sp.Cost
		rep.Verdict = 1
	}
	rep.Remaining = sp.Limit - f.count[key]
	rep.Count = f.count[key]
	if rep.Verdict == 1 && c.Want > 0 && rep.Remaining >= c.From {
		slice := min(c.Want, rep.Remaining/c.Share, sp.Limit/c.Part)
		if slice > 0 {
			f.count[key] += slice
			f.grants[key], f.granted[key] = c, slice
			rep.Slice = slice
		}
	}
	return rep, nil
}

func (f *fakeStore) Fence(ctx context.Context, key string) error {
	f.mu.Lock()
	f.fences = append(f.fences, key)
	f.mu.Unlock()
	time.Sleep(hotpath.Valid + 20*time.Millisecond)
	return nil
}

func (f *fakeStore) ReadFences(_ context.Context, after int64) (hotpath.Fences, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return hotpath.Fences{}, errDown
	}
	r := hotpath.Fences{Last: int64(len(f.fences))}
	if after >= 0 {
		r.Keys = append(r.Keys, f.fences[after:]...)
	}
	return r, nil
}

// SpendKey, Spend, SpendAll, Reset and the rest: the plain decisions the hot path passes on.
func (f *fakeStore) SpendKey(ctx context.Context, _ string, sp engine.Spend) (engine.Decision, error) {
	return f.Spend(ctx, sp)
}

func (f *fakeStore) Spend(_ context.Context, sp engine.Spend) (engine.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return engine.Decision{}, errDown
	}
	f.spends++
	d := engine.Decision{Limit: sp.Limit}
	if f.count[sp.Counter.Key]+sp.Cost <= sp.Limit {
		f.count[sp.Counter.Key] += sp.Cost
		d.Allowed = true
	}
	d.Remaining = sp.Limit - f.count[sp.Counter.Key]
	return d, nil
}

func (f *fakeStore) SpendAll(context.Context, []engine.Spend, []engine.Decision) error { return nil }
func (f *fakeStore) Reset(_ context.Context, c engine.Counter) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.count, c.Key)
	return true, nil
}
func (f *fakeStore) Acquire(context.Context, engine.LeaseSet, string, int64, int64) (engine.LeaseDecision, error) {
	return engine.LeaseDecision{}, nil
}
func (f *fakeStore) Release(context.Context, engine.LeaseSet, string) (engine.ReleaseResult, error) {
	return engine.ReleaseResult{}, nil
}
func (f *fakeStore) Renew(context.Context, engine.LeaseSet, string, int64) (engine.RenewResult, error) {
	return engine.RenewResult{}, nil
}
func (f *fakeStore) NowMS(context.Context) (int64, error) { return time.Now().UnixMilli(), nil }
func (f *fakeStore) HeldLeases(context.Context, engine.LeaseSet) (engine.HeldLeases, error) {
	return engine.HeldLeases{}, nil
}

func (f *fakeStore) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func (f *fakeStore) stats() (reserves, spends int, count int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reserves, f.spends, f.count["hot"]
}

var hot = engine.Spend{Counter: engine.Counter{Account: "a", Namespace: "ns", Key: "hot", Algorithm: engine.FixedWindow, WindowMS: 3_600_000}, Limit: 100_000, Cost: 1}

// warm spends on the hot counter until a request is decided from a slice.
func warm(t *testing.T, h *hotpath.Reservations) {
	t.Helper()
	for range 3 {
		if d, err := h.Spend(context.Background(), hot); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
	}
	if local, _ := h.Stats(); local == 0 {
		t.Fatal("nothing decided from a slice")
	}
}

// TestSliceLivesOnlyWhileTheStoreAnswers: with the store answering, the heartbeat keeps a
// slice deciding long past hotpath.Valid (one granted after its first read of the fence
// log); once the store stops answering the heartbeat, the slice stops within
// hotpath.Valid of the last answer, and requests go to the store.
func TestSliceLivesOnlyWhileTheStoreAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		h := hotpath.New(f, f, hotpath.Options{From: 64, Idle: time.Minute})
		defer h.Close(context.Background())
		warm(t, h)
		time.Sleep(2 * hotpath.Valid) // the first slice, granted before the beat's first read, lapses
		if d, err := h.Spend(context.Background(), hot); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
		time.Sleep(5 * hotpath.Valid) // beats renew this one
		before, _ := h.Stats()
		if d, err := h.Spend(context.Background(), hot); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
		if after, _ := h.Stats(); after != before+1 {
			t.Fatal("a slice renewed by the heartbeat did not decide")
		}
		f.setDown(true)
		time.Sleep(hotpath.Valid + hotpath.Beat)
		before, _ = h.Stats()
		if _, err := h.Spend(context.Background(), hot); err == nil {
			t.Fatal("a request was answered after the store stopped answering")
		}
		if after, _ := h.Stats(); after != before {
			t.Fatal("the slice decided after the store stopped answering")
		}
		f.setDown(false)
	})
}

// TestFenceStopsSlice: a fence on the counter, read by the next beat, stops this
// instance's slice at once; the next request goes to the store and settles the slice.
func TestFenceStopsSlice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		h := hotpath.New(f, f, hotpath.Options{From: 64, Idle: time.Minute})
		defer h.Close(context.Background())
		warm(t, h)
		time.Sleep(2 * hotpath.Beat) // the beat has read the log once
		f.mu.Lock()
		f.fences = append(f.fences, "hot")
		f.mu.Unlock()
		time.Sleep(2 * hotpath.Beat)
		before, _ := h.Stats()
		reserves, _, _ := f.stats()
		if d, err := h.Spend(context.Background(), hot); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
		if after, _ := h.Stats(); after != before {
			t.Fatal("the slice decided after its fence was read")
		}
		if r, _, _ := f.stats(); r != reserves+1 {
			t.Fatalf("%d calls to the store after the fence, want 1 (settling, deciding)", r-reserves)
		}
	})
}

// TestIdleSliceGoesBack: a slice not spent from for Options.Idle goes back by the
// sweeper: the store then counts exactly what was admitted.
func TestIdleSliceGoesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		h := hotpath.New(f, f, hotpath.Options{From: 64})
		defer h.Close(context.Background())
		warm(t, h)
		if _, _, n := f.stats(); n == 3 {
			t.Fatal("no slice counted in the store")
		}
		time.Sleep(time.Second + 300*time.Millisecond) // Idle (1 s) and a sweep
		synctest.Wait()
		if _, _, n := f.stats(); n != 3 {
			t.Fatalf("the store counts %d for 3 admitted: the idle slice did not go back", n)
		}
	})
}
