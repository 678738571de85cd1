package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/hotpath"
)

// The reservations' tests run the store with the hot path above it (engine/hotpath), as
// leash serve does (spec §4.13); the store offers it the primitives (reserve.go).

// ReserveOptions are the hot path's settings in these tests; Off runs the store alone.
type ReserveOptions struct {
	Off               bool
	From, Share, Part int64
	Hits              int
	Idle              time.Duration
}

// rstore is a Store with the hot path deciding its Spend, SpendAll and Reset (h nil: the
// store alone).
type rstore struct {
	*Store
	h *hotpath.Reservations
}

func (r rstore) Spend(ctx context.Context, sp engine.Spend) (engine.Decision, error) {
	if r.h == nil {
		return r.Store.Spend(ctx, sp)
	}
	return r.h.Spend(ctx, sp)
}

func (r rstore) SpendAll(ctx context.Context, spends []engine.Spend, out []engine.Decision) error {
	if r.h == nil {
		return r.Store.SpendAll(ctx, spends, out)
	}
	return r.h.SpendAll(ctx, spends, out)
}

func (r rstore) Reset(ctx context.Context, c engine.Counter) (bool, error) {
	if r.h == nil {
		return r.Store.Reset(ctx, c)
	}
	return r.h.Reset(ctx, c)
}

// ReserveStats counts the requests decided from slices and the reserve calls.
func (r rstore) ReserveStats() (local, calls int64) {
	if r.h == nil {
		return 0, 0
	}
	return r.h.Stats()
}

// Sweeps counts the hot path's sweeper rounds finished so far (0 with none).
func (r rstore) Sweeps() int64 {
	if r.h == nil {
		return 0
	}
	return r.h.Sweeps()
}

// Close gives the slices back, then closes the store.
func (r rstore) Close() error {
	if r.h != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.h.Close(ctx)
		cancel()
	}
	return r.Store.Close()
}

// over puts the hot path with ro above s (none when ro.Off).
func over(s *Store, o Options, ro ReserveOptions) rstore {
	if ro.Off {
		return rstore{Store: s}
	}
	return rstore{Store: s, h: hotpath.New(s, s, hotpath.Options{From: ro.From, Share: ro.Share, Part: ro.Part,
		Hits: ro.Hits, Idle: ro.Idle, Clock: o.Clock, Logger: quietLogger()})}
}

// openReserving opens a store (openStore) with the hot path above it, both closed when
// the test ends (the hot path first).
func openReserving(t testing.TB, o Options, ro ReserveOptions) rstore {
	t.Helper()
	r := over(openStore(t, o), o, ro)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// openReservingUnmanaged is openReserving for a store the test closes itself.
func openReservingUnmanaged(ctx context.Context, o Options, ro ReserveOptions) (rstore, error) {
	s, err := Open(ctx, withLogger(o))
	if err != nil {
		return rstore{}, err
	}
	return over(s, o, ro), nil
}
