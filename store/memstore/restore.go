package memstore

import (
	"container/heap"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore/record"
)

// Restore loads one journal record (see Journal) into the store, before it serves: the
// records may come in any order, except that an account must come before its keys (as
// they do in bytewise key order). keep is false when the record is dead (expired, beyond
// its retention, or a key of an account that is gone): the caller should delete it. A
// record Restore cannot read is an error. Restoring writes nothing to the journal but
// removals: of a counter evicted to make room, or of an audit entry beyond the bounds.
func (s *restorer) Restore(key, value []byte) (keep bool, err error) {
	if len(key) == 0 {
		return false, record.ErrMalformed
	}
	now := s.nowMS()
	rest := key[1:]
	switch key[0] {
	case record.Counter:
		return s.restoreCounter(rest, value, now)
	case record.Lease:
		return s.restoreLease(rest, value, now)
	case record.Rule:
		return s.restoreRule(rest, value)
	case record.Daily, record.Monthly, record.Batch:
		return s.restoreUsage(key[0], rest, value, now)
	case record.Webhook, record.Event, record.Once:
		return s.restoreHook(key[0], rest, value, now)
	case record.Account, record.Key, record.Version:
		return s.restoreAccount(key[0], rest, value)
	case record.Audit:
		return s.restoreAudit(value, now)
	}
	return false, fmt.Errorf("%w: kind %q", record.ErrMalformed, key[0])
}

func (s *restorer) restoreCounter(k, v []byte, now int64) (bool, error) {
	var st [3]int64
	var exp int64
	if _, err := record.ReadVarints(v, &st[0], &st[1], &st[2], &exp); err != nil {
		return false, err
	}
	if exp <= now {
		return false, nil
	}
	sh, h := s.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// One lookup of the hash: at Open every counter is new, and its hash free.
	i, taken := sh.counters[h]
	if taken && sh.entries[i].key == string(k) {
		sh.entries[i].st, sh.entries[i].exp = st, exp
		sh.noteExp(exp)
		return true, nil
	}
	if taken {
		if i, found := sh.collided[string(k)]; found {
			sh.entries[i].st, sh.entries[i].exp = st, exp
			sh.noteExp(exp)
			return true, nil
		}
	}
	if sh.live() >= sh.capacity {
		if err := sh.reserve(s.core, now); err != nil {
			return false, nil // full of live leases: the counter starts over, as if evicted
		}
		_, taken = sh.counters[h] // reserve may have removed the counter holding h
	}
	sh.placeCounter(h, taken, string(k), st, exp)
	return true, nil
}

// ExpectCounters sizes the store for about n counters about to be restored, so loading
// them does not grow each shard's index and slab step by step. It only reserves memory
// (no more than each shard's bound), and does nothing to a shard that holds counters.
func (s *restorer) ExpectCounters(n int) {
	if n <= 0 {
		return
	}
	per := n/len(s.shards) + n/len(s.shards)/8 + 16 // hashing spreads keys a little unevenly
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if sh.numCounters() == 0 && len(sh.entries) == 0 {
			c := min(per, sh.capacity)
			sh.counters = make(map[uint64]int32, c)
			sh.entries = make([]entry, 0, c)
		}
		sh.mu.Unlock()
	}
}

func (s *restorer) restoreLease(k, v []byte, now int64) (bool, error) {
	set, rest, err := record.ReadString(k)
	if err != nil {
		return false, err
	}
	l := lease{token: string(rest)}
	if _, err := record.ReadVarints(v, &l.exp, &l.ttl); err != nil {
		return false, err
	}
	if l.exp <= now {
		return false, nil
	}
	sh, _ := s.shardOf([]byte(set))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ls := sh.leases[set]
	if ls != nil {
		if i, held := ls.pos[l.token]; held {
			ls.h[i] = l
			ls.fix(i)
			sh.noteExp(l.exp)
			return true, nil
		}
	}
	// A held lease is never dropped: a shard with no room (keys are spread by a seed of
	// this process) holds it over its bound until leases end.
	_ = sh.reserve(s.core, now)
	if ls == nil {
		ls = newLeaseSet(set)
		sh.leases[set] = ls
	}
	ls.add(l)
	sh.leaseCount++
	sh.noteExp(l.exp)
	return true, nil
}

func (s *restorer) restoreRule(k, v []byte) (bool, error) {
	if len(k) == 0 {
		return false, record.ErrMalformed
	}
	kind, rk := engine.RuleKind(k[len(k)-1]), k[:len(k)-1]
	r, err := record.DecodeRule(v)
	if err != nil {
		return false, err
	}
	sh, _ := s.shardOf(rk)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.rules[string(rk)]
	if p == nil {
		p = new(rulePair)
		sh.rules[string(rk)] = p
	}
	if kind == engine.ConcurrentRule {
		p.concurrent = r
	} else {
		p.rate = r
	}
	return true, nil
}

func (s *restorer) restoreUsage(kind byte, k, v []byte, now int64) (bool, error) {
	u := &s.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	today := engine.DayOf(now)
	switch kind {
	case record.Daily:
		acct, rest, err := record.ReadString(k)
		if err != nil {
			return false, err
		}
		ns, rest, err := record.ReadString(rest)
		if err != nil {
			return false, err
		}
		var day, total, blocked int64
		if _, err := record.ReadVarints(rest, &day); err != nil {
			return false, err
		}
		if _, err := record.ReadVarints(v, &total, &blocked); err != nil {
			return false, err
		}
		if engine.Day(day) < today-keepDays {
			return false, nil
		}
		u.daily[engine.UsageKey{Account: acct, Namespace: ns, Day: engine.Day(day)}] = engine.UsageCount{Total: total, Blocked: blocked}
	case record.Monthly:
		acct, rest, err := record.ReadString(k)
		if err != nil {
			return false, err
		}
		var month, total int64
		if _, err := record.ReadVarints(rest, &month); err != nil {
			return false, err
		}
		if _, err := record.ReadVarints(v, &total); err != nil {
			return false, err
		}
		if engine.Month(month) < today.Month()-keepMonths {
			return false, nil
		}
		u.monthly[accountMonth{acct, engine.Month(month)}] = total
	default:
		var at int64
		if _, err := record.ReadVarints(v, &at); err != nil {
			return false, err
		}
		if now-at > keepBatchesMS {
			return false, nil
		}
		u.batches[string(k)] = at
	}
	return true, nil
}

func (s *restorer) restoreHook(kind byte, k, v []byte, now int64) (bool, error) {
	hs := &s.hooks
	hs.lock()
	defer hs.mu.Unlock()
	switch kind {
	case record.Webhook:
		var w engine.Webhook
		if err := json.Unmarshal(v, &w); err != nil {
			return false, fmt.Errorf("%w: webhook: %w", record.ErrMalformed, err)
		}
		hs.webhooks[string(k)] = w
	case record.Event:
		due, n := binary.Varint(v)
		if n <= 0 {
			return false, record.ErrMalformed
		}
		e := &outboxEntry{dueMS: due}
		if err := json.Unmarshal(v[n:], &e.ev); err != nil {
			return false, fmt.Errorf("%w: event: %w", record.ErrMalformed, err)
		}
		if old, dup := hs.events[e.ev.ID]; dup {
			heap.Remove(&hs.due, old.index)
		}
		hs.events[e.ev.ID] = e
		heap.Push(&hs.due, e)
	default:
		var until int64
		if _, err := record.ReadVarints(v, &until); err != nil {
			return false, err
		}
		if until <= now {
			return false, nil
		}
		hs.once[string(k)] = until
	}
	return true, nil
}

func (s *restorer) restoreAccount(kind byte, k, v []byte) (bool, error) {
	a := &s.accts
	a.lockInit()
	defer a.mu.Unlock()
	switch kind {
	case record.Account:
		var acc engine.StoredAccount
		if err := json.Unmarshal(v, &acc); err != nil {
			return false, fmt.Errorf("%w: account: %w", record.ErrMalformed, err)
		}
		acc.Keys = 0
		a.accounts[acc.ID] = acc
	case record.Key:
		var key engine.StoredKey
		if err := json.Unmarshal(v, &key); err != nil {
			return false, fmt.Errorf("%w: key: %w", record.ErrMalformed, err)
		}
		if _, ok := a.accounts[key.Account]; !ok {
			return false, nil
		}
		if a.keys[key.Account] == nil {
			a.keys[key.Account] = make(map[string]engine.StoredKey)
		}
		a.keys[key.Account][key.ID] = key
	default:
		var version int64
		if _, err := record.ReadVarints(v, &version); err != nil {
			return false, err
		}
		a.version = max(a.version, version)
	}
	return true, nil
}

func (s *restorer) restoreAudit(v []byte, now int64) (bool, error) {
	var e engine.AuditEntry
	if err := json.Unmarshal(v, &e); err != nil {
		return false, fmt.Errorf("%w: audit entry: %w", record.ErrMalformed, err)
	}
	if e.ID < engine.AuditCutoff(now) {
		return false, nil
	}
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	if strings.Compare(e.ID, a.last) > 0 {
		a.last = e.ID
	}
	a.add(e, s.j) // what replaying drops leaves the journal too
	return true, nil
}
