package respipe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/redistest"
	"github.com/leashd/leash/testkit/testcert"
)

// incrScript replies {tag, the key's count after an INCR}: a reply that tells its caller
// apart (tag) and counts the calls that ran (the count).
const incrScript = "return {tonumber(ARGV[1]), redis.call('INCR', KEYS[1])}"

// incr runs incrScript with EVAL on p.
func incr(ctx context.Context, p *Pipe, key string, tag int64) ([]int64, error) {
	c := p.NewCall(5)
	c.Str("EVAL")
	c.Str(incrScript)
	c.Int(1)
	c.Str(key)
	c.Int(tag)
	return p.Do(ctx, c, nil)
}

// newPool returns a pool with o's timeouts defaulting to 500 ms, closed when the test ends.
func newPool(t *testing.T, o Options) *Pool {
	t.Helper()
	for _, d := range []*time.Duration{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout} {
		if *d == 0 {
			*d = 500 * time.Millisecond
		}
	}
	pl := NewPool(o)
	t.Cleanup(pl.Close)
	return pl
}

func adminOf(t *testing.T, o *redis.Options) *redis.Client {
	t.Helper()
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// clientsRunning returns the CLIENT LIST lines of the connections whose last command was cmd.
func clientsRunning(t *testing.T, admin *redis.Client, cmd string) []string {
	t.Helper()
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if strings.Contains(line, " cmd="+cmd+" ") {
			out = append(out, line)
		}
	}
	return out
}

func fieldOf(line, name string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}

// TestRepliesReachTheirCallers: 64 callers share one connection; each gets its own reply,
// in its own order (each caller has its own tag and key, so a reply handed to the wrong
// caller shows as a wrong tag or count).
func TestRepliesReachTheirCallers(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	p := newPool(t, Options{}).Pipe(srv.Addr())
	ctx := context.Background()
	const callers, calls = 64, 150
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for g := range int64(callers) {
		wg.Go(func() {
			key := "k" + strconv.FormatInt(g, 10)
			for i := range int64(calls) {
				r, err := incr(ctx, p, key, 1000+g)
				if err != nil {
					errs <- err
					return
				}
				if want := []int64{1000 + g, i + 1}; !slices.Equal(r, want) {
					errs <- fmt.Errorf("caller %d call %d: got %v, want %v", g, i, r, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	admin := adminOf(t, &redis.Options{Addr: srv.Addr()})
	if got := clientsRunning(t, admin, "eval"); len(got) != 1 {
		t.Fatalf("%d connections ran EVAL, want the pipe's one: %v", len(got), got)
	}
}

// TestDoAppendsToDst: Do appends the reply to dst, and NewEvalSha builds EVALSHA with keys
// and arguments; an unknown script is NOSCRIPT, a reply that leaves the connection usable.
func TestDoAppendsToDst(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	ctx := context.Background()
	admin := adminOf(t, &redis.Options{Addr: srv.Addr()})
	sha, err := admin.ScriptLoad(ctx, "return {#KEYS, tonumber(ARGV[1]), tonumber(ARGV[2])}").Result()
	if err != nil {
		t.Fatal(err)
	}
	pl := newPool(t, Options{})
	p := pl.Pipe(srv.Addr())
	var buf [8]int64
	c := p.NewEvalSha(sha, []string{"{t}a", "{t}b"}, 2)
	c.Int(-7)
	c.Str("42")
	r, err := p.Do(ctx, c, append(buf[:0], 99))
	if err != nil || !slices.Equal(r, []int64{99, 2, -7, 42}) {
		t.Fatalf("got %v, %v; want [99 2 -7 42]", r, err)
	}
	c = p.NewEvalSha(strings.Repeat("0", 40), []string{"k"}, 0)
	_, err = p.Do(ctx, c, nil)
	var re ReplyError
	if !errors.As(err, &re) || re.Code() != "NOSCRIPT" || !NotRunHere(err) {
		t.Fatalf("unknown script: %v, want a NOSCRIPT reply", err)
	}
	if r, err := incr(ctx, p, "k", 5); err != nil || !slices.Equal(r, []int64{5, 1}) {
		t.Fatalf("after NOSCRIPT: %v, %v", r, err)
	}
	if pl.Conns() != 1 {
		t.Fatalf("Conns() = %d, want 1", pl.Conns())
	}
}

// TestConnectionKilled: a connection Redis closes (CLIENT KILL) fails only the calls
// waiting on it, and the next calls dial again.
func TestConnectionKilled(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	const readTimeout = 300 * time.Millisecond
	p := newPool(t, Options{ReadTimeout: readTimeout}).Pipe(srv.Addr())
	ctx := context.Background()
	admin := adminOf(t, &redis.Options{Addr: srv.Addr()})
	for round := range 5 {
		if _, err := incr(ctx, p, "k", 0); err != nil {
			t.Fatal(err)
		}
		// Every client but admin's own connection.
		if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		testkit.Eventually(t, fmt.Sprintf("round %d: serving again after CLIENT KILL", round), 2*time.Second, func() bool {
			cs := time.Now()
			_, err := incr(ctx, p, "k", 0)
			if d := time.Since(cs); d > 2*readTimeout {
				t.Fatalf("round %d: a call took %v after its connection was killed", round, d)
			}
			return err == nil
		})
		t.Logf("round %d: serving again %v after CLIENT KILL", round, time.Since(start).Round(time.Millisecond))
	}
}

// TestAuthenticatesAndSelects: the pipe logs in as the configured ACL user and uses the
// configured database; a rejected password fails the call.
func TestAuthenticatesAndSelects(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false, "--requirepass", "adm1n")
	ctx := context.Background()
	admin := adminOf(t, &redis.Options{Addr: srv.Addr(), Password: "adm1n"})
	if err := admin.Do(ctx, "ACL", "SETUSER", "leash", "on", ">s3cret", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	p := newPool(t, Options{Username: "leash", Password: "s3cret", DB: 3}).Pipe(srv.Addr())
	if _, err := incr(ctx, p, "k", 0); err != nil {
		t.Fatalf("call as an ACL user on db 3: %v", err)
	}
	if n, err := admin.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("key found in db 0 (%d, %v); want it in db 3 only", n, err)
	}
	db3 := adminOf(t, &redis.Options{Addr: srv.Addr(), Password: "adm1n", DB: 3})
	if n, err := db3.Exists(ctx, "k").Result(); err != nil || n != 1 {
		t.Fatalf("key not in db 3 (%d, %v)", n, err)
	}
	lines := clientsRunning(t, admin, "eval")
	if len(lines) != 1 || fieldOf(lines[0], "user") != "leash" || fieldOf(lines[0], "db") != "3" {
		t.Fatalf("the pipe's connection: %v; want user leash on db 3", lines)
	}

	// The default user with the password alone, and a rejected password.
	p = newPool(t, Options{Password: "adm1n"}).Pipe(srv.Addr())
	if _, err := incr(ctx, p, "k", 0); err != nil {
		t.Fatalf("call with the default user's password: %v", err)
	}
	p = newPool(t, Options{Username: "leash", Password: "wrong"}).Pipe(srv.Addr())
	_, err := incr(ctx, p, "k", 0)
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("rejected password: %v; want WRONGPASS, without the password", err)
	}
}

// TestTLS: with a TLS configuration the pipe speaks TLS, verifying the server's
// certificate for the address's host by default.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, k := testcert.New(t, nil, nil, "redis", true)
	srv, tlsPort := redistest.StartTLSServer(t, testcert.WriteCert(t, dir, "cert.pem", c), testcert.WriteKey(t, dir, "key.pem", k))
	roots := x509.NewCertPool()
	roots.AddCert(c)
	pl := newPool(t, Options{TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}})
	tlsAddr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	ctx := context.Background()
	for i := range int64(3) {
		r, err := incr(ctx, pl.Pipe(tlsAddr), "k", 0)
		if err != nil {
			t.Fatalf("call over TLS: %v", err)
		}
		if r[1] != i+1 {
			t.Fatalf("count %d, want %d", r[1], i+1)
		}
	}
	admin := adminOf(t, &redis.Options{Addr: srv.Addr()})
	lines := clientsRunning(t, admin, "eval")
	if len(lines) != 1 || fieldOf(lines[0], "laddr") != tlsAddr {
		t.Fatalf("the pipe's connection: %v; want one, on the TLS port", lines)
	}
	// Plain TCP to the TLS port fails, and so does a certificate nobody vouches for.
	if _, err := incr(ctx, newPool(t, Options{}).Pipe(tlsAddr), "k", 0); err == nil {
		t.Fatal("plain TCP to the TLS port succeeded")
	}
	if _, err := incr(ctx, newPool(t, Options{TLS: &tls.Config{MinVersion: tls.VersionTLS12}}).Pipe(tlsAddr), "k", 0); err == nil {
		t.Fatal("TLS with an unknown certificate authority succeeded")
	}
}

// TestHungRedisBreaksConnection: a Redis that stops answering (SIGSTOP) breaks the
// connection once the oldest reply is ReadTimeout overdue, even for callers willing to
// wait longer; the calls fail with ErrDown and the next ones dial again once it answers.
func TestHungRedisBreaksConnection(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	const readTimeout = 300 * time.Millisecond
	p := newPool(t, Options{ReadTimeout: readTimeout}).Pipe(srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := incr(ctx, p, "k", 0); err != nil {
		t.Fatal(err)
	}
	srv.Signal(syscall.SIGSTOP)
	defer srv.Signal(syscall.SIGCONT)
	start := time.Now()
	_, err := incr(ctx, p, "k", 0)
	d := time.Since(start)
	if !errors.Is(err, ErrDown) {
		t.Fatalf("call to a frozen Redis: %v, want ErrDown", err)
	}
	if d < readTimeout || d >= 2*readTimeout {
		t.Fatalf("call to a frozen Redis failed after %v, want ReadTimeout (%v) to twice that", d, readTimeout)
	}
	srv.Signal(syscall.SIGCONT)
	testkit.Eventually(t, "recovery after the freeze", 5*time.Second, func() bool {
		r, err := incr(ctx, p, "k", 0)
		if err == nil {
			// The count shows the call that broke the connection ran anyway once Redis
			// woke: a failed call may have run, which is why none is ever resent.
			t.Logf("recovered; count %d after 3 calls", r[1])
		}
		return err == nil
	})
}

// TestAbandonedCall: a caller whose context ends first gets its context's error; the
// reply that comes later is dropped, and the next caller gets its own reply.
func TestAbandonedCall(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	p := newPool(t, Options{ReadTimeout: 5 * time.Second}).Pipe(srv.Addr())
	if _, err := incr(context.Background(), p, "k", 0); err != nil {
		t.Fatal(err)
	}
	srv.Signal(syscall.SIGSTOP)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := incr(ctx, p, "k", 1)
	cancel()
	srv.Signal(syscall.SIGCONT)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("abandoned call: %v, want its context's error", err)
	}
	r, err := incr(context.Background(), p, "k", 2)
	if err != nil || !slices.Equal(r, []int64{2, 3}) {
		t.Fatalf("next call: %v, %v; want [2 3] (its own reply, after the abandoned call ran)", r, err)
	}
}

// TestRedialDelay: a dial that fails makes the next calls fail at once with ErrDown for
// redialDelay; then the pipe dials again.
func TestRedialDelay(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	srv.Stop()
	p := newPool(t, Options{}).Pipe(srv.Addr())
	ctx := context.Background()
	if _, err := incr(ctx, p, "k", 0); err == nil || errors.Is(err, ErrDown) {
		t.Fatalf("first call with Redis stopped: %v, want the dial's error", err)
	}
	failed := time.Now()
	if _, err := incr(ctx, p, "k", 0); !errors.Is(err, ErrDown) || time.Since(failed) >= redialDelay {
		t.Fatalf("call within the redial delay: %v after %v, want ErrDown at once", err, time.Since(failed))
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// Calls keep failing at once until the delay has passed, then the pipe dials again.
	testkit.Eventually(t, "a call served after the redial delay", redialDelay+5*time.Second, func() bool {
		_, err := incr(ctx, p, "k", 0)
		if err != nil && !errors.Is(err, ErrDown) {
			t.Fatalf("call after Redis started again: %v, want ErrDown or success", err)
		}
		return err == nil
	})
}

// TestRedial: Redial moves the calls to a new connection while the old one delivers what
// it owes and closes; no call fails.
func TestRedial(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	pl := newPool(t, Options{})
	p := pl.Pipe(srv.Addr())
	admin := adminOf(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()
	var calls, failures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range int64(8) {
		wg.Go(func() {
			key := "k" + strconv.FormatInt(g, 10)
			for n := int64(1); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				r, err := incr(ctx, p, key, g)
				if err != nil || !slices.Equal(r, []int64{g, n}) {
					failures.Add(1)
					t.Errorf("caller %d call %d: %v, %v", g, n, r, err)
					return
				}
				calls.Add(1)
			}
		})
	}
	// Each connection serves some calls before the next redial, however slow the machine.
	served := func() {
		next := calls.Load() + 50
		testkit.Eventually(t, "50 more calls served", 10*time.Second, func() bool { return calls.Load() >= next || failures.Load() > 0 })
	}
	for range 10 {
		served()
		p.Redial()
	}
	served()
	close(stop)
	wg.Wait()
	if failures.Load() > 0 {
		t.FailNow()
	}
	t.Logf("%d calls across 10 redials", calls.Load())
	// The retired connections close once drained: one is left.
	testkit.Eventually(t, "one connection left after the redials", 2*time.Second, func() bool {
		lines := clientsRunning(t, admin, "eval")
		p.mu.Lock()
		retired := len(p.retired)
		p.mu.Unlock()
		return len(lines) == 1 && pl.Conns() == 1 && retired == 0
	})
}

// TestDialOption: Options.Dial replaces dialing the address (as for a Sentinel master,
// whose address the dialer looks up).
func TestDialOption(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	var dials atomic.Int64
	pl := newPool(t, Options{Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		if addr != "the-master" {
			return nil, fmt.Errorf("dial %q", addr)
		}
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", srv.Addr())
	}})
	ctx := context.Background()
	for range 3 {
		if _, err := incr(ctx, pl.Pipe("the-master"), "k", 0); err != nil {
			t.Fatal(err)
		}
	}
	if dials.Load() != 1 {
		t.Fatalf("%d dials, want 1", dials.Load())
	}
}

// TestClose: Close fails the calls waiting, on the current connection and on one retired
// by Redial, ends the readers, and refuses later calls.
func TestClose(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	pl := NewPool(Options{DialTimeout: time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: time.Second})
	p := pl.Pipe(srv.Addr())
	ctx := context.Background()
	if _, err := incr(ctx, p, "k", 0); err != nil {
		t.Fatal(err)
	}
	srv.Signal(syscall.SIGSTOP) // the kernel still accepts connections
	defer srv.Signal(syscall.SIGCONT)
	done := make(chan error, 2)
	call := func() { // returns once the call is written, waiting for its reply
		written := pl.Stats().Calls + 1
		go func() {
			_, err := incr(ctx, p, "k", 0)
			done <- err
		}()
		testkit.Eventually(t, "the call written", 5*time.Second, func() bool { return pl.Stats().Calls >= written })
	}
	call()
	p.Redial()
	call() // on a new connection
	start := time.Now()
	pl.Close()
	for range 2 {
		if err := <-done; !errors.Is(err, ErrDown) {
			t.Fatalf("call waiting at Close: %v, want ErrDown", err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %v", d)
	}
	if _, err := incr(ctx, p, "k", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v, want ErrClosed", err)
	}
	if pl.Pipe(srv.Addr()) != nil || pl.Pipe("elsewhere:1") != nil {
		t.Fatal("Pipe after Close returned a pipe")
	}
	if pl.Conns() != 0 {
		t.Fatalf("Conns() = %d after Close", pl.Conns())
	}
	pl.Close() // idempotent
}

// TestOwedQueueStaysBounded: under load that never lets the owed replies drain to zero, the
// queue of owed calls keeps its memory proportional to what is owed, not to everything ever
// sent.
func TestOwedQueueStaysBounded(t *testing.T) {
	var q owedQueue
	calls := make([]*Call, 64)
	for i := range calls {
		calls[i] = &Call{}
	}
	for i := range 32 {
		q.push(calls[i])
	}
	for i := range 200_000 {
		q.push(calls[(32+i)%64])
		if got, want := q.pop(), calls[i%64]; got != want {
			t.Fatalf("pop %d returned the wrong call", i)
		}
		if q.len() != 32 {
			t.Fatalf("len %d after pop %d, want 32", q.len(), i)
		}
	}
	if c := cap(q.calls); c > 4096 {
		t.Fatalf("queue holds 32 calls in a slice of capacity %d", c)
	}
	if q.oldest() != calls[200_000%64] {
		t.Fatal("oldest is not the next to pop")
	}
	owed := q.takeAll()
	if len(owed) != 32 || q.len() != 0 || q.pop() != nil || q.oldest() != nil {
		t.Fatalf("takeAll: %d calls, %d left", len(owed), q.len())
	}
}

// TestCallsDoNotAllocate: a call on a live connection allocates nothing, nor does a call of
// a Merge.
func TestCallsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	srv := redistest.StartServer(t, false)
	ctx := context.Background()
	sha, err := adminOf(t, &redis.Options{Addr: srv.Addr()}).ScriptLoad(ctx, "return {tonumber(ARGV[1]), 2, 3, 4}").Result()
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(t, Options{}).Pipe(srv.Addr())
	keys := []string{"k"}
	var buf [4]int64
	m := &Merge{Sha: sha, Head: 0, Width: 1, Reply: 4, Max: 64}
	run := func() {
		c := p.NewEvalSha(sha, keys, 1)
		c.Int(1)
		if r, err := p.Do(ctx, c, buf[:0]); err != nil || len(r) != 4 {
			t.Fatal(r, err)
		}
		c = p.NewMerged(m, "", "k") // a call of a Merge, alone
		c.Int(1)
		if r, err := p.Do(ctx, c, buf[:0]); err != nil || len(r) != 4 {
			t.Fatal(r, err)
		}
	}
	run()
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Fatalf("%v allocations per call, want 0", n)
	}
}

// TestCallAfterCutReplyRedials: a call made as soon as another heard ErrDown for a reply
// cut short goes out on a new connection and succeeds: the broken one is let go before
// its calls hear of it, never after (a call made in between would be written to it and
// fail too).
func TestCallAfterCutReplyRedials(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	px := redistest.StartProxy(t, srv.Addr())
	p := newPool(t, Options{}).Pipe(px.Addr())
	ctx := context.Background()
	for round := range 200 {
		if _, err := incr(ctx, p, "k", 1); err != nil {
			t.Fatalf("round %d: before the cut: %v", round, err)
		}
		px.CutAfter(3) // "*2\r" of the reply's "*2\r\n:1\r\n:..."
		if _, err := incr(ctx, p, "k", 1); !errors.Is(err, ErrDown) {
			t.Fatalf("round %d: a call whose reply was cut: %v, want ErrDown", round, err)
		}
		if _, err := incr(ctx, p, "k", 1); err != nil {
			t.Fatalf("round %d: the call right after the cut: %v", round, err)
		}
	}
}
