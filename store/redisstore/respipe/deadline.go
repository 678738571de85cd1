package respipe

import (
	"context"
	"sync/atomic"
	"time"
)

// SharedDeadline hands out contexts that end about timeout from now, one shared by every
// call that starts within the same slice of time, so a call on the hot path starts no
// timer and allocates no context of its own. A call gets at least timeout and at most
// timeout + slice. The shared context carries no caller values or cancellation: a call,
// once sent, is bounded by the timeout alone (a spend that reached Redis counts whether or
// not its caller still waits).
type SharedDeadline struct {
	timeout, slice time.Duration
	cur            atomic.Pointer[deadlineSlot]
}

type deadlineSlot struct {
	ctx    context.Context
	cancel context.CancelFunc // called by Stop; the deadline releases the timer otherwise
	until  time.Time          // calls starting before this share ctx
}

// deadlineSlices is how many slices a timeout is cut into: the extra bound a call may get
// is 1/64 of the timeout (8 ms of the default 500 ms).
const deadlineSlices = 64

// NewSharedDeadline returns a SharedDeadline for timeout; Stop releases its last context.
func NewSharedDeadline(timeout time.Duration) *SharedDeadline {
	return &SharedDeadline{timeout: timeout, slice: max(timeout/deadlineSlices, time.Millisecond)}
}

// Context returns a context whose deadline is between timeout and timeout + slice from now.
func (d *SharedDeadline) Context() context.Context {
	now := time.Now()
	if s := d.cur.Load(); s != nil && now.Before(s.until) {
		return s.ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(d.timeout+d.slice))
	// Racing callers may each make a slot; the one stored last is shared, and the others'
	// contexts still end at their deadlines.
	d.cur.Store(&deadlineSlot{ctx: ctx, cancel: cancel, until: now.Add(d.slice)})
	return ctx
}

// Stop cancels the current slot's context.
func (d *SharedDeadline) Stop() {
	if s := d.cur.Load(); s != nil {
		s.cancel()
	}
}
