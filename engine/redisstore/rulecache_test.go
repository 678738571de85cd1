package redisstore

import (
	"strconv"
	"testing"

	"github.com/leashd/leash/engine"
)

// TestRuleCacheWeight: the in-process rule cache is bounded by the overrides it holds as
// well as by its entries (spec §6.7: up to 1,000 per rule), and keeps its weight exact
// through replacements and drops.
func TestRuleCacheWeight(t *testing.T) {
	c := newRuleCache(nil)
	c.ver = 1
	list := make([]engine.Override, engine.MaxOverrides)
	for i := range list {
		list[i] = engine.Override{Key: "k" + strconv.Itoa(i), Limit: 1}
	}
	heavy := &engine.Rule{Algorithm: engine.FixedWindow, Limit: 1, WindowMS: 1, Overrides: engine.NewOverrides(list)}
	light := &engine.Rule{Algorithm: engine.FixedWindow, Limit: 1, WindowMS: 1}
	entry := func(r *engine.Rule) ruleEntry {
		return ruleEntry{rules: engine.Rules{Rate: r, Concurrent: light}, ver: 1}
	}

	c.put(ruleKey{"a", "x"}, entry(light))
	c.put(ruleKey{"a", "x"}, entry(heavy)) // replaces: 1 + 1000
	c.put(ruleKey{"a", "y"}, entry(light))
	if c.weight != 1001+1 || len(c.entries) != 2 {
		t.Fatalf("weight %d with %d entries, want 1002 with 2", c.weight, len(c.entries))
	}
	c.drop(ruleKey{"a", "x"})
	c.drop(ruleKey{"a", "never"})
	if c.weight != 1 || len(c.entries) != 1 {
		t.Fatalf("after drop: weight %d with %d entries, want 1 with 1", c.weight, len(c.entries))
	}
	most := 0
	for i := range 5000 {
		c.put(ruleKey{"a", "ns" + strconv.Itoa(i)}, entry(heavy))
		if c.weight > maxRuleWeight {
			t.Fatalf("put %d: weight %d above %d", i, c.weight, maxRuleWeight)
		}
		most = max(most, len(c.entries))
	}
	// 999 heavy entries (999,999) and the light one fill it; one more heavy one empties it.
	if most != maxRuleWeight/1001+1 {
		t.Fatalf("held at most %d entries, want %d", most, maxRuleWeight/1001+1)
	}
	c.observe(2, true) // a new version empties the cache
	if c.weight != 0 || len(c.entries) != 0 {
		t.Fatalf("after a version change: weight %d with %d entries", c.weight, len(c.entries))
	}
}
