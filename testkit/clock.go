package testkit

import (
	"sync/atomic"
	"time"
)

// FakeClock is an engine.Clock that moves only when told to. It is safe for concurrent use.
type FakeClock struct {
	ns atomic.Int64
}

// NewFakeClock returns a clock stopped at t.
func NewFakeClock(t time.Time) *FakeClock {
	c := &FakeClock{}
	c.Set(t)
	return c
}

// Now returns the clock's time, in UTC.
func (c *FakeClock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Set moves the clock to t.
func (c *FakeClock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }

// SetMS moves the clock to the Unix-millisecond instant ms.
func (c *FakeClock) SetMS(ms int64) { c.ns.Store(ms * int64(time.Millisecond)) }

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// NowMS returns the clock's time in Unix milliseconds.
func (c *FakeClock) NowMS() int64 { return c.Now().UnixMilli() }
