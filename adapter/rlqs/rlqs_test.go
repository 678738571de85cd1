package rlqs_test

import (
	"fmt"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// scale is the time scale of the harness tests: the 600 requests per 10 s and
// proxies at 10, 100 and 1000 requests/s, with the window shortened to 2 s (120 per 2 s,
// the same 60/s) and a 100 ms reporting interval so the suite stays short.
// LEASH_RLQS_LONG=1 runs the full 10 s windows with a 200 ms interval.
type scale struct {
	windowMS int64
	limit    int64
	interval time.Duration
	windows  int // windows measured
}

func testScale() scale {
	if os.Getenv("LEASH_RLQS_LONG") == "1" {
		return scale{windowMS: 10_000, limit: 600, interval: 200 * time.Millisecond, windows: 4}
	}
	return scale{windowMS: 2000, limit: 120, interval: 100 * time.Millisecond, windows: 3}
}

// yaml is the descriptor file: domain web, bucket {api: search} limited to limit per window.
func (s scale) yaml() string {
	return fmt.Sprintf(`
domain: web
descriptors:
  - key: api
    value: search
    rate_limit: {unit: second, unit_multiplier: %d, requests_per_unit: %d}
  - key: api
    value: open
    rate_limit: {unlimited: true}
  - key: api
    value: closed
    rate_limit: {unit: second, requests_per_unit: 0}
`, s.windowMS/1000, s.limit)
}

func (s scale) setup() setup {
	return setup{descriptors: s.yaml(), domains: map[string]string{"web": "acme"}}
}

var search = map[string]string{"api": "search"}

// measure waits out a warm-up (at least 10 reporting intervals, to the next window's
// start), then n windows, and returns the first measured one.
func measure(s scale, n int) int64 {
	time.Sleep(10 * s.interval)
	first := waitWindowStart(s.windowMS) // the warm-up ends here
	time.Sleep(time.Duration(int64(n)*s.windowMS+50) * time.Millisecond)
	return first
}

// checkTotal: in each measured window the proxies together admitted the limit ±10 %.
func checkTotal(t *testing.T, s scale, first int64, ps ...*proxy) {
	t.Helper()
	for w := first; w < first+int64(s.windows); w++ {
		total := int64(0)
		var each []int64
		for _, p := range ps {
			n := p.windows()[w]
			total += n
			each = append(each, n)
		}
		t.Logf("window %d: admitted %d %v (limit %d)", w-first, total, each, s.limit)
		if d := float64(total - s.limit); d > 0.1*float64(s.limit) || d < -0.1*float64(s.limit) {
			t.Errorf("window %d: admitted %d in total, want %d ± 10 %%", w-first, total, s.limit)
			for _, p := range ps {
				p.mu.Lock()
				t.Logf("%s: window %d starts at %d; assignments: %v", p.name, w, w*s.windowMS%100_000, p.trace)
				p.mu.Unlock()
			}
		}
	}
}

// TestThreeProxiesShareOneLimit: proxies offering 10, 100 and 1000 requests/s against one
// bucket of 60/s: together they admit the limit per window (±10 %), the light one all
// of its demand, and the heavy ones split the rest.
func TestThreeProxiesShareOneLimit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, threeProxiesShareOneLimit)
}

// threeProxiesShareOneLimit is TestThreeProxiesShareOneLimit in a synctest bubble: the
// windows are measured in the bubble's time, which no load on the machine stretches.
func threeProxiesShareOneLimit(t *testing.T) {
	s := testScale()
	st := s.setup()
	st.opts.ReportingInterval = s.interval
	st.inMemory = true
	in := startInstance(t, memStore(t), st, "")
	light := newProxy("light", "web", search, 10, s.interval, s.windowMS, in.addr)
	mid := newProxy("mid", "web", search, 100, s.interval, s.windowMS, in.addr)
	heavy := newProxy("heavy", "web", search, 1000, s.interval, s.windowMS, in.addr)
	for _, p := range []*proxy{light, mid, heavy} {
		p.start(t)
	}
	first := measure(s, s.windows)
	checkTotal(t, s, first, light, mid, heavy)
	if os.Getenv("LEASH_RLQS_TRACE") != "" {
		for _, p := range []*proxy{light, mid, heavy} {
			t.Logf("%s: %v", p.name, p.trace)
		}
	}
	perWindow := 10 * s.windowMS / 1000
	for w := first; w < first+int64(s.windows); w++ {
		l, m, h := light.windows()[w], mid.windows()[w], heavy.windows()[w]
		if l < perWindow*9/10 {
			t.Errorf("window %d: the light proxy admitted %d of its %d", w-first, l, perWindow)
		}
		rest := s.limit - perWindow
		if m < rest/4 || h < rest/4 {
			t.Errorf("window %d: the heavy proxies admitted %d and %d of the %d left", w-first, m, h, rest)
		}
	}
}
