package reliability

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leashd/leash/testkit/leashproc"
)

// apiClient is a keep-alive HTTP client for one worker.
func apiClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
}

// post sends a JSON body with the API key and decodes the JSON answer.
func post(c *http.Client, method, url, key, body string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	var out map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("status %d: body %q is not JSON: %w", resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, out, nil
}

// TestKeyFloodMemoryBound drives distinct keys from one account through the HTTP API on
// the memory store with a small store.memory.max_entries and shows: the entries held never
// exceed the bound, evictions are counted, the heap stays flat once the store is full, live
// leases are never evicted, a key in steady use keeps its count, and once only live leases
// are left an acquire for a new lease set is 503 unavailable, as is one more lease on a
// single key with a huge limit (every lease held is an entry). Default: 3 s at up to
// 10,000 keys/s on the -race binary and max_entries 2048 (and on until 3 × max_entries keys
// were sent). RELIABILITY_LONG=1 (make reliability-long): 60 s at
// 10,000 keys/s on a plain build and max_entries 100000.
func TestKeyFloodMemoryBound(t *testing.T) {
	bin, maxEntries, duration, rate, workers := binary, 2048, 3*time.Second, 10_000, 4
	if longRun() {
		bin, maxEntries, duration, workers = leashproc.Plain(t), 100_000, 60*time.Second, 8
	}
	p := leashproc.Start(t, bin, nil, "LEASH_DEV_API_KEY=k", "LEASH_STORE_BACKEND=memory", "LEASH_STORE_MEMORY_MAX_ENTRIES="+strconv.Itoa(maxEntries))
	base := "http://" + p.HTTP
	c := apiClient()

	// Live leases taken before the flood: the flood must not evict them.
	const leases = 50
	var leaseIDs []string
	for i := range leases {
		code, out, err := post(c, "POST", base+"/v1/leases", "k", fmt.Sprintf(`{"namespace":"jobs","key":"job-%d","limit":1,"window_ms":600000}`, i))
		if err != nil || code != 200 || out["allowed"] != true {
			t.Fatalf("lease %d: %d %v %v", i, code, out, err)
		}
		leaseIDs = append(leaseIDs, out["lease_id"].(string))
	}

	// A key in steady use: its count must go down by exactly one per check (an evicted
	// counter would start again at limit-1). The 366-day window makes a window boundary
	// during the test practically impossible. "Steady" is measured, not assumed: CLOCK
	// evicts a key unused for two turns of the hand, at least 2 × max_entries / rate
	// (0.4 s here at 10,000 keys/s), so only a reset after a gap under 150 ms since the
	// previous check is a failure; a reset after a longer stall of this client is logged.
	const hotLimit = 1_000_000_000
	hotBody := `{"namespace":"flood","key":"hot","algorithm":"fixed_window","limit":1000000000,"window_ms":31622400000}`
	var (
		wg, hotWG                     sync.WaitGroup
		stop                          = make(chan struct{})
		hotChecks, hotWrong, hotStale atomic.Int64
		hotFailed                     atomic.Int64 // hot-key requests not answered 200
		hotMaxGap                     atomic.Int64 // ns
		hotErr                        atomic.Value
		sent, allowed, failed         atomic.Int64
		firstErr                      atomic.Value
	)
	stopHot := sync.OnceFunc(func() { close(stop); hotWG.Wait() })
	t.Cleanup(stopHot) // also when a check below fails the test early
	hotWG.Go(func() {
		hc := apiClient()
		want := int64(hotLimit - 1)
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			code, out, err := post(hc, "POST", base+"/v1/limit", "k", hotBody)
			if err != nil || code != 200 {
				hotFailed.Add(1)
				hotErr.Store(fmt.Sprintf("%d %v %v", code, out, err))
				continue
			}
			gap := time.Since(last)
			last = time.Now()
			if int64(gap) > hotMaxGap.Load() {
				hotMaxGap.Store(int64(gap))
			}
			hotChecks.Add(1)
			if got := int64(out["remaining"].(float64)); got != want {
				if gap < 150*time.Millisecond {
					hotWrong.Add(1)
					hotErr.Store(fmt.Sprintf("remaining %d, want %d: the hot counter was evicted %v after its previous check", got, want, gap))
				} else {
					hotStale.Add(1)
				}
				want = got
			}
			want--
		}
	})

	// The flood: every request a new key, paced to rate in total, pipelined on raw
	// keep-alive connections (a test client cheap enough to outrun the server). It runs
	// for duration, and on, up to 30 s, until at least 3 × max_entries keys were sent, so
	// a slow machine still shows eviction at work.
	start := time.Now()
	minKeys := int64(3 * maxEntries)
	interval := time.Duration(int64(time.Second) * int64(workers) / int64(rate))
	for w := range workers {
		wg.Go(func() {
			err := floodConn(p.HTTP, func(i int) (string, bool) {
				next := start.Add(time.Duration(i) * interval)
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				if e := time.Since(start); e >= max(duration, 30*time.Second) || (e >= duration && sent.Load() >= minKeys) {
					return "", false
				}
				sent.Add(1)
				// A 366-day window: no counter expires during the run, so every one beyond
				// the bound must be evicted (expired state would be reclaimed first, uncounted).
				return fmt.Sprintf(`{"namespace":"flood","key":"w%d-%d","algorithm":"fixed_window","limit":10,"window_ms":31622400000}`, w, i), true
			}, func(code int, body string) {
				if code == 200 && strings.Contains(body, `"allowed":true`) {
					allowed.Add(1)
					return
				}
				failed.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %s", code, body))
			})
			if err != nil {
				firstErr.CompareAndSwap(nil, err.Error())
			}
		})
	}

	// Sample the store size, evictions and heap every 200 ms.
	type sample struct {
		at                   time.Duration
		entries, evict, heap float64
	}
	var samples []sample
	floodDone := make(chan struct{})
	go func() { wg.Wait(); close(floodDone) }()
	for sampling := true; sampling; {
		select {
		case <-floodDone:
			sampling = false
		case <-time.After(200 * time.Millisecond):
		}
		samples = append(samples, sample{time.Since(start),
			metric(t, p, "leash_memstore_entries"), metric(t, p, "leash_memstore_evictions_total"),
			metric(t, p, "go_memstats_heap_inuse_bytes")})
	}
	elapsed := time.Since(start)
	stopHot()

	if v := firstErr.Load(); v != nil {
		t.Fatalf("%d of %d flood requests failed; first: %v", failed.Load(), sent.Load(), v)
	}
	n := sent.Load()
	var maxEnt, maxHeap, heapFull float64
	fullAt := time.Duration(-1)
	for _, s := range samples {
		if s.entries > float64(maxEntries) {
			t.Errorf("at %v the store held %v entries, above max_entries %d", s.at, s.entries, maxEntries)
		}
		maxEnt, maxHeap = max(maxEnt, s.entries), max(maxHeap, s.heap)
		if fullAt < 0 && s.evict > 0 {
			fullAt, heapFull = s.at, s.heap
		}
	}
	last := samples[len(samples)-1]
	t.Logf("flood: %d distinct keys in %v (%.0f keys/s, %d workers), max_entries %d: entries at most %.0f, evictions %.0f, "+
		"heap in use %.1f MiB when eviction began (%v), at most %.1f MiB, %.1f MiB at the end; hot key checked %d times "+
		"(longest gap %v), reset %d times (after gaps over 150 ms: %d)",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), workers, maxEntries, maxEnt, last.evict,
		heapFull/(1<<20), fullAt, maxHeap/(1<<20), last.heap/(1<<20), hotChecks.Load(),
		time.Duration(hotMaxGap.Load()).Round(time.Millisecond), hotWrong.Load()+hotStale.Load(), hotStale.Load())
	if int64(last.evict) < n-int64(maxEntries) {
		t.Errorf("evictions %v, want at least %d (keys sent %d beyond max_entries %d)", last.evict, n-int64(maxEntries), n, maxEntries)
	}
	if hotWrong.Load() > 0 || hotFailed.Load() > 0 || hotChecks.Load() < 20 {
		t.Errorf("hot key: %d checks, %d wrong, %d failed: %v", hotChecks.Load(), hotWrong.Load(), hotFailed.Load(), hotErr.Load())
	}
	// Heap bound: 64 MiB in use is far above what max_entries entries take (about
	// 100 B each) plus the process's baseline, and far below what keeping every key would
	// take in the long run. Once full, the heap must not keep growing with the keys.
	if maxHeap > 64<<20 {
		t.Errorf("heap in use reached %.1f MiB, above the 64 MiB bound", maxHeap/(1<<20))
	}
	if fullAt >= 0 && last.heap > heapFull+16<<20 {
		t.Errorf("heap grew from %.1f MiB to %.1f MiB after the store was full", heapFull/(1<<20), last.heap/(1<<20))
	}

	// Every lease taken before the flood is still held.
	for i, id := range leaseIDs {
		code, out, err := post(c, "POST", base+"/v1/leases/"+id+"/renew", "k", "")
		if err != nil || code != 200 || out["renewed"] != true {
			t.Fatalf("lease %d after the flood: %d %v %v (evicted?)", i, code, out, err)
		}
	}

	// Fill the store with live leases: counters are evicted to make room, leases never;
	// once a shard holds only leases, an acquire for a new lease set is 503 unavailable.
	var held []string
	evictBefore := metric(t, p, "leash_memstore_evictions_total")
	for i := 0; ; i++ {
		if i > 2*maxEntries {
			t.Fatalf("%d lease sets acquired on a store bounded at %d entries without a 503", i, maxEntries)
		}
		req, _ := http.NewRequest("POST", base+"/v1/leases", strings.NewReader(fmt.Sprintf(`{"namespace":"fill","key":"f%d","limit":1,"window_ms":600000}`, i)))
		req.Header.Set("Authorization", "Bearer k")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 503 {
			if !strings.Contains(string(b), `"code":"unavailable"`) || resp.Header.Get("Retry-After") != "1" {
				t.Fatalf("full store: %d %s Retry-After %q", resp.StatusCode, b, resp.Header.Get("Retry-After"))
			}
			break
		}
		var out map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil || out["allowed"] != true {
			t.Fatalf("fill lease %d: %d %s", i, resp.StatusCode, b)
		}
		held = append(held, out["lease_id"].(string))
	}
	entries := metric(t, p, "leash_memstore_entries")
	t.Logf("lease fill: %d lease sets acquired before the first 503 unavailable (entries %.0f of %d; %.0f counters evicted for them)",
		len(held), entries, maxEntries, metric(t, p, "leash_memstore_evictions_total")-evictBefore)
	if entries > float64(maxEntries) {
		t.Errorf("entries %v above max_entries %d", entries, maxEntries)
	}
	for i, id := range append(leaseIDs, held...) {
		code, out, err := post(c, "DELETE", base+"/v1/leases/"+id, "k", "")
		if err != nil || code != 200 || out["released"] != true {
			t.Fatalf("lease %d was not held any more: %d %v %v", i, code, out, err)
		}
	}
	// With the leases released there is room again.
	if code, out, err := post(c, "POST", base+"/v1/leases", "k", `{"namespace":"fill","key":"again","limit":1,"window_ms":1000}`); err != nil || code != 200 || out["allowed"] != true {
		t.Fatalf("acquire after releasing: %d %v %v", code, out, err)
	}

	// One key with a huge limit: every lease takes an entry, so its set cannot grow past
	// its shard's share of max_entries either; then 503, never unbounded memory.
	one := 0
	for ; ; one++ {
		if one > maxEntries {
			t.Fatalf("%d leases held on one key on a store bounded at %d entries", one, maxEntries)
		}
		code, out, err := post(c, "POST", base+"/v1/leases", "k", `{"namespace":"fill","key":"one","limit":1000000000,"window_ms":600000}`)
		if err != nil {
			t.Fatal(err)
		}
		if code == 503 && out["code"] == "unavailable" {
			break
		}
		if code != 200 || out["allowed"] != true {
			t.Fatalf("lease %d on one key: %d %v", one, code, out)
		}
	}
	t.Logf("one key, limit 1e9: %d leases held, then 503 unavailable (entries %.0f of %d)", one, metric(t, p, "leash_memstore_entries"), maxEntries)
}

// floodConn sends requests on one raw keep-alive connection, pipelined up to 32 deep:
// next returns the i-th body (false: done), and each response's status and body go to
// got, in order.
func floodConn(addr string, next func(i int) (string, bool), got func(code int, body string)) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	pending := make(chan struct{}, 32)
	readErr := make(chan error, 1)
	go func() {
		br := bufio.NewReader(c)
		for range pending {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				readErr <- err
				for range pending { // let the writer finish
				}
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				readErr <- err
				for range pending {
				}
				return
			}
			got(resp.StatusCode, string(b))
		}
		readErr <- nil
	}()
	var werr error
	var buf []byte
	for i := 0; ; i++ {
		body, ok := next(i)
		if !ok {
			break
		}
		buf = fmt.Appendf(buf[:0], "POST /v1/limit HTTP/1.1\r\nHost: leash\r\nAuthorization: Bearer k\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		pending <- struct{}{}
		if _, werr = c.Write(buf); werr != nil {
			break
		}
	}
	close(pending)
	if err := <-readErr; err != nil {
		return err
	}
	return werr
}
