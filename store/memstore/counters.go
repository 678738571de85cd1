package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/algo"
	"github.com/leashd/leash/store/memstore/record"
)

var (
	errNoRoom       = fmt.Errorf("memstore: no room for new state: %w", engine.ErrNoRoom)
	errInvalidLease = errors.New("memstore: lease limit and time-to-live must be positive")
	errInvalidRule  = errors.New("memstore: rule has no algorithm")
	errUsageSpan    = errors.New("memstore: usage query spans too many days")
)

// decide runs the counter's algorithm on its state, stored as three integers:
// fixed_window {Window, Count, 0}, sliding_window {Window, Curr, Prev},
// token_bucket {TatMS, TatRem, Limit}. The zero state is no state for all three. With
// over, a denied cost is counted all the same (spec §4.12).
func decide(alg engine.Algorithm, st [3]int64, now, limit, window, cost int64, over bool) ([3]int64, algo.Result) {
	switch alg {
	case engine.FixedWindow:
		f := algo.FixedWindow
		if over {
			f = algo.FixedWindowOverdraft
		}
		s, r := f(algo.FixedState{Window: st[0], Count: st[1]}, now, limit, window, cost)
		return [3]int64{s.Window, s.Count, 0}, r
	case engine.SlidingWindow:
		f := algo.SlidingWindow
		if over {
			f = algo.SlidingWindowOverdraft
		}
		s, r := f(algo.SlidingState{Window: st[0], Curr: st[1], Prev: st[2]}, now, limit, window, cost)
		return [3]int64{s.Window, s.Curr, s.Prev}, r
	default:
		f := algo.TokenBucket
		if over {
			f = algo.TokenBucketOverdraft
		}
		s, r := f(algo.BucketState{TatMS: st[0], TatRem: st[1], Limit: st[2]}, now, limit, window, cost)
		return [3]int64{s.TatMS, s.TatRem, s.Limit}, r
	}
}

// Spend spends sp.Cost units of sp.Counter if they fit under sp.Limit (spec §4.6–§4.9).
func (s *decisions) Spend(_ context.Context, sp engine.Spend) (engine.Decision, error) {
	if s.closed.Load() {
		return engine.Decision{}, ErrClosed
	}
	if err := sp.Validate(); err != nil {
		return engine.Decision{}, fmt.Errorf("memstore: spend: %w", err)
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
	st, res := decide(sp.Counter.Algorithm, st, now, sp.Limit, sp.Counter.WindowMS, sp.Cost, sp.Overdraft)
	switch {
	case found:
		if res.Write {
			if err := sh.putCounterRec(k, st, res.ExpiresMS); err != nil {
				sh.mu.Unlock()
				return engine.Decision{}, fmt.Errorf("memstore: spend: %w", err)
			}
			e := &sh.entries[i]
			e.st, e.exp = st, res.ExpiresMS
			sh.noteExp(res.ExpiresMS)
		}
	case res.Write:
		if err := sh.reserve(s.core, now); err != nil {
			sh.mu.Unlock()
			return engine.Decision{}, err
		}
		if err := sh.putCounterRec(k, st, res.ExpiresMS); err != nil {
			sh.mu.Unlock()
			return engine.Decision{}, fmt.Errorf("memstore: spend: %w", err)
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

// SpendAll decides spends together under their shards' locks: each gets its own verdict,
// and the costs are written only when every one is allowed, except that an overdraft
// spend is counted whatever the others say (spec §4.12).
func (s *decisions) SpendAll(_ context.Context, spends []engine.Spend, out []engine.Decision) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := engine.ValidateSpendAll(spends, out); err != nil {
		return fmt.Errorf("memstore: spend all: %w", err)
	}
	n := len(spends)
	var (
		bufs  [engine.MaxSpendAll][keyBufSize]byte
		keys  [engine.MaxSpendAll][]byte
		hs    [engine.MaxSpendAll]uint64
		shs   [engine.MaxSpendAll]*shard
		sts   [engine.MaxSpendAll][3]int64
		res   [engine.MaxSpendAll]algo.Result
		order [engine.MaxSpendAll]int
	)
	for i := range n {
		keys[i] = appendCounterKey(bufs[i][:0], &spends[i].Counter)
		shs[i], hs[i] = s.shardOf(keys[i])
		order[i] = int(hs[i] & s.mask)
	}
	// Lock each shard once, in index order, so two SpendAlls cannot deadlock.
	idx := order[:n]
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, k := range idx {
		s.shards[k].mu.Lock()
	}
	defer func() {
		for _, k := range idx {
			s.shards[k].mu.Unlock()
		}
	}()

	now := s.nowMS()
	all := true
	for i := range n {
		sp, sh := &spends[i], shs[i]
		var st [3]int64
		if j, found := sh.find(hs[i], keys[i]); found {
			e := &sh.entries[j]
			e.ref = true
			if e.exp > now {
				st = e.st
			}
		}
		sts[i], res[i] = decide(sp.Counter.Algorithm, st, now, sp.Limit, sp.Counter.WindowMS, sp.Cost, sp.Overdraft)
		all = all && res[i].Allowed
		out[i] = engine.Decision{Allowed: res[i].Allowed, Limit: sp.Limit, Remaining: res[i].Remaining, ResetMS: res[i].ResetMS, NowMS: now}
	}
	if !all {
		// Only overdraft spends count when one of them denies (spec §4.12).
		for i := range n {
			if !spends[i].Overdraft {
				res[i].Write = false
			}
		}
	}
	// Make room for new counters before writing any, so a full store changes nothing.
	for i := range n {
		if _, found := shs[i].find(hs[i], keys[i]); res[i].Write && !found {
			if err := shs[i].reserve(s.core, now); err != nil {
				return err
			}
		}
	}
	if s.j != nil {
		// Record every write together, so a crash keeps all or none of them.
		b := s.j.Batch()
		for i := range n {
			if res[i].Write {
				var kb, vb [recBufSize]byte
				b.Set(record.CounterKey(kb[:0], keys[i]), record.CounterValue(vb[:0], sts[i], res[i].ExpiresMS))
			}
		}
		if err := b.Commit(); err != nil {
			return fmt.Errorf("memstore: spend all: %w", err)
		}
	}
	for i := range n {
		if !res[i].Write {
			continue
		}
		sh := shs[i]
		if j, found := sh.find(hs[i], keys[i]); found {
			e := &sh.entries[j]
			e.st, e.exp = sts[i], res[i].ExpiresMS
			sh.noteExp(res[i].ExpiresMS)
			continue
		}
		if err := sh.reserve(s.core, now); err != nil {
			return err
		}
		sh.insertCounter(hs[i], string(keys[i]), sts[i], res[i].ExpiresMS)
	}
	return nil
}

// Reset clears a counter; existed reports whether it held unexpired state (spec §4.11).
func (s *decisions) Reset(_ context.Context, c engine.Counter) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	if err := c.Validate(); err != nil {
		return false, fmt.Errorf("memstore: reset: %w", err)
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
