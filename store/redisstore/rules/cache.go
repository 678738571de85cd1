// Package rules is the rules as the Redis store keeps them: the record each rule is
// stored as (Encode, Decode), and the in-process cache of each namespace's rules (Cache),
// so the hot path reads them without a round trip; a rules version, polled, tells when
// what the cache holds is stale.
package rules

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leashd/leash/engine"
)

// Rules are cached in process, so the hot path reads them without a round trip. Every rule
// write bumps one version key ({P:r}:version) in the same script, and each cached entry
// remembers the version it was read at (read atomically with the rules). The poller reads
// the version every pollInterval:
//
//   - a version different from the one known drops every cached entry;
//   - an entry is used only while its version is the known one AND the last successful
//     poll started less than maxStaleness ago; otherwise the rules are read from Redis.
//
// So a rule written on any instance at time T is in force here from the first poll that
// starts after T, at most pollInterval + one round trip later, and never later than
// maxStaleness even when polls fail (then every lookup goes to Redis). A write on this
// instance is in force here at once (its entry is dropped and the new version adopted).
const (
	pollInterval   = 250 * time.Millisecond
	maxStaleness   = 750 * time.Millisecond
	maxRuleEntries = 100_000
	// maxRuleBytes bounds the memory the cache holds, 64 MiB, as estimated by an entry's
	// size: override keys are up to 512 bytes and a rule holds up to 1,000 overrides
	// (spec §6.7), so counting entries alone would let 100,000 heavy rules hold gigabytes,
	// and counting overrides would let rules of long keys hold hundreds of megabytes.
	maxRuleBytes = 64 << 20
	// ruleEntryBytes estimates an entry's fixed cost (its map slot, key, rule structs);
	// overrideBytes an override's besides its key (its list element and map slot).
	ruleEntryBytes = 256
	overrideBytes  = 80
)

type key struct{ account, namespace string }

type entry struct {
	rules engine.Rules
	ver   int64
	size  int // sizeOf, set by put
}

// sizeOf estimates the bytes the entry of k holds, which count toward maxRuleBytes: a
// fixed cost, the names, and each override's key plus a fixed cost.
func sizeOf(k key, rules engine.Rules) int {
	n := ruleEntryBytes + len(k.account) + len(k.namespace)
	for _, r := range [2]*engine.Rule{rules.Rate, rules.Concurrent} {
		if r == nil {
			continue
		}
		if r.Name != nil {
			n += len(*r.Name)
		}
		n += r.Overrides.KeyBytes() + r.Overrides.Len()*overrideBytes
	}
	return n
}

// Cache holds the rules of the namespaces read lately, each with the rules version it was
// read at. It is safe for concurrent use.
type Cache struct {
	mu      sync.RWMutex
	entries map[key]entry
	bytes   int   // the entries' total size
	ver     int64 // the rules version last seen

	polledAt atomic.Int64 // Unix ns when the last successful poll started
}

// NewCache returns an empty cache that knows no version yet.
func NewCache() *Cache {
	return &Cache{entries: make(map[key]entry), ver: -1}
}

// Poll reads the rules version with version every pollInterval until ctx ends, logging
// to log when the reads start failing and when they recover.
func (c *Cache) Poll(ctx context.Context, version func(context.Context) (int64, error), log *slog.Logger) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	failing := false
	for {
		start := time.Now()
		v, err := version(ctx)
		switch {
		case err == nil:
			c.Observe(v, true)
			c.polledAt.Store(start.UnixNano())
			if failing {
				log.Info("redis store: rule version poll recovered")
				failing = false
			}
		case ctx.Err() == nil && !failing:
			log.Warn("redis store: rule version poll failed; rules are read from Redis until it recovers", "err", err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Observe records version v. From a poll (exact) any change drops the cache, so a
// version that went back (a failover lost a write) also invalidates; from a read or a
// write only a newer version does.
func (c *Cache) Observe(v int64, exact bool) {
	c.mu.RLock()
	same := v == c.ver || (!exact && v < c.ver)
	c.mu.RUnlock()
	if same {
		return
	}
	c.mu.Lock()
	if v != c.ver && (exact || v > c.ver) {
		c.ver = v
		c.clearLocked()
	}
	c.mu.Unlock()
}

func (c *Cache) fresh() bool {
	return time.Since(time.Unix(0, c.polledAt.Load())) < maxStaleness
}

// Get returns a copy of the namespace's cached rules; ok is false when they are not
// cached at the known version, or the last successful poll is too old.
func (c *Cache) Get(account, namespace string) (rules engine.Rules, ok bool) {
	k := key{account, namespace}
	if !c.fresh() {
		return engine.Rules{}, false
	}
	c.mu.RLock()
	e, ok := c.entries[k]
	ok = ok && e.ver == c.ver
	c.mu.RUnlock()
	if !ok {
		return engine.Rules{}, false
	}
	// A copy: callers may modify what they get (the overrides are immutable and shared).
	return engine.Rules{Rate: cloneRule(e.rules.Rate), Concurrent: cloneRule(e.rules.Concurrent)}, true
}

func cloneRule(r *engine.Rule) *engine.Rule {
	if r == nil {
		return nil
	}
	c := *r
	if r.Name != nil {
		c.Name = new(*r.Name)
	}
	return &c
}

// Put caches a copy of the namespace's rules, read at version ver; rules read at another
// version than the known one are not kept.
func (c *Cache) Put(account, namespace string, rules engine.Rules, ver int64) {
	k := key{account, namespace}
	e := entry{rules: engine.Rules{Rate: cloneRule(rules.Rate), Concurrent: cloneRule(rules.Concurrent)}, ver: ver}
	e.size = sizeOf(k, e.rules) // outside the lock: it reads every override
	c.mu.Lock()
	if e.ver == c.ver {
		if old, ok := c.entries[k]; ok {
			c.bytes -= old.size
			delete(c.entries, k)
		}
		if len(c.entries) >= maxRuleEntries || c.bytes+e.size > maxRuleBytes {
			c.clearLocked()
		}
		c.entries[k] = e
		c.bytes += e.size
	}
	c.mu.Unlock()
}

// clearLocked empties the cache; c.mu is held.
func (c *Cache) clearLocked() {
	clear(c.entries)
	c.bytes = 0
}

// Drop forgets the namespace's rules.
func (c *Cache) Drop(account, namespace string) {
	k := key{account, namespace}
	c.mu.Lock()
	if old, ok := c.entries[k]; ok {
		c.bytes -= old.size
		delete(c.entries, k)
	}
	c.mu.Unlock()
}
