package memstore

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"sync"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore/record"
)

// nilIndex ends the free list.
const nilIndex = -1

// entry is one rate counter in a shard's slab. A free slot has an empty key.
type entry struct {
	key string   // encoded counter key
	st  [3]int64 // algorithm state; see decide
	exp int64    // Unix ms from which the state is dead
	// nextFree links free slots.
	nextFree int32
	// ref is CLOCK's reference bit: set when the counter is used, cleared when the
	// eviction hand passes.
	ref bool
}

// shard holds a slice of the key space behind one mutex.
//
// Counters live in a slab (entries). counters indexes it by the 64-bit hash of the
// encoded key, which also chose the shard; the slot's key is compared on every lookup,
// and the rare key whose hash is already taken by another key is indexed in collided.
// Eviction is CLOCK (second chance): a hand sweeps the slab, clearing reference bits,
// and evicts the first counter not used since the hand last passed it. A new counter
// starts unreferenced, so keys used once go before keys used again.
type shard struct {
	mu       sync.Mutex
	seed     maphash.Seed
	counters map[uint64]int32
	collided map[string]int32
	entries  []entry
	free     int32 // head of the free-slot list
	hand     int32 // CLOCK hand in entries
	cursor   int32 // sweeper position in entries
	leases   map[string]*leaseSet
	rules    map[string]*rulePair
	// leaseCount is the number of leases held in all lease sets (expired ones not yet
	// purged included): each takes one entry of the capacity.
	leaseCount int
	capacity   int     // bound on counters plus leases
	minExp     int64   // no counter or lease expires before this
	j          Journal // the store's; nil: none
	_          [64]byte
}

func (sh *shard) init(seed maphash.Seed, capacity int, j Journal) {
	sh.seed = seed
	sh.j = j
	sh.counters = make(map[uint64]int32)
	sh.collided = make(map[string]int32)
	sh.leases = make(map[string]*leaseSet)
	sh.rules = make(map[string]*rulePair)
	sh.free = nilIndex
	sh.capacity = capacity
	sh.minExp = math.MaxInt64
}

// numCounters is the number of counters held.
func (sh *shard) numCounters() int { return len(sh.counters) + len(sh.collided) }

// live is the number of entries counted against the capacity: counters and leases.
func (sh *shard) live() int { return sh.numCounters() + sh.leaseCount }

// purgeSet drops the leases of ls expired at now, keeping leaseCount in step.
func (sh *shard) purgeSet(ls *leaseSet, now int64) {
	n := len(ls.h)
	if sh.j != nil {
		for len(ls.h) > 0 && ls.h[0].exp <= now {
			sh.dropLeaseRec(ls.key, ls.h[0].token)
			ls.removeAt(0)
		}
	}
	ls.purge(now)
	sh.leaseCount -= n - len(ls.h)
}

// noteExp keeps minExp a lower bound of every expiry in the shard.
func (sh *shard) noteExp(exp int64) {
	if exp < sh.minExp {
		sh.minExp = exp
	}
}

// find returns the slot of the counter with encoded key k and hash h.
func (sh *shard) find(h uint64, k []byte) (int32, bool) {
	if i, ok := sh.counters[h]; ok && sh.entries[i].key == string(k) {
		return i, true
	}
	if len(sh.collided) > 0 {
		i, ok := sh.collided[string(k)]
		return i, ok
	}
	return 0, false
}

// insertCounter adds a counter; the caller has made room.
func (sh *shard) insertCounter(h uint64, key string, st [3]int64, exp int64) {
	_, taken := sh.counters[h]
	sh.placeCounter(h, taken, key, st, exp)
}

// placeCounter adds a counter whose hash h is taken (or not) by another counter; the
// caller has made room.
func (sh *shard) placeCounter(h uint64, taken bool, key string, st [3]int64, exp int64) {
	var i int32
	if sh.free != nilIndex {
		i = sh.free
		sh.free = sh.entries[i].nextFree
	} else {
		sh.entries = append(sh.entries, entry{})
		i = int32(len(sh.entries) - 1)
	}
	sh.entries[i] = entry{key: key, st: st, exp: exp, nextFree: nilIndex}
	if taken {
		sh.collided[key] = i
	} else {
		sh.counters[h] = i
	}
	sh.noteExp(exp)
}

// removeCounter frees counter slot i.
func (sh *shard) removeCounter(i int32) {
	e := &sh.entries[i]
	if sh.j != nil {
		var b [recBufSize]byte
		_ = sh.j.Delete(record.CounterKey(b[:0], e.key))
	}
	h := maphash.String(sh.seed, e.key) // as maphash.Bytes of the encoded key
	if j, ok := sh.counters[h]; ok && j == i {
		delete(sh.counters, h)
	} else {
		delete(sh.collided, e.key)
	}
	*e = entry{nextFree: sh.free}
	sh.free = i
}

// evictOne removes the counter the CLOCK hand picks; false when there is none.
func (sh *shard) evictOne() bool {
	n := int32(len(sh.entries))
	if sh.numCounters() == 0 || n == 0 {
		return false
	}
	// Two turns of the hand clear every reference bit, so this ends.
	for range 2*n + 1 {
		if sh.hand >= n {
			sh.hand = 0
		}
		i := sh.hand
		sh.hand++
		e := &sh.entries[i]
		if e.key == "" {
			continue
		}
		if e.ref {
			e.ref = false
			continue
		}
		sh.removeCounter(i)
		return true
	}
	return false
}

// reserve makes room for one new counter or lease: expired state first, then a counter
// chosen by CLOCK. It fails with errNoRoom when only live leases remain.
func (sh *shard) reserve(s *core, now int64) error {
	if sh.live() < sh.capacity {
		return nil
	}
	if now >= sh.minExp {
		sh.reclaim(now)
		if sh.live() < sh.capacity {
			return nil
		}
	}
	if !sh.evictOne() {
		return errNoRoom
	}
	s.evictions.Add(1)
	return nil
}

// reclaim removes every expired counter and lease and recomputes minExp exactly.
func (sh *shard) reclaim(now int64) {
	next := int64(math.MaxInt64)
	for i := range sh.entries {
		e := &sh.entries[i]
		if e.key == "" {
			continue
		}
		if e.exp <= now {
			sh.removeCounter(int32(i))
		} else {
			next = min(next, e.exp)
		}
	}
	for k, ls := range sh.leases {
		sh.purgeSet(ls, now)
		if len(ls.h) == 0 {
			delete(sh.leases, k)
		} else {
			next = min(next, ls.h[0].exp) // each lease is an entry: the earliest frees one
		}
	}
	sh.minExp = next
}

// sweep reclaims expired state from up to budget counter slots, continuing where the last
// sweep stopped, and from every lease set; then it compacts a mostly empty slab.
func (sh *shard) sweep(now int64, budget int) {
	n := int32(len(sh.entries))
	for j := 0; j < budget && j < int(n); j++ {
		if sh.cursor >= n {
			sh.cursor = 0
		}
		i := sh.cursor
		sh.cursor++
		if e := &sh.entries[i]; e.key != "" && e.exp <= now {
			sh.removeCounter(i)
		}
	}
	for k, ls := range sh.leases {
		sh.purgeSet(ls, now)
		if len(ls.h) == 0 {
			delete(sh.leases, k)
		}
	}
	if len(sh.entries) >= 1024 && sh.numCounters()*4 < len(sh.entries) {
		sh.compact()
	}
}

// compact moves the live counters into a new slab and maps sized for them, so memory
// shrinks after many keys died.
func (sh *shard) compact() {
	entries := make([]entry, 0, 2*sh.numCounters()+8)
	counters := make(map[uint64]int32, sh.numCounters())
	collided := make(map[string]int32)
	for _, e := range sh.entries {
		if e.key == "" {
			continue
		}
		i := int32(len(entries))
		e.nextFree = nilIndex
		entries = append(entries, e)
		h := maphash.String(sh.seed, e.key)
		if _, taken := counters[h]; taken {
			collided[e.key] = i
		} else {
			counters[h] = i
		}
	}
	sh.entries, sh.counters, sh.collided = entries, counters, collided
	sh.free, sh.hand, sh.cursor = nilIndex, 0, 0
}

// Key encoding: strings are length-prefixed (record.AppendString), so the encoding is
// injective; the last string needs no prefix.

// keyBufSize is the stack buffer for encoded keys; longer keys spill to the heap.
const keyBufSize = 256

func appendCounterKey(b []byte, c *engine.Counter) []byte {
	b = record.AppendString(b, c.Account)
	b = record.AppendString(b, c.Namespace)
	b = append(b, byte(c.Algorithm))
	b = binary.AppendUvarint(b, uint64(c.WindowMS))
	return append(b, c.Key...)
}

func appendLeaseKey(b []byte, set *engine.LeaseSet) []byte {
	b = record.AppendString(b, set.Account)
	b = record.AppendString(b, set.Namespace)
	return append(b, set.Key...)
}

func appendRuleKey(b []byte, account, namespace string) []byte {
	b = record.AppendString(b, account)
	return append(b, namespace...)
}

// dropLeaseRec records through the journal that a lease is no longer held.
func (sh *shard) dropLeaseRec(set, token string) {
	var b [recBufSize]byte
	_ = sh.j.Delete(record.LeaseKey(b[:0], set, token))
}

// putLeaseRec records a held lease through the journal, if there is one.
func (sh *shard) putLeaseRec(set string, l lease) error {
	if sh.j == nil {
		return nil
	}
	var b, v [recBufSize]byte
	return sh.j.Set(record.LeaseKey(b[:0], set, l.token), record.AppendVarints(v[:0], l.exp, l.ttl))
}

// putCounterRec records a counter's state through the journal, if there is one.
func (sh *shard) putCounterRec(key []byte, st [3]int64, exp int64) error {
	if sh.j == nil {
		return nil
	}
	var b, v [recBufSize]byte
	return sh.j.Set(record.CounterKey(b[:0], key), record.CounterValue(v[:0], st, exp))
}
