package reliability

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
)

// loadTally is what the clients of one shutdown cycle received.
type loadTally struct {
	mu               sync.Mutex
	checks           int64               // 200 answers to POST /v1/limit
	acquires, denied int64               // 200 answers to POST /v1/leases, and of those allowed: false
	released         int64               // 200 answers {"released":true}
	unreleased       map[string][]string // lease key → tokens granted and not (known to be) released
	errs             map[string]int      // transport errors, by kind
	bad              []string            // answers that were not a complete 200 JSON body
	lastOK           time.Time
	closes           time.Time // SIGTERM + drain delay: no transport error before (zero: not signalled)
}

func (lt *loadTally) err(err error) {
	kind := "other: " + err.Error()
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		kind = "connection refused (listener closed)"
	case strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "server closed idle connection") ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"):
		kind = "idle keep-alive connection closed by the server"
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.errs[kind]++
	if lt.closes.IsZero() || time.Now().Before(lt.closes) || strings.HasPrefix(kind, "other") {
		lt.bad = append(lt.bad, "transport error before the listener closed, or of an unexpected kind: "+err.Error())
	}
}

// shutdownWorker loops over a check and a lease acquire+release until a transport error
// (the server closed its listener). Every answer must be a complete 200 JSON body.
func shutdownWorker(base string, cycle, w int, lt *loadTally) {
	c := apiClient()
	jobKey := fmt.Sprintf("c%d-j%d", cycle, w%4) // fresh lease sets each cycle
	for i := 0; ; i++ {
		code, out, err := post(c, "POST", base+"/v1/limit", "k",
			fmt.Sprintf(`{"namespace":"load","key":"c%d-%d","algorithm":"fixed_window","limit":1000000000,"window_ms":600000}`, w, i%16))
		if err != nil && code == 0 {
			lt.err(err)
			return
		}
		lt.mu.Lock()
		if err != nil || code != 200 || out["allowed"] != true || out["remaining"] == nil {
			lt.bad = append(lt.bad, fmt.Sprintf("check: %d %v %v", code, out, err))
		} else {
			lt.checks++
			lt.lastOK = time.Now()
		}
		lt.mu.Unlock()

		code, out, err = post(c, "POST", base+"/v1/leases", "k",
			`{"namespace":"jobs","key":"`+jobKey+`","limit":3,"window_ms":600000}`)
		if err != nil && code == 0 {
			lt.err(err)
			return
		}
		lt.mu.Lock()
		ok := err == nil && code == 200 && out["active"] != nil
		if !ok {
			lt.bad = append(lt.bad, fmt.Sprintf("acquire: %d %v %v", code, out, err))
		} else {
			lt.acquires++
			lt.lastOK = time.Now()
			if out["allowed"] != true {
				lt.denied++
			}
		}
		lt.mu.Unlock()
		if !ok || out["allowed"] != true {
			continue
		}
		id := out["lease_id"].(string)
		token := id[strings.LastIndexByte(id, '.')+1:]
		code, out, err = post(c, "DELETE", base+"/v1/leases/"+id, "k", "")
		lt.mu.Lock()
		switch {
		case err == nil && code == 200 && out["released"] == true:
			lt.released++
			lt.lastOK = time.Now()
		case err != nil && code == 0:
			lt.unreleased[jobKey] = append(lt.unreleased[jobKey], token)
		default:
			lt.bad = append(lt.bad, fmt.Sprintf("release: %d %v %v", code, out, err))
			lt.unreleased[jobKey] = append(lt.unreleased[jobKey], token)
		}
		lt.mu.Unlock()
		if err != nil && code == 0 {
			lt.err(err)
			return
		}
	}
}

// TestShutdownUnderLoad: a real leash serve on a test-started redis-server, clients
// hammering checks and lease acquire+release, SIGTERM in the middle. Every answer
// received is a complete 200; requests in flight when the listener closes complete; new
// connections after the drain delay are refused; the process exits 0 within 10 s. After a
// restart on the same Redis the stats equal exactly the 200 answers the clients got
// (usage flushed, nothing lost, nothing counted twice), and each lease set in Redis holds
// exactly the leases whose release got no answer: acquiring up to the limit again works.
// Default: one cycle of 12 clients; RELIABILITY_LONG=1: five cycles of 32 clients.
func TestShutdownUnderLoad(t *testing.T) {
	cycles, workers, loadFor := 1, 12, 1500*time.Millisecond
	if longRun() {
		cycles, workers, loadFor = 5, 32, 5*time.Second
	}
	const drain = 2 * time.Second // the default
	r := redistest.StartServer(t, false)
	// A 2 s store timeout: Redis is healthy here, and a race-instrumented leash on a busy
	// 2-core machine can miss the default 500 ms; every answer must be a 200.
	env := []string{"LEASH_DEV_API_KEY=k", "LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL=" + r.URL(),
		"LEASH_STORE_REDIS_READ_TIMEOUT=2s", "LEASH_STORE_REDIS_PREFIX=sd", "LEASH_SHUTDOWN_DRAIN_DELAY=" + drain.String()}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })

	var totalChecks, totalAcquires, totalDenied int64
	unreleased := map[string][]string{}
	for cycle := range cycles {
		p := leashproc.Start(t, binary, nil, env...)
		base := "http://" + p.HTTP
		lt := &loadTally{unreleased: map[string][]string{}, errs: map[string]int{}}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() { shutdownWorker(base, cycle, w, lt) })
		}
		time.Sleep(loadFor)

		// Three requests in flight across the listener's close: headers and part of a body
		// 1 s before it, the rest 0.5 s after it.
		type inflight struct {
			conn net.Conn
			body string
		}
		var slow []inflight
		sig := time.Now()
		lt.mu.Lock()
		lt.closes = sig.Add(drain)
		lt.mu.Unlock()
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(drain - time.Second)
		for i := range 3 {
			body := fmt.Sprintf(`{"namespace":"load","key":"inflight-%d","algorithm":"fixed_window","limit":1000000000,"window_ms":600000}`, i)
			conn, err := net.Dial("tcp", p.HTTP)
			if err != nil {
				t.Fatalf("cycle %d: dial during the drain delay: %v", cycle, err)
			}
			fmt.Fprintf(conn, "POST /v1/limit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				len(body), body[:20])
			slow = append(slow, inflight{conn, body})
		}
		time.Sleep(1500 * time.Millisecond) // the listener closed 1 s before the deadline
		if c, err := net.DialTimeout("tcp", p.HTTP, time.Second); err == nil {
			c.Close()
			t.Fatalf("cycle %d: a new connection was accepted %v after SIGTERM (drain delay %v)", cycle, time.Since(sig), drain)
		}
		for i, s := range slow {
			fmt.Fprint(s.conn, s.body[20:])
			resp, err := http.ReadResponse(bufio.NewReader(s.conn), nil)
			if err != nil {
				t.Fatalf("cycle %d: in-flight request %d lost: %v", cycle, i, err)
			}
			var b strings.Builder
			_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
			resp.Body.Close()
			s.conn.Close()
			if resp.StatusCode != 200 || !strings.Contains(b.String(), `"allowed":true`) {
				t.Fatalf("cycle %d: in-flight request %d: %d %s", cycle, i, resp.StatusCode, b.String())
			}
			lt.mu.Lock()
			lt.checks++
			lt.mu.Unlock()
		}

		var exitErr error
		select {
		case exitErr = <-p.Exited:
		case <-time.After(10*time.Second - time.Since(sig)):
			t.Fatalf("cycle %d: leash did not exit within 10 s of SIGTERM", cycle)
		}
		exitAfter := time.Since(sig)
		if exitErr != nil {
			t.Fatalf("cycle %d: exit: %v", cycle, exitErr)
		}
		wg.Wait()
		raw := p.Raw()
		if len(raw) > 0 {
			t.Fatalf("cycle %d: leash wrote non-log lines (panic or race report?):\n%s", cycle, strings.Join(raw, "\n"))
		}
		if len(lt.bad) > 0 {
			t.Fatalf("cycle %d: %d incomplete or wrong answers, e.g. %s", cycle, len(lt.bad), lt.bad[0])
		}
		t.Logf("cycle %d: %d clients, SIGTERM after %v of load; answered 200: %d checks, %d acquires (%d denied), %d releases; "+
			"last answer %v after SIGTERM; exit 0 after %v; client errors after the listener closed: %v",
			cycle, workers, loadFor, lt.checks, lt.acquires, lt.denied, lt.released,
			lt.lastOK.Sub(sig).Round(time.Millisecond), exitAfter.Round(time.Millisecond), lt.errs)
		totalChecks += lt.checks
		totalAcquires += lt.acquires
		totalDenied += lt.denied
		for k, toks := range lt.unreleased {
			unreleased[k] = append(unreleased[k], toks...)
		}
	}

	// Restart on the same Redis: the stats are exactly what the clients were answered.
	p := leashproc.Start(t, binary, nil, env...)
	c := isoClient{t: t, base: "http://" + p.HTTP}
	load := c.want("GET", "/v1/namespaces/load/stats", "k", "", 200)
	jobs := c.want("GET", "/v1/namespaces/jobs/stats", "k", "", 200)
	if got := field(t, load, "total"); got != float64(totalChecks) {
		t.Errorf("checks: stats total %v, clients got %d answers", got, totalChecks)
	}
	if got := field(t, jobs, "total"); got != float64(totalAcquires) {
		t.Errorf("acquires: stats total %v, clients got %d answers", got, totalAcquires)
	}
	if got := field(t, jobs, "blocked"); got != float64(totalDenied) {
		t.Errorf("acquires: stats blocked %v, clients got %d denials", got, totalDenied)
	}
	// Each lease set holds exactly the leases whose release was never answered.
	for cycle := range cycles {
		for j := range 4 {
			key := fmt.Sprintf("c%d-j%d", cycle, j)
			held, err := rdb.ZRange(context.Background(), "{sd:k:dev:jobs:"+key+"}:lz", 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(unreleased[key])
			sort.Strings(held)
			sort.Strings(want)
			if !slices.Equal(held, want) {
				t.Errorf("lease set %s holds %v, want exactly the unreleased %v", key, held, want)
			}
			idPrefix := leaseIDOf("jobs", key)
			idPrefix = idPrefix[:strings.LastIndexByte(idPrefix, '.')+1]
			for _, tok := range want {
				c.want("DELETE", "/v1/leases/"+idPrefix+tok, "k", "", 200, `"released":true`)
			}
			for i := range 3 {
				c.want("POST", "/v1/leases", "k", `{"namespace":"jobs","key":"`+key+`","limit":3,"window_ms":60000}`, 200,
					`"allowed":true`, fmt.Sprintf(`"active":%d`, i+1))
			}
			c.want("POST", "/v1/leases", "k", `{"namespace":"jobs","key":"`+key+`","limit":3,"window_ms":60000}`, 200, `"allowed":false`)
		}
	}
	n := 0
	for _, v := range unreleased {
		n += len(v)
	}
	t.Logf("after %d cycle(s) and a restart: stats equal the answers exactly (%d checks, %d acquires, %d denied); "+
		"%d leases whose release was cut off by the shutdown, and no released lease, left in Redis", cycles, totalChecks, totalAcquires, totalDenied, n)
}
