// Package overlimit is the hot path's over-limit cache (spec §9.13): denials answered
// from memory, with no store operation, until the store's own reset. The engine keeps one
// in front of its store, keyed by counter and limit; package hotpath's reservations are
// the other half of the hot path, for admissions.
package overlimit

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"
)

// The local over-limit cache (spec §9.13). Once the store denies a counter under a limit,
// later requests of the same counter, limit and at least the same cost are denied from
// memory, with no store operation, until the instant the store said that request could be
// allowed; then the entry is forgotten and the store decides again. The store's reset is
// a duration from its own clock, so the entry's deadline is kept on this process's
// monotonic clock (the moment the verdict arrived, plus the reset): the cache never
// answers "allowed" and never denies past the store's own reset by more than the
// verdict's one-way latency. It is bounded: when full, the entry soonest to expire goes.

// key is one counter under one limit.
type key[C comparable] struct {
	counter C
	limit   int64
}

// entry is a denial: requests of at least cost are denied until deadline.
type entry[C comparable] struct {
	key      key[C]
	cost     int64
	deadline time.Time // monotonic
	index    int       // in the heap
}

// Cache is the bounded set of cached denials of counters C, ordered by deadline.
type Cache[C comparable] struct {
	max  int
	hits atomic.Int64

	mu      sync.Mutex
	entries map[key[C]]*entry[C]
	order   deadlineHeap[C]
}

// New returns a cache of at most max denials; nil (off) when max is not positive.
func New[C comparable](max int) *Cache[C] {
	if max <= 0 {
		return nil
	}
	return &Cache[C]{max: max, entries: make(map[key[C]]*entry[C])}
}

// Hits is the number of requests denied from the cache.
func (c *Cache[C]) Hits() int64 { return c.hits.Load() }

// Denied reports whether a request of cost on counter under limit is denied from memory,
// and for how long.
func (c *Cache[C]) Denied(counter C, limit, cost int64, now time.Time) (time.Duration, bool) {
	k := key[C]{counter, limit}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[k]
	if e == nil {
		return 0, false
	}
	left := e.deadline.Sub(now)
	if left <= 0 {
		c.remove(e)
		return 0, false
	}
	if cost < e.cost {
		return 0, false
	}
	c.hits.Add(1)
	return left, true
}

// Add records the store's denial of cost on counter under limit, lasting resetMS from now.
func (c *Cache[C]) Add(counter C, limit, cost, resetMS int64, now time.Time) {
	if resetMS <= 0 {
		return
	}
	k := key[C]{counter, limit}
	deadline := now.Add(time.Duration(resetMS) * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[k]; e != nil {
		e.cost, e.deadline = min(e.cost, cost), deadline
		heap.Fix(&c.order, e.index)
		return
	}
	for len(c.entries) >= c.max {
		c.remove(c.order[0]) // the soonest to expire
	}
	e := &entry[C]{key: k, cost: cost, deadline: deadline}
	c.entries[k] = e
	heap.Push(&c.order, e)
}

// Forget drops every entry of counter (a reset on this instance).
func (c *Cache[C]) Forget(counter C) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if k.counter == counter {
			c.remove(e)
		}
	}
}

func (c *Cache[C]) remove(e *entry[C]) {
	heap.Remove(&c.order, e.index)
	delete(c.entries, e.key)
}

// Len is the number of entries, expired ones not yet dropped included.
func (c *Cache[C]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// deadlineHeap orders entries by deadline, soonest first.
type deadlineHeap[C comparable] []*entry[C]

func (h deadlineHeap[C]) Len() int           { return len(h) }
func (h deadlineHeap[C]) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h deadlineHeap[C]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *deadlineHeap[C]) Push(x any) {
	e := x.(*entry[C])
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *deadlineHeap[C]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
