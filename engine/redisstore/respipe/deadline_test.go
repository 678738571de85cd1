package respipe

import (
	"testing"
	"time"
)

func TestSharedDeadline(t *testing.T) {
	const timeout = 640 * time.Millisecond // slice 10 ms
	d := NewSharedDeadline(timeout)
	if d.slice != 10*time.Millisecond {
		t.Fatalf("slice %v, want timeout/64", d.slice)
	}
	for range 50 {
		start := time.Now()
		ctx := d.Context()
		end := time.Now()
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		// Every call gets at least timeout and at most timeout + slice from the instant it
		// was made, somewhere between start and end (a call that starts just before its
		// slot's slice ends, and returns after it, has less than timeout left from end).
		if dl.Sub(start) < timeout || dl.Sub(end) > timeout+d.slice {
			t.Fatalf("deadline %v after the call, want %v to %v", dl.Sub(start), timeout, timeout+d.slice)
		}
		if ctx.Err() != nil {
			t.Fatal("fresh context already done")
		}
		time.Sleep(time.Millisecond)
	}
	// Calls within one slice share a context; a later call gets a new one.
	a, b := d.Context(), d.Context()
	if a != b { // a and b straddled a slice boundary; the next pair cannot also
		a, b = d.Context(), d.Context()
	}
	if a != b {
		t.Fatal("two calls within one slice made two contexts")
	}
	time.Sleep(2 * d.slice)
	if d.Context() == a {
		t.Fatal("a call after the slice reused the old context")
	}
	// The shared context ends at its deadline, and Stop ends the current one.
	old := a
	select {
	case <-old.Done():
		t.Fatal("done before its deadline")
	case <-time.After(10 * time.Millisecond):
	}
	short := NewSharedDeadline(20 * time.Millisecond)
	c := short.Context()
	select {
	case <-c.Done():
	case <-time.After(time.Second):
		t.Fatal("shared context not done after its deadline")
	}
	c = short.Context()
	short.Stop()
	if c.Err() == nil {
		t.Fatal("Stop did not end the current context")
	}
}
