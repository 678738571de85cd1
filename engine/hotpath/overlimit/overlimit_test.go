package overlimit

import (
	"testing"
	"time"
)

// TestOverLimitCache: denials last until their deadline, a smaller cost is not denied,
// the bound evicts the entry soonest to expire, and forget drops a counter's entries.
func TestOverLimitCache(t *testing.T) {
	c := New[string](2)
	now := time.Now()
	c.Add("x", 5, 2, 300, now)
	if _, ok := c.Denied("x", 5, 1, now); ok {
		t.Fatal("a smaller cost than the one denied was denied from memory")
	}
	if left, ok := c.Denied("x", 5, 3, now.Add(100*time.Millisecond)); !ok || left != 200*time.Millisecond {
		t.Fatalf("denied = %v %v, want 200ms true", left, ok)
	}
	if _, ok := c.Denied("x", 6, 2, now); ok {
		t.Fatal("another limit on the same counter was denied from memory")
	}
	if _, ok := c.Denied("x", 5, 2, now.Add(300*time.Millisecond)); ok || c.Len() != 0 {
		t.Fatal("an entry outlived its deadline")
	}
	c.Add("a", 5, 1, 500, now)
	c.Add("b", 5, 1, 100, now)
	c.Add("c", 5, 1, 900, now) // full: b, the soonest to expire, goes
	if _, ok := c.Denied("b", 5, 1, now); ok {
		t.Fatal("the soonest-to-expire entry was not evicted")
	}
	for _, key := range []string{"a", "c"} {
		if _, ok := c.Denied(key, 5, 1, now); !ok {
			t.Fatalf("%s evicted", key)
		}
	}
	c.Forget("a")
	if _, ok := c.Denied("a", 5, 1, now); ok || c.Len() != 1 {
		t.Fatal("forget left the counter's entry")
	}
	if c.Hits() != 3 {
		t.Fatalf("hits = %d, want 3", c.Hits())
	}
	if New[string](0) != nil {
		t.Fatal("max 0 must turn the cache off")
	}
}
