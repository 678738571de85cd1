package reliability

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leashd/leash/testkit/leashproc"
)

// slowResult is what a slow client saw: how long until the server closed the
// connection (from the dial), and the response it got first, if any.
type slowResult struct {
	closedAfter time.Duration
	resp        *http.Response
	body        string
	err         error
}

// slowClient dials addr and runs send on the connection while reading: it returns when
// the server closes the connection (or after 15 s).
func slowClient(addr string, send func(net.Conn) error) <-chan slowResult {
	out := make(chan slowResult, 1)
	go func() {
		var r slowResult
		defer func() { out <- r }()
		start := time.Now() // before the dial: the server's clock may start before Dial returns
		c, err := net.Dial("tcp", addr)
		if err != nil {
			r.err = err
			return
		}
		defer c.Close()
		go func() { _ = send(c) }() // ends with a write error once the server closes
		_ = c.SetReadDeadline(start.Add(15 * time.Second))
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, nil); err == nil {
			b, _ := io.ReadAll(resp.Body)
			r.resp, r.body = resp, string(b)
		}
		_, _ = io.Copy(io.Discard, br)
		r.closedAfter = time.Since(start)
		if r.closedAfter >= 15*time.Second {
			r.err = fmt.Errorf("connection still open after 15 s")
		}
	}()
	return out
}

// trickle writes b one byte every step, then keeps writing filler bytes (a header line
// that never ends, or more body) until a write fails.
func trickle(b string, step time.Duration) func(net.Conn) error {
	return func(c net.Conn) error {
		for i := 0; ; i++ {
			ch := byte('x')
			if i < len(b) {
				ch = b[i]
			}
			if _, err := c.Write([]byte{ch}); err != nil {
				return err
			}
			time.Sleep(step)
		}
	}
}

// TestSlowClientsCutOff: against a real `leash serve` with short bounds, clients that
// send their headers or their body byte by byte are disconnected at about
// http.read_header_timeout and http.read_timeout, a keep-alive connection left idle is
// closed at about http.idle_timeout, a TCP connection to the gRPC port that never sends the
// HTTP/2 preface is closed at about the 5 s handshake bound, and a normal client is
// served throughout with every slow request doing no work (no decision counted).
// Default: 25 slow-header and 25 slow-body connections; RELIABILITY_LONG=1: 1000 of each.
func TestSlowClientsCutOff(t *testing.T) {
	const (
		headerTimeout = time.Second
		readTimeout   = 2 * time.Second
		idleTimeout   = 1500 * time.Millisecond
	)
	slowEach := 25 // slow-header and slow-body connections each
	if longRun() {
		slowEach = 1000
	}
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=k",
		"LEASH_HTTP_READ_HEADER_TIMEOUT="+headerTimeout.String(), "LEASH_HTTP_READ_TIMEOUT="+readTimeout.String(),
		"LEASH_HTTP_IDLE_TIMEOUT="+idleTimeout.String())

	body := `{"namespace":"slow","key":"k","limit":1000000,"window_ms":60000}`
	var headers, bodies []<-chan slowResult
	for range slowEach {
		// Headers one byte per 100 ms: the request line alone takes 1.7 s.
		headers = append(headers, slowClient(p.HTTP, trickle("POST /v1/limit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nX-Pad: ", 100*time.Millisecond)))
		// Headers at once, then the body one byte per 100 ms: 6.4 s for the whole body.
		bodies = append(bodies, slowClient(p.HTTP, func(c net.Conn) error {
			if _, err := fmt.Fprintf(c, "POST /v1/limit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n"+
				"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body)); err != nil {
				return err
			}
			return trickle(body, 100*time.Millisecond)(c)
		}))
	}
	grpcSilent := slowClient(p.GRPC, func(net.Conn) error { return nil })
	// Idle keep-alive: one whole request, then nothing (answered in a few ms, so the
	// close comes about idle_timeout after the dial).
	idle := slowClient(p.HTTP, func(c net.Conn) error {
		_, err := fmt.Fprintf(c, "POST /v1/limit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return err
	})

	// A normal client meanwhile: a check every 20 ms on one keep-alive connection.
	var (
		wg                sync.WaitGroup
		served, failed    int
		worst             time.Duration
		stopNormal        = make(chan struct{})
		normalClient      = &http.Client{Timeout: 5 * time.Second}
		normalErr         error
		normalBody        = `{"namespace":"normal","key":"k","limit":1000000,"window_ms":60000}`
		normalStatusCodes = map[int]int{}
	)
	wg.Go(func() {
		for {
			select {
			case <-stopNormal:
				return
			case <-time.After(20 * time.Millisecond):
			}
			req, _ := http.NewRequest("POST", "http://"+p.HTTP+"/v1/limit", strings.NewReader(normalBody))
			req.Header.Set("Authorization", "Bearer k")
			start := time.Now()
			resp, err := normalClient.Do(req)
			if err != nil {
				failed++
				normalErr = err
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			normalStatusCodes[resp.StatusCode]++
			if resp.StatusCode == 200 {
				served++
			} else {
				failed++
			}
			worst = max(worst, time.Since(start))
		}
	})

	check := func(name string, r slowResult, want time.Duration) {
		t.Helper()
		if r.err != nil {
			t.Errorf("%s: %v", name, r.err)
			return
		}
		// Generous upper slack: two shared cores and a -race binary.
		if r.closedAfter < want-100*time.Millisecond || r.closedAfter > want+3*time.Second {
			t.Errorf("%s: connection closed after %v, want about %v", name, r.closedAfter, want)
		}
	}
	var maxHeader, maxBody time.Duration
	for _, ch := range headers {
		r := <-ch
		check("slow headers", r, headerTimeout)
		// net/http may answer a plain-text 400 before closing; never anything the API decided.
		if r.resp != nil && (r.resp.StatusCode != 400 || r.resp.Header.Get("X-Request-Id") != "") {
			t.Errorf("slow headers: got a response %d %s, want the connection closed (with at most net/http's 400)", r.resp.StatusCode, r.body)
		}
		maxHeader = max(maxHeader, r.closedAfter)
	}
	for _, ch := range bodies {
		r := <-ch
		check("slow body", r, readTimeout)
		// The handler's body read fails at the deadline: 400, never a decision.
		if r.resp != nil && (r.resp.StatusCode != 400 || !strings.Contains(r.body, `"code":"invalid_request"`)) {
			t.Errorf("slow body: response %d %s, want 400 invalid_request or none", r.resp.StatusCode, r.body)
		}
		maxBody = max(maxBody, r.closedAfter)
	}
	r := <-idle
	idleFor := r.closedAfter
	if r.resp == nil || r.resp.StatusCode != 200 {
		t.Errorf("idle client: its one request was not answered 200: %v %s", r.resp, r.body)
	}
	check("idle keep-alive", r, idleTimeout)
	g := <-grpcSilent
	check("gRPC without a preface", g, 5*time.Second)
	close(stopNormal)
	wg.Wait()

	t.Logf("%d slow-header connections closed within %v (read_header_timeout %v); %d slow-body within %v (read_timeout %v); "+
		"idle keep-alive closed after %v (idle_timeout %v); silent gRPC connection closed after %v (handshake 5s); "+
		"normal client: %d served, %d failed, slowest %v",
		slowEach, maxHeader, headerTimeout, slowEach, maxBody, readTimeout, idleFor, idleTimeout, g.closedAfter,
		served, failed, worst)
	if failed > 0 || served < 50 {
		t.Fatalf("normal client: %d served, %d failed (statuses %v, last error %v)", served, failed, normalStatusCodes, normalErr)
	}
	if worst > 2*time.Second {
		t.Errorf("normal client: slowest request took %v while slow clients were connected", worst)
	}
	// Only the normal client's checks and the idle client's one were decided.
	if got := metric(t, p, `leash_decisions_total{endpoint="limit",outcome="allowed"}`); got != float64(served+1) {
		t.Errorf("decisions counted %v, want %d: a slow request reached the engine", got, served+1)
	}
}

// metric reads one sample of the process's /metrics by its exact name and labels; a
// sample that is absent fails the test.
func metric(t *testing.T, p *leashproc.Proc, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatalf("metric %s: %q", sample, v)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no sample %s", sample)
	return 0
}
