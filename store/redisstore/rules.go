package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

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

type ruleKey struct{ account, namespace string }

type ruleEntry struct {
	rules engine.Rules
	ver   int64
	size  int // sizeOf, set by put
}

// sizeOf estimates the bytes the entry of k holds, which count toward maxRuleBytes: a
// fixed cost, the names, and each override's key plus a fixed cost.
func sizeOf(k ruleKey, rules engine.Rules) int {
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

type ruleCache struct {
	s *conn

	mu      sync.RWMutex
	entries map[ruleKey]ruleEntry
	bytes   int   // the entries' total size
	ver     int64 // the rules version last seen

	polledAt atomic.Int64 // Unix ns when the last successful poll started
}

func newRuleCache(s *conn) *ruleCache {
	return &ruleCache{s: s, entries: make(map[ruleKey]ruleEntry), ver: -1}
}

// poll reads the rules version every pollInterval until ctx ends.
func (c *ruleCache) poll(ctx context.Context) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	failing := false
	for {
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, c.s.opTimeout)
		v, err := c.s.client.Get(pctx, c.s.keys.RulesVersion()).Int64()
		cancel()
		if errors.Is(err, redis.Nil) {
			v, err = 0, nil
		}
		switch {
		case err == nil:
			c.observe(v, true)
			c.polledAt.Store(start.UnixNano())
			if failing {
				c.s.log.Info("redis store: rule version poll recovered")
				failing = false
			}
		case ctx.Err() == nil && !failing:
			c.s.log.Warn("redis store: rule version poll failed; rules are read from Redis until it recovers", "err", err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// observe records version v. From a poll (exact) any change drops the cache, so a
// version that went back (a failover lost a write) also invalidates; from a read or a
// write only a newer version does.
func (c *ruleCache) observe(v int64, exact bool) {
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

func (c *ruleCache) fresh() bool {
	return time.Since(time.Unix(0, c.polledAt.Load())) < maxStaleness
}

func (c *ruleCache) get(k ruleKey) (engine.Rules, bool) {
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

func (c *ruleCache) put(k ruleKey, e ruleEntry) {
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
func (c *ruleCache) clearLocked() {
	clear(c.entries)
	c.bytes = 0
}

func (c *ruleCache) drop(k ruleKey) {
	c.mu.Lock()
	if old, ok := c.entries[k]; ok {
		c.bytes -= old.size
		delete(c.entries, k)
	}
	c.mu.Unlock()
}

// ruleJSON is a rule as stored in Redis: its overrides (spec §6.7) ride in the same value,
// so they are written, versioned, cached and propagated with the rule.
type ruleJSON struct {
	Algorithm string         `json:"algorithm"`
	Limit     int64          `json:"limit"`
	WindowMS  int64          `json:"window_ms"`
	Name      *string        `json:"name,omitempty"`
	Overrides []overrideJSON `json:"overrides,omitempty"`
}

// overrideJSON is one override as stored; a window of 0 (omitted) is the rule's.
type overrideJSON struct {
	Key      string `json:"key"`
	Limit    int64  `json:"limit"`
	WindowMS int64  `json:"window_ms,omitempty"`
}

func encodeRule(r engine.Rule) ([]byte, error) {
	j := ruleJSON{Algorithm: r.Algorithm.String(), Limit: r.Limit, WindowMS: r.WindowMS, Name: r.Name}
	if n := r.Overrides.Len(); n > 0 {
		j.Overrides = make([]overrideJSON, 0, n)
		for _, o := range r.Overrides.List() {
			j.Overrides = append(j.Overrides, overrideJSON{Key: o.Key, Limit: o.Limit, WindowMS: o.WindowMS})
		}
	}
	return json.Marshal(j)
}

func decodeRule(v any) (*engine.Rule, error) {
	str, ok := v.(string)
	if !ok {
		return nil, nil // nil reply: no rule
	}
	var j ruleJSON
	if err := json.Unmarshal([]byte(str), &j); err != nil {
		return nil, fmt.Errorf("redisstore: stored rule is not valid JSON: %w", err)
	}
	alg, ok := engine.ParseAlgorithm(j.Algorithm)
	if !ok {
		return nil, fmt.Errorf("redisstore: stored rule has unknown algorithm %q", j.Algorithm)
	}
	r := &engine.Rule{Algorithm: alg, Limit: j.Limit, WindowMS: j.WindowMS, Name: j.Name}
	if len(j.Overrides) > 0 {
		list := make([]engine.Override, len(j.Overrides))
		for i, o := range j.Overrides {
			list[i] = engine.Override{Key: o.Key, Limit: o.Limit, WindowMS: o.WindowMS}
		}
		r.Overrides = engine.NewOverrides(list)
	}
	return r, nil
}

// Rules returns a namespace's rules, from the cache when it is fresh.
func (s *RuleStore) Rules(ctx context.Context, account, namespace string) (engine.Rules, error) {
	if s.closed.Load() {
		return engine.Rules{}, errClosed
	}
	k := ruleKey{account, namespace}
	if r, ok := s.rules.get(k); ok {
		return r, nil
	}
	ctx = s.opCtx(ctx)
	cmd, err := s.eval(ctx, s.scripts.RulesGet, []string{s.keys.Rules(account, namespace), s.keys.RulesVersion()})
	if err != nil {
		return engine.Rules{}, err
	}
	res, err := cmd.Slice()
	if err != nil {
		return engine.Rules{}, err
	}
	if len(res) != 3 {
		return engine.Rules{}, errors.New("redisstore: rules: malformed script reply")
	}
	ver, ok := res[0].(int64)
	if !ok {
		return engine.Rules{}, errors.New("redisstore: rules: malformed version")
	}
	var out engine.Rules
	if out.Rate, err = decodeRule(res[1]); err != nil {
		return engine.Rules{}, err
	}
	if out.Concurrent, err = decodeRule(res[2]); err != nil {
		return engine.Rules{}, err
	}
	s.rules.observe(ver, false)
	s.rules.put(k, ruleEntry{rules: engine.Rules{Rate: cloneRule(out.Rate), Concurrent: cloneRule(out.Concurrent)}, ver: ver})
	return out, nil
}

// PutRule stores r in its kind's slot and bumps the rules version (one script).
func (s *RuleStore) PutRule(ctx context.Context, account, namespace string, r engine.Rule) (bool, error) {
	b, err := encodeRule(r)
	if err != nil {
		return false, err
	}
	res, err := s.run(ctx, s.scripts.RulesPut, []string{s.keys.Rules(account, namespace), s.keys.RulesVersion(), s.keys.RuleIndex(account)},
		r.Algorithm.Kind().String(), string(b), namespace)
	if err != nil {
		return false, err
	}
	if len(res) != 2 {
		return false, errors.New("redisstore: put rule: malformed script reply")
	}
	s.rules.drop(ruleKey{account, namespace})
	s.rules.observe(res[1], false)
	return res[0] == 1, nil
}

// DeleteRule removes the rule of one kind and bumps the rules version when one existed.
func (s *RuleStore) DeleteRule(ctx context.Context, account, namespace string, kind engine.RuleKind) (bool, error) {
	res, err := s.run(ctx, s.scripts.RulesDel, []string{s.keys.Rules(account, namespace), s.keys.RulesVersion(), s.keys.RuleIndex(account)},
		kind.String(), namespace)
	if err != nil {
		return false, err
	}
	if len(res) != 2 {
		return false, errors.New("redisstore: delete rule: malformed script reply")
	}
	s.rules.drop(ruleKey{account, namespace})
	s.rules.observe(res[1], false)
	return res[0] == 1, nil
}
