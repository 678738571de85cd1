package descriptors

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"
)

// logBuffer collects log output safely across goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// watchHarness runs Watch and records what it applies.
type watchHarness struct {
	t       *testing.T
	applied chan *Config
	logs    *logBuffer
	mu      sync.Mutex
	fail    error // what apply returns
	calls   int
	done    chan struct{}
}

// startWatch loads paths (a load error leaves nothing in force) and watches them from there.
func startWatch(t *testing.T, paths []string, interval time.Duration) *watchHarness {
	t.Helper()
	loaded, _ := Load(paths...)
	h := &watchHarness{t: t, applied: make(chan *Config, 16), logs: &logBuffer{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() {
		defer close(h.done)
		Watch(ctx, paths, loaded, interval, h.apply, logger)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(5 * time.Second):
			t.Error("Watch did not return after its context was canceled")
		}
	})
	return h
}

func (h *watchHarness) apply(c *Config) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.fail != nil {
		return h.fail
	}
	h.applied <- c
	return nil
}

func (h *watchHarness) setFail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail = err
}

func (h *watchHarness) applyCalls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// next waits for an applied config.
func (h *watchHarness) next(within time.Duration) *Config {
	h.t.Helper()
	select {
	case c := <-h.applied:
		return c
	case <-time.After(within):
		h.t.Fatalf("nothing applied within %v; log:\n%s", within, h.logs)
		return nil
	}
}

// until waits for an applied config that satisfies ok, skipping intermediate ones (a
// ConfigMap update, like the kubelet's, passes through valid in-between states).
func (h *watchHarness) until(ok func(*Config) bool, within time.Duration) *Config {
	h.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case c := <-h.applied:
			if ok(c) {
				return c
			}
		case <-deadline:
			h.t.Fatalf("no matching config applied within %v; log:\n%s", within, h.logs)
			return nil
		}
	}
}

// quiet checks that nothing is applied for a while.
func (h *watchHarness) quiet(d time.Duration) {
	h.t.Helper()
	select {
	case c := <-h.applied:
		h.t.Fatalf("applied %v unexpectedly; log:\n%s", c.Domains(), h.logs)
	case <-time.After(d):
	}
}

// waitLog waits until the log contains s.
func (h *watchHarness) waitLog(s string, within time.Duration) {
	h.t.Helper()
	defer func() {
		if h.t.Failed() {
			h.t.Logf("log:\n%s", h.logs)
		}
	}()
	testkit.Eventually(h.t, "log contains "+strconv.Quote(s), within, func() bool { return strings.Contains(h.logs.String(), s) })
}

func limitOf(t *testing.T, c *Config, domain string) int64 {
	t.Helper()
	m, ok := c.Match(domain, e("k", "v"))
	if !ok {
		t.Fatalf("domain %s: no match in %v", domain, c.Domains())
	}
	return m.Rule.Limits[0].RequestsPerUnit
}

func limitFile(domain string, rpu int) string {
	return "domain: " + domain + "\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: " + strconv.Itoa(rpu) + "}\n"
}

// With the default interval, a valid change applies within about 2 s, and an edit
// in place applies too.
func TestWatchAppliesValidChange(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "rl.yaml", limitFile("d", 1))
	h := startWatch(t, []string{dir}, 0)

	testkit.ReplaceFile(t, file, limitFile("d", 2))
	if got := limitOf(t, h.next(2*time.Second), "d"); got != 2 {
		t.Errorf("applied limit %d, want 2", got)
	}
	if err := os.WriteFile(file, []byte(limitFile("d", 3)), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := limitOf(t, h.next(2*time.Second), "d"); got != 3 {
		t.Errorf("applied limit %d, want 3", got)
	}
	h.quiet(1200 * time.Millisecond) // unchanged files are not applied again
	h.waitLog("descriptors: config applied", time.Second)
}

// An invalid change is logged with the file and path and nothing is applied; fixing
// the file applies the fix.
func TestWatchKeepsOldOnInvalidChange(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "rl.yaml", limitFile("d", 1))
	h := startWatch(t, []string{dir}, 100*time.Millisecond)

	testkit.ReplaceFile(t, file, "domain: d\ndescriptors: [{key: k, rate_limit: {unit: fortnight, requests_per_unit: 1}}]\n")
	h.waitLog(`unknown unit \"fortnight\"`, 2*time.Second)
	logs := h.logs.String()
	for _, want := range []string{"level=ERROR", "the previous one stays in force", "file=" + file, "path=descriptors[0].rate_limit.unit", file + ":2: descriptors[0].rate_limit.unit", "line=2"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	h.quiet(500 * time.Millisecond)
	if n := strings.Count(h.logs.String(), "fortnight"); n != 1 {
		t.Errorf("the load error was logged %d times, want once", n)
	}
	if h.applyCalls() != 0 {
		t.Errorf("apply called %d times", h.applyCalls())
	}

	testkit.ReplaceFile(t, file, limitFile("d", 5))
	if got := limitOf(t, h.next(2*time.Second), "d"); got != 5 {
		t.Errorf("applied limit %d, want 5", got)
	}
}

// When apply fails the old config stays; the error is logged once and apply is tried
// again while the files are unchanged, so it succeeds once whatever it depends on is fixed.
func TestWatchKeepsOldOnApplyError(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "rl.yaml", limitFile("d", 1))
	h := startWatch(t, []string{dir}, 100*time.Millisecond)
	h.setFail(errors.New("algorithm not on the plan"))

	testkit.ReplaceFile(t, file, limitFile("d", 2))
	h.waitLog("algorithm not on the plan", 2*time.Second)
	h.quiet(500 * time.Millisecond)
	if n := strings.Count(h.logs.String(), "algorithm not on the plan"); n != 1 {
		t.Errorf("apply error logged %d times, want once", n)
	}
	if h.applyCalls() < 2 {
		t.Errorf("apply called %d times, want retries", h.applyCalls())
	}
	if !strings.Contains(h.logs.String(), "config not applied; the previous one stays in force") {
		t.Errorf("log:\n%s", h.logs)
	}

	h.setFail(nil)
	if got := limitOf(t, h.next(2*time.Second), "d"); got != 2 {
		t.Errorf("applied limit %d, want 2", got)
	}
	h.quiet(400 * time.Millisecond)
}

// A ConfigMap update swaps the ..data link; files may appear and disappear.
func TestWatchConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	configMapSwap(t, dir, "..v1", map[string]string{"a.yaml": limitFile("a", 1)})
	h := startWatch(t, []string{dir}, 300*time.Millisecond)

	domains := func(want string) func(*Config) bool {
		return func(c *Config) bool { return strings.Join(c.Domains(), ",") == want }
	}
	configMapSwap(t, dir, "..v2", map[string]string{"a.yaml": limitFile("a", 2), "b.yaml": limitFile("b", 3)})
	c := h.until(domains("a,b"), 2*time.Second)
	if limitOf(t, c, "a") != 2 || limitOf(t, c, "b") != 3 {
		t.Errorf("limits %d %d", limitOf(t, c, "a"), limitOf(t, c, "b"))
	}

	configMapSwap(t, dir, "..v3", map[string]string{"b.yaml": limitFile("b", 4)})
	c = h.until(domains("b"), 2*time.Second)
	if limitOf(t, c, "b") != 4 {
		t.Errorf("limit %d", limitOf(t, c, "b"))
	}
	if c.Files()[0] != filepath.Join(dir, "b.yaml") {
		t.Errorf("files %v", c.Files())
	}
}

// Files added to and removed from a plain folder, and a named file that appears later.
func TestWatchFolderAddRemove(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", limitFile("a", 1))
	later := filepath.Join(t.TempDir(), "later.yaml")
	h := startWatch(t, []string{dir, later}, 200*time.Millisecond)

	writeFile(t, dir, "b.yaml", limitFile("b", 1))
	// later.yaml is still missing: that is a load error, logged, nothing applied.
	h.waitLog("later.yaml", 2*time.Second)
	h.quiet(300 * time.Millisecond)

	writeFile(t, filepath.Dir(later), "later.yaml", limitFile("later", 1))
	if got := h.next(2 * time.Second).Domains(); strings.Join(got, ",") != "a,b,later" {
		t.Errorf("domains %v", got)
	}
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	if got := h.next(2 * time.Second).Domains(); strings.Join(got, ",") != "b,later" {
		t.Errorf("domains %v", got)
	}
}

// The baseline is what Load read: an edit that lands after the load and before Watch
// starts is applied, not taken as the files in force.
func TestWatchAppliesEditBeforeStart(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "rl.yaml", limitFile("d", 1))
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := limitOf(t, loaded, "d"); got != 1 {
		t.Fatalf("loaded limit %d, want 1", got)
	}
	testkit.ReplaceFile(t, file, limitFile("d", 2))

	var last atomic.Pointer[Config]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, []string{dir}, loaded, 50*time.Millisecond, func(c *Config) error { last.Store(c); return nil }, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()
	testkit.Eventually(t, "the edit made before Watch started applied", 2*time.Second, func() bool {
		c := last.Load()
		return c != nil && limitOf(t, c, "d") == 2
	})
}

// Without a loaded Config nothing is in force: the files are applied as Watch starts.
func TestWatchWithoutLoadedAppliesAtStart(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "rl.yaml", limitFile("d", 3))
	var last atomic.Pointer[Config]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, []string{dir}, nil, time.Hour, func(c *Config) error { last.Store(c); return nil }, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()
	testkit.Eventually(t, "the files applied", 2*time.Second, func() bool {
		c := last.Load()
		return c != nil && limitOf(t, c, "d") == 3
	})
}
