package engine

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

// cacheKey is one counter under one limit.
type cacheKey struct {
	counter Counter
	limit   int64
}

// cacheEntry is a denial: requests of at least cost are denied until deadline.
type cacheEntry struct {
	key      cacheKey
	cost     int64
	deadline time.Time // monotonic
	index    int       // in the heap
}

// overLimitCache is the bounded set of cached denials, ordered by deadline.
type overLimitCache struct {
	max  int
	hits atomic.Int64

	mu      sync.Mutex
	entries map[cacheKey]*cacheEntry
	order   deadlineHeap
}

func newOverLimitCache(max int) *overLimitCache {
	if max <= 0 {
		return nil
	}
	return &overLimitCache{max: max, entries: make(map[cacheKey]*cacheEntry)}
}

// denied reports whether a request of cost on k is denied from memory, and for how long.
func (c *overLimitCache) denied(k cacheKey, cost int64, now time.Time) (time.Duration, bool) {
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

// add records the store's denial of cost on k, lasting resetMS from now.
func (c *overLimitCache) add(k cacheKey, cost, resetMS int64, now time.Time) {
	if resetMS <= 0 {
		return
	}
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
	e := &cacheEntry{key: k, cost: cost, deadline: deadline}
	c.entries[k] = e
	heap.Push(&c.order, e)
}

// forget drops every entry of counter (a reset on this instance).
func (c *overLimitCache) forget(counter Counter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if k.counter == counter {
			c.remove(e)
		}
	}
}

func (c *overLimitCache) remove(e *cacheEntry) {
	heap.Remove(&c.order, e.index)
	delete(c.entries, e.key)
}

// len is the number of entries, expired ones not yet dropped included.
func (c *overLimitCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// deadlineHeap orders entries by deadline, soonest first.
type deadlineHeap []*cacheEntry

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *deadlineHeap) Push(x any) {
	e := x.(*cacheEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// storeClock estimates the store's clock between store operations: the last time the
// store reported, advanced by this process's monotonic clock since. Only answers taken
// wholly from the over-limit cache are dated by it (they reach no store).
type storeClock struct {
	start time.Time
	ms    atomic.Int64 // the store's last reported time, Unix ms (0: none yet)
	at    atomic.Int64 // when it was reported: ns since start, monotonic
}

func (c *storeClock) observe(ms int64) {
	c.ms.Store(ms)
	c.at.Store(int64(time.Since(c.start)))
}

// now returns the estimate; ok is false before the store ever reported.
func (c *storeClock) now() (ms int64, ok bool) {
	ms = c.ms.Load()
	if ms == 0 {
		return 0, false
	}
	return ms + (int64(time.Since(c.start))-c.at.Load())/int64(time.Millisecond), true
}
