package respipe

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestSharedDeadline runs in a synctest bubble: time moves only when the test sleeps, so
// the bounds of each deadline and the slice boundaries are checked exactly.
func TestSharedDeadline(t *testing.T) {
	synctest.Test(t, testSharedDeadline)
}

func testSharedDeadline(t *testing.T) {
	const timeout = 640 * time.Millisecond // slice 10 ms
	d := NewSharedDeadline(timeout)
	if d.slice != 10*time.Millisecond {
		t.Fatalf("slice %v, want timeout/64", d.slice)
	}
	for range 50 {
		now := time.Now()
		ctx := d.Context()
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		// Every call gets at least timeout and at most timeout + slice.
		if left := dl.Sub(now); left < timeout || left > timeout+d.slice {
			t.Fatalf("deadline %v after the call, want %v to %v", left, timeout, timeout+d.slice)
		}
		if ctx.Err() != nil {
			t.Fatal("fresh context already done")
		}
		time.Sleep(3 * time.Millisecond)
	}
	// Calls within one slice share a context; a call once the slice has ended gets a new one.
	time.Sleep(d.slice) // past the last slot
	a := d.Context()    // a new slot, starting now
	time.Sleep(d.slice - time.Nanosecond)
	if d.Context() != a {
		t.Fatal("two calls within one slice made two contexts")
	}
	time.Sleep(time.Nanosecond)
	if d.Context() == a {
		t.Fatal("a call after the slice reused the old context")
	}
	// The shared context ends at its deadline, not before, and Stop ends the current one.
	dl, _ := a.Deadline()
	time.Sleep(time.Until(dl) - time.Nanosecond)
	synctest.Wait()
	if a.Err() != nil {
		t.Fatal("done before its deadline")
	}
	time.Sleep(time.Nanosecond)
	synctest.Wait()
	if a.Err() == nil {
		t.Fatal("shared context not done at its deadline")
	}
	short := NewSharedDeadline(20 * time.Millisecond)
	c := short.Context()
	short.Stop()
	if c.Err() == nil {
		t.Fatal("Stop did not end the current context")
	}
}
