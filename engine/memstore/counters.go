package memstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/algo"
)

var (
	errNoRoom       = fmt.Errorf("memstore: no room for new state: %w", engine.ErrNoRoom)
	errInvalidSpend = errors.New("memstore: spend outside the algorithm's ranges")
	errInvalidLease = errors.New("memstore: lease limit and time-to-live must be positive")
	errInvalidRule  = errors.New("memstore: rule has no algorithm")
	errUsageSpan    = errors.New("memstore: usage query spans too many days")
)

// validSpend reports whether sp is within the ranges package algo is exact for.
func validSpend(sp *engine.Spend) bool {
	switch sp.Counter.Algorithm {
	case engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket:
	default:
		return false
	}
	return sp.Limit >= 1 && sp.Limit <= algo.MaxLimit &&
		sp.Cost >= 0 && sp.Cost <= sp.Limit &&
		sp.Counter.WindowMS >= 1 && sp.Counter.WindowMS <= algo.MaxWindowMS
}

// decide runs the counter's algorithm on its state, stored as three integers:
// fixed_window {Window, Count, 0}, sliding_window {Window, Curr, Prev},
// token_bucket {TatMS, TatRem, Limit}. The zero state is no state for all three.
func decide(alg engine.Algorithm, st [3]int64, now, limit, window, cost int64) ([3]int64, algo.Result) {
	switch alg {
	case engine.FixedWindow:
		s, r := algo.FixedWindow(algo.FixedState{Window: st[0], Count: st[1]}, now, limit, window, cost)
		return [3]int64{s.Window, s.Count, 0}, r
	case engine.SlidingWindow:
		s, r := algo.SlidingWindow(algo.SlidingState{Window: st[0], Curr: st[1], Prev: st[2]}, now, limit, window, cost)
		return [3]int64{s.Window, s.Curr, s.Prev}, r
	default:
		s, r := algo.TokenBucket(algo.BucketState{TatMS: st[0], TatRem: st[1], Limit: st[2]}, now, limit, window, cost)
		return [3]int64{s.TatMS, s.TatRem, s.Limit}, r
	}
}

// Spend spends sp.Cost units of sp.Counter if they fit under sp.Limit (CONTRACT §4).
func (s *Store) Spend(_ context.Context, sp engine.Spend) (engine.Decision, error) {
	if s.closed.Load() {
		return engine.Decision{}, ErrClosed
	}
	if !validSpend(&sp) {
		return engine.Decision{}, errInvalidSpend
	}
	now := s.nowMS()
	var buf [keyBufSize]byte
	k := appendCounterKey(buf[:0], &sp.Counter)
	sh, h := s.shardOf(k)

	sh.mu.Lock()
	i, found := sh.find(h, k)
	var st [3]int64
	if found {
		e := &sh.entries[i]
		e.ref = true
		if e.exp > now {
			st = e.st
		}
	}
	st, res := decide(sp.Counter.Algorithm, st, now, sp.Limit, sp.Counter.WindowMS, sp.Cost)
	switch {
	case found:
		if res.Write {
			e := &sh.entries[i]
			e.st, e.exp = st, res.ExpiresMS
			sh.noteExp(res.ExpiresMS)
		}
	case res.Write:
		if err := sh.reserve(s, now); err != nil {
			sh.mu.Unlock()
			return engine.Decision{}, err
		}
		sh.insertCounter(h, string(k), st, res.ExpiresMS)
	}
	sh.mu.Unlock()

	return engine.Decision{
		Allowed:   res.Allowed,
		Limit:     sp.Limit,
		Remaining: res.Remaining,
		ResetMS:   res.ResetMS,
		NowMS:     now,
	}, nil
}

// Reset clears a counter; existed reports whether it held unexpired state (CONTRACT §12.14).
func (s *Store) Reset(_ context.Context, c engine.Counter) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	now := s.nowMS()
	var buf [keyBufSize]byte
	k := appendCounterKey(buf[:0], &c)
	sh, h := s.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, found := sh.find(h, k)
	if !found {
		return false, nil
	}
	existed := sh.entries[i].exp > now
	sh.removeCounter(i)
	return existed, nil
}
