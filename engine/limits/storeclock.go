package limits

import (
	"sync/atomic"
	"time"
)

// storeClock estimates the store's clock between store operations: the last time the
// store reported, advanced by this process's monotonic clock since. Only answers taken
// wholly from the over-limit cache are dated by it (they reach no store).
type storeClock struct {
	start time.Time
	ms    atomic.Int64 // the store's last reported time, Unix ms (0: none yet)
	at    atomic.Int64 // when it was reported: ns since start, monotonic
}

func (c *storeClock) observe(ms int64) {
	c.ms.Store(ms)
	c.at.Store(int64(time.Since(c.start)))
}

// now returns the estimate; ok is false before the store ever reported.
func (c *storeClock) now() (ms int64, ok bool) {
	ms = c.ms.Load()
	if ms == 0 {
		return 0, false
	}
	return ms + (int64(time.Since(c.start))-c.at.Load())/int64(time.Millisecond), true
}
