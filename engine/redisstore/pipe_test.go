package redisstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/internal/redistest"
	"github.com/leashd/leash/internal/testcert"
)

// The decisions' pipe (pipe.go), through the Store's public methods in the default mode.

func pipeSpend(key string, limit int64) engine.Spend {
	return engine.Spend{Counter: engine.Counter{Account: "a", Namespace: "ns", Key: key, Algorithm: engine.FixedWindow, WindowMS: 3_600_000}, Limit: limit, Cost: 1}
}

// TestPipeRepliesReachTheirCallers: many callers share one connection; each gets its own
// reply, in its own order (every counter has its own limit, so a reply handed to the
// wrong caller shows as a wrong Remaining).
func TestPipeRepliesReachTheirCallers(t *testing.T) {
	t.Parallel()
	s := singleStore(t, nil)
	if s.pipes == nil {
		t.Fatal("the default mode does not use the pipe")
	}
	ctx := context.Background()
	const callers, calls = 64, 150
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			limit := int64(1_000 + g)
			sp := pipeSpend("k"+strconv.Itoa(g), limit)
			for i := range int64(calls) {
				d, err := s.Spend(ctx, sp)
				if err != nil {
					errs <- err
					return
				}
				if !d.Allowed || d.Limit != limit || d.Remaining != limit-i-1 {
					errs <- fmt.Errorf("caller %d call %d: got %+v, want limit %d remaining %d", g, i, d, limit, limit-i-1)
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
	if got := s.PoolStats().Conns; got < 1 {
		t.Fatalf("PoolStats counts %d connections; the pipe's is missing", got)
	}
}

// TestPipeScriptsFlushed: scripts missing on the server (SCRIPT FLUSH, or a restarted
// Redis) are loaded again and the decisions carry on.
func TestPipeScriptsFlushed(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	s := openStore(t, Options{URL: srv.URL()})
	ctx := context.Background()
	sp := pipeSpend("k", 100)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	for i := range int64(5) {
		if err := admin.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		d, err := s.Spend(ctx, sp)
		if err != nil {
			t.Fatalf("spend after SCRIPT FLUSH: %v", err)
		}
		if d.Remaining != 100-2*i-1 {
			t.Fatalf("remaining %d after SCRIPT FLUSH, want %d", d.Remaining, 100-2*i-1)
		}
		if d, err = s.Spend(ctx, sp); err != nil || d.Remaining != 100-2*i-2 {
			t.Fatalf("second spend: %+v, %v", d, err)
		}
	}
}

// TestPipeConnectionKilled: a connection Redis closes (CLIENT KILL) fails only the calls
// waiting on it, and the next calls dial again.
func TestPipeConnectionKilled(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	s := openStore(t, Options{URL: srv.URL(), ReadTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	sp := pipeSpend("k", 1_000_000)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	for round := range 5 {
		if _, err := s.Spend(ctx, sp); err != nil {
			t.Fatal(err)
		}
		// Every client but admin's own connection.
		if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for {
			cs := time.Now()
			_, err := s.Spend(ctx, sp)
			if d := time.Since(cs); d > 2*300*time.Millisecond {
				t.Fatalf("round %d: a call took %v after its connection was killed", round, d)
			}
			if err == nil {
				break
			}
			if time.Since(start) > 2*time.Second {
				t.Fatalf("round %d: no recovery 2 s after CLIENT KILL: %v", round, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("round %d: serving again %v after CLIENT KILL", round, time.Since(start).Round(time.Millisecond))
	}
}

// TestPipeAuthenticatesAndSelects: the pipe logs in as the configured ACL user and uses
// the URL's database, like every other connection.
func TestPipeAuthenticatesAndSelects(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false, "--requirepass", "adm1n")
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "adm1n"})
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "leash", "on", ">s3cret", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, Options{URL: "redis://leash:s3cret@" + srv.Addr() + "/3"})
	if _, err := s.Spend(ctx, pipeSpend("k", 10)); err != nil {
		t.Fatalf("spend as an ACL user on db 3: %v", err)
	}
	key := s.keys.counter(pipeSpend("k", 10).Counter)
	if n, err := admin.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("counter found in db 0 (%d, %v); want it in db 3 only", n, err)
	}
	var who []string
	for _, line := range strings.Split(admin.ClientList(ctx).Val(), "\n") {
		if strings.Contains(line, "db=3") {
			who = append(who, fieldOf(line, "user"))
		}
	}
	if len(who) == 0 || slices.ContainsFunc(who, func(u string) bool { return u != "leash" }) {
		t.Fatalf("connections on db 3 are logged in as %v; want all as leash", who)
	}
	db3 := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "adm1n", DB: 3})
	defer db3.Close()
	if n, err := db3.Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("counter not in db 3 (%d, %v)", n, err)
	}
}

func fieldOf(line, name string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}

// TestPipeTLS: with rediss:// the decisions' connection speaks TLS too.
func TestPipeTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, k := testcert.New(t, nil, nil, "redis", true)
	cert, key := testcert.WriteCert(t, dir, "cert.pem", c), testcert.WriteKey(t, dir, "key.pem", k)
	// The TLS port is free when picked; another process may take it before redis-server
	// binds, so a failed start picks another.
	var srv *redistest.Server
	var tlsPort int
	for try := 0; srv == nil; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tlsPort = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		srv, err = redistest.NewServer(redistest.Require(t), false, "--tls-port", strconv.Itoa(tlsPort),
			"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "no")
		if err != nil && try == 4 {
			t.Fatal(err)
		}
	}
	t.Cleanup(srv.Destroy)
	s := openStore(t, Options{URL: "rediss://127.0.0.1:" + strconv.Itoa(tlsPort) + "/0?skip_verify=true"})
	ctx := context.Background()
	for i := range int64(3) {
		d, err := s.Spend(ctx, pipeSpend("k", 10))
		if err != nil {
			t.Fatalf("spend over TLS: %v", err)
		}
		if d.Remaining != 9-i {
			t.Fatalf("remaining %d, want %d", d.Remaining, 9-i)
		}
	}
	if !s.pipes.byAddr["127.0.0.1:"+strconv.Itoa(tlsPort)].open() {
		t.Fatal("the decisions did not go over the pipe")
	}
	// Nothing reached the plain port: every connection is on the TLS one.
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	for _, line := range strings.Split(strings.TrimSpace(admin.ClientList(ctx).Val()), "\n") {
		if strings.Contains(line, "cmd=evalsha") && !strings.Contains(line, "laddr=127.0.0.1:"+strconv.Itoa(tlsPort)) {
			t.Fatalf("a decision went over plain TCP: %s", line)
		}
	}
}

// TestReadInts: the reply reader takes arrays of integers, reports error replies and
// anything else as reply errors (the connection stays usable: the reply was read whole),
// and malformed input as a broken connection.
func TestReadInts(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   []int64
		reply  string // a replyError with this prefix
		broken bool   // an error that is not a replyError
		rest   string // what must be left unread
	}{
		{in: "*3\r\n:1\r\n:-20\r\n:9223372036854775807\r\n+next\r\n", want: []int64{1, -20, 9223372036854775807}, rest: "+next\r\n"},
		{in: "*0\r\n", want: []int64{}},
		{in: "-NOSCRIPT No matching script\r\n:1\r\n", reply: "NOSCRIPT", rest: ":1\r\n"},
		{in: "$3\r\nabc\r\n+next\r\n", reply: "ERR leash", rest: "+next\r\n"},
		{in: "*2\r\n:1\r\n$-1\r\n+next\r\n", reply: "ERR leash", rest: "+next\r\n"},
		{in: "*2\r\n*1\r\n:1\r\n:2\r\n+next\r\n", reply: "ERR leash", rest: "+next\r\n"},
		{in: ":5\r\n+next\r\n", reply: "ERR leash", rest: "+next\r\n"},
		{in: "*1\r\n:99999999999999999999\r\n", broken: true},
		{in: "*x\r\n", broken: true},
		{in: "*2\r\n:1\r\n", broken: true},
		{in: "?\r\n", broken: true},
		{in: "", broken: true},
	} {
		rd := bufio.NewReader(strings.NewReader(tc.in))
		got, err := readInts(rd, nil)
		var re replyError
		isReply := errors.As(err, &re)
		switch {
		case tc.broken:
			if err == nil || isReply {
				t.Errorf("%q: err %v, want a broken connection", tc.in, err)
			}
			continue
		case tc.reply != "":
			if !isReply || !strings.HasPrefix(string(re), tc.reply) {
				t.Errorf("%q: err %v, want reply error %s", tc.in, err, tc.reply)
			}
		default:
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
			}
		}
		rest := make([]byte, 64)
		n, _ := rd.Read(rest)
		if string(rest[:n]) != tc.rest {
			t.Errorf("%q: left %q unread, want %q", tc.in, rest[:n], tc.rest)
		}
	}
}

// TestOwedQueueStaysBounded: under load that never lets the owed replies drain to zero, the
// queue of owed calls keeps its memory proportional to what is owed, not to everything ever
// sent.
func TestOwedQueueStaysBounded(t *testing.T) {
	var q owedQueue
	calls := make([]*pcall, 64)
	for i := range calls {
		calls[i] = &pcall{}
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
