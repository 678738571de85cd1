package rules

import (
	"strconv"
	"strings"
	"testing"

	"github.com/leashd/leash/engine"
)

// TestRuleCacheWeight: the in-process rule cache is bounded by the bytes it holds (its
// override keys above all: up to 512 bytes each, spec §6.7) as well as by its entries,
// and keeps its size exact through replacements and drops.
func TestRuleCacheWeight(t *testing.T) {
	c := NewCache()
	c.ver = 1
	// As many 512-byte keys as a 64 KiB rule body holds.
	const n = 120
	list := make([]engine.Override, n)
	for i := range list {
		list[i] = engine.Override{Key: strings.Repeat("k", engine.MaxKey-4) + strconv.Itoa(1000+i), Limit: 1}
	}
	name := "heavy"
	heavy := &engine.Rule{Algorithm: engine.FixedWindow, Limit: 1, WindowMS: 1, Name: &name, Overrides: engine.NewOverrides(list)}
	light := &engine.Rule{Algorithm: engine.FixedWindow, Limit: 1, WindowMS: 1}
	put := func(namespace string, r *engine.Rule) {
		c.Put("a", namespace, engine.Rules{Rate: r, Concurrent: light}, 1)
	}
	lightSize := ruleEntryBytes + len("a") + len("y")
	heavySize := ruleEntryBytes + len("a") + len("x") + len(name) + n*(engine.MaxKey+overrideBytes)

	put("x", light)
	put("x", heavy) // replaces the light one
	put("y", light)
	if c.bytes != heavySize+lightSize || len(c.entries) != 2 {
		t.Fatalf("%d bytes in %d entries, want %d in 2", c.bytes, len(c.entries), heavySize+lightSize)
	}
	c.Drop("a", "x")
	c.Drop("a", "never")
	if c.bytes != lightSize || len(c.entries) != 1 {
		t.Fatalf("after drop: %d bytes in %d entries, want %d in 1", c.bytes, len(c.entries), lightSize)
	}
	const limit = 64 << 20 // the documented bound
	most, keys := 0, 0
	for i := range 5000 {
		put("x"+strconv.Itoa(i), heavy)
		if c.bytes > limit {
			t.Fatalf("put %d: %d bytes above %d", i, c.bytes, limit)
		}
		if len(c.entries)%100 == 0 { // now and then, the keys the entries really hold
			held := 0
			for _, e := range c.entries {
				held += e.rules.Rate.Overrides.KeyBytes()
			}
			if held > c.bytes {
				t.Fatalf("put %d: %d bytes of override keys held, counted as %d", i, held, c.bytes)
			}
			keys = max(keys, held)
		}
		most = max(most, len(c.entries))
	}
	// The light entry and as many heavy ones as fit; one more empties it.
	if want := (limit-lightSize)/(heavySize+len("0000")) + 1; most < want-1 || most > want+1 {
		t.Fatalf("held at most %d entries, want about %d", most, want)
	}
	t.Logf("at most %d entries, %d bytes of override keys", most, keys)
	c.Observe(2, true) // a new version empties the cache
	if c.bytes != 0 || len(c.entries) != 0 {
		t.Fatalf("after a version change: %d bytes in %d entries", c.bytes, len(c.entries))
	}
}
