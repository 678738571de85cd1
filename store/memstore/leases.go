package memstore

import (
	"context"
	"fmt"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore/record"
)

// lease is one held lease: unexpired while exp > now.
type lease struct {
	token string
	exp   int64 // Unix ms
	ttl   int64 // the time-to-live it was acquired with: renew's default
}

// leaseSet is the leases of one (account, namespace, key): a min-heap by expiry, so the
// soonest-expiring lease is h[0], with an index from token to heap position.
type leaseSet struct {
	key string // encoded set key, as in shard.leases
	h   []lease
	pos map[string]int
}

func newLeaseSet(key string) *leaseSet {
	return &leaseSet{key: key, pos: make(map[string]int)}
}

func (ls *leaseSet) less(i, j int) bool { return ls.h[i].exp < ls.h[j].exp }

func (ls *leaseSet) swap(i, j int) {
	ls.h[i], ls.h[j] = ls.h[j], ls.h[i]
	ls.pos[ls.h[i].token] = i
	ls.pos[ls.h[j].token] = j
}

func (ls *leaseSet) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !ls.less(i, p) {
			return
		}
		ls.swap(i, p)
		i = p
	}
}

func (ls *leaseSet) down(i int) {
	n := len(ls.h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && ls.less(c+1, c) {
			c++
		}
		if !ls.less(c, i) {
			return
		}
		ls.swap(i, c)
		i = c
	}
}

// fix restores the heap after h[i].exp changed.
func (ls *leaseSet) fix(i int) {
	ls.up(i)
	ls.down(i)
}

func (ls *leaseSet) add(l lease) {
	ls.h = append(ls.h, l)
	i := len(ls.h) - 1
	ls.pos[l.token] = i
	ls.up(i)
}

// removeAt removes h[i].
func (ls *leaseSet) removeAt(i int) {
	last := len(ls.h) - 1
	delete(ls.pos, ls.h[i].token)
	if i != last {
		ls.h[i] = ls.h[last]
		ls.pos[ls.h[i].token] = i
	}
	ls.h[last] = lease{}
	ls.h = ls.h[:last]
	if i != last {
		ls.fix(i)
	}
}

// purge drops the leases expired at now.
func (ls *leaseSet) purge(now int64) {
	for len(ls.h) > 0 && ls.h[0].exp <= now {
		ls.removeAt(0)
	}
}

// Acquire adds the lease token to set when fewer than limit unexpired leases are held
// (spec §5.2). A token already held is renewed with ttlMS and stays counted once. A new
// lease takes one entry of MaxEntries: with no room (only live leases left in its
// shard) the error wraps engine.ErrNoRoom.
func (s *decisions) Acquire(_ context.Context, set engine.LeaseSet, token string, limit, ttlMS int64) (engine.LeaseDecision, error) {
	if s.closed.Load() {
		return engine.LeaseDecision{}, ErrClosed
	}
	if limit < 1 || ttlMS < 1 {
		return engine.LeaseDecision{}, errInvalidLease
	}
	now := s.nowMS()
	var buf [keyBufSize]byte
	k := appendLeaseKey(buf[:0], &set)
	sh, _ := s.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()

	d := engine.LeaseDecision{Limit: limit, NowMS: now}
	ls := sh.lookupLeases(k, now) // nil when every lease expired: the set starts over
	if ls != nil {
		if i, held := ls.pos[token]; held {
			if err := sh.putLeaseRec(ls.key, lease{token: token, exp: now + ttlMS, ttl: ttlMS}); err != nil {
				return engine.LeaseDecision{}, fmt.Errorf("memstore: acquire: %w", err)
			}
			ls.h[i].exp, ls.h[i].ttl = now+ttlMS, ttlMS
			ls.fix(i)
			sh.noteExp(now + ttlMS)
			d.Allowed, d.Active, d.ResetMS = true, int64(len(ls.h)), ttlMS
			return d, nil
		}
		if n := int64(len(ls.h)); n >= limit {
			d.Active, d.ResetMS = n, ls.h[0].exp-now
			return d, nil
		}
	}
	// Each lease held takes one entry: make room (never by evicting a live lease).
	if err := sh.reserve(s.core, now); err != nil {
		return engine.LeaseDecision{}, err
	}
	l := lease{token: token, exp: now + ttlMS, ttl: ttlMS}
	if err := sh.putLeaseRec(string(k), l); err != nil {
		return engine.LeaseDecision{}, fmt.Errorf("memstore: acquire: %w", err)
	}
	if ls == nil {
		ls = newLeaseSet(string(k))
		sh.leases[ls.key] = ls
	}
	ls.add(l)
	sh.leaseCount++
	sh.noteExp(ls.h[0].exp)
	d.Allowed, d.Active, d.ResetMS = true, int64(len(ls.h)), ttlMS
	return d, nil
}

// lookupLeases returns the set's leases purged at now, deleting a set left empty.
func (sh *shard) lookupLeases(k []byte, now int64) *leaseSet {
	ls := sh.leases[string(k)]
	if ls == nil {
		return nil
	}
	sh.purgeSet(ls, now)
	if len(ls.h) == 0 {
		delete(sh.leases, ls.key)
		return nil
	}
	return ls
}

// Release removes the lease token from set if it is held and unexpired.
func (s *decisions) Release(_ context.Context, set engine.LeaseSet, token string) (engine.ReleaseResult, error) {
	if s.closed.Load() {
		return engine.ReleaseResult{}, ErrClosed
	}
	now := s.nowMS()
	var buf [keyBufSize]byte
	k := appendLeaseKey(buf[:0], &set)
	sh, _ := s.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ls := sh.lookupLeases(k, now)
	if ls == nil {
		return engine.ReleaseResult{}, nil
	}
	var r engine.ReleaseResult
	if i, held := ls.pos[token]; held {
		if sh.j != nil {
			var b [recBufSize]byte
			if err := sh.j.Delete(record.LeaseKey(b[:0], ls.key, token)); err != nil {
				return engine.ReleaseResult{}, fmt.Errorf("memstore: release: %w", err)
			}
		}
		ls.removeAt(i)
		sh.leaseCount--
		r.Released = true
	}
	r.Active = int64(len(ls.h))
	if r.Active == 0 {
		delete(sh.leases, ls.key)
	} else {
		sh.noteExp(ls.h[0].exp)
	}
	return r, nil
}

// Renew sets a held lease's expiry to now + ttlMS; ttlMS 0 means the time-to-live the
// lease was acquired with.
func (s *decisions) Renew(_ context.Context, set engine.LeaseSet, token string, ttlMS int64) (engine.RenewResult, error) {
	if s.closed.Load() {
		return engine.RenewResult{}, ErrClosed
	}
	if ttlMS < 0 {
		return engine.RenewResult{}, errInvalidLease
	}
	now := s.nowMS()
	var buf [keyBufSize]byte
	k := appendLeaseKey(buf[:0], &set)
	sh, _ := s.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ls := sh.lookupLeases(k, now)
	if ls == nil {
		return engine.RenewResult{}, nil
	}
	r := engine.RenewResult{Active: int64(len(ls.h))}
	if i, held := ls.pos[token]; held {
		ttl := ttlMS
		if ttl == 0 {
			ttl = ls.h[i].ttl
		}
		if err := sh.putLeaseRec(ls.key, lease{token: token, exp: now + ttl, ttl: ls.h[i].ttl}); err != nil {
			return engine.RenewResult{}, fmt.Errorf("memstore: renew: %w", err)
		}
		ls.h[i].exp = now + ttl
		ls.fix(i)
		sh.noteExp(ls.h[0].exp)
		r.Renewed, r.ResetMS = true, ttl
	}
	return r, nil
}
