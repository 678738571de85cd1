package engine

import (
	"testing"
	"time"
)

// TestOverLimitCache: denials last until their deadline, a smaller cost is not denied,
// the bound evicts the entry soonest to expire, and forget drops a counter's entries.
func TestOverLimitCache(t *testing.T) {
	c := newOverLimitCache(2)
	now := time.Now()
	k := func(key string, limit int64) cacheKey {
		return cacheKey{Counter{Account: "a", Namespace: "n", Key: key, Algorithm: FixedWindow, WindowMS: 1000}, limit}
	}
	c.add(k("x", 5), 2, 300, now)
	if _, ok := c.denied(k("x", 5), 1, now); ok {
		t.Fatal("a smaller cost than the one denied was denied from memory")
	}
	if left, ok := c.denied(k("x", 5), 3, now.Add(100*time.Millisecond)); !ok || left != 200*time.Millisecond {
		t.Fatalf("denied = %v %v, want 200ms true", left, ok)
	}
	if _, ok := c.denied(k("x", 6), 2, now); ok {
		t.Fatal("another limit on the same counter was denied from memory")
	}
	if _, ok := c.denied(k("x", 5), 2, now.Add(300*time.Millisecond)); ok || c.len() != 0 {
		t.Fatal("an entry outlived its deadline")
	}
	c.add(k("a", 5), 1, 500, now)
	c.add(k("b", 5), 1, 100, now)
	c.add(k("c", 5), 1, 900, now) // full: b, the soonest to expire, goes
	if _, ok := c.denied(k("b", 5), 1, now); ok {
		t.Fatal("the soonest-to-expire entry was not evicted")
	}
	for _, key := range []string{"a", "c"} {
		if _, ok := c.denied(k(key, 5), 1, now); !ok {
			t.Fatalf("%s evicted", key)
		}
	}
	c.forget(k("a", 5).counter)
	if _, ok := c.denied(k("a", 5), 1, now); ok || c.len() != 1 {
		t.Fatal("forget left the counter's entry")
	}
	if c.hits.Load() != 3 {
		t.Fatalf("hits = %d, want 3", c.hits.Load())
	}
	if newOverLimitCache(0) != nil {
		t.Fatal("max 0 must turn the cache off")
	}
}
