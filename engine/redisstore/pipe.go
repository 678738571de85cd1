package redisstore

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The decision hot path's own connection to a Redis node (docs/redis.md, "Connections").
//
// A pipe is one connection that carries the EVALSHAs of decisions. Concurrent callers
// append their encoded commands to one buffer, and whichever caller finds no write in
// progress writes the whole buffer in one syscall, looping while more arrived meanwhile
// (flat combining): commands that arrive together share a write without a writer
// goroutine to wake. One reader goroutine per connection reads the replies, which Redis
// sends in order, and hands each to its caller. Measured against go-redis's full-duplex
// autopipeliner on this path it saves about 5 µs of CPU per decision (docs/performance.md):
// no command object, no boxed arguments or replies, one goroutine handoff instead of two.
//
// It speaks RESP2 and understands only what the hot path's scripts return: an array of
// integers, or an error. Anything that needs more (a redirect, NOSCRIPT, a replica that
// is read-only, a Sentinel deployment) goes through go-redis instead; see errFallback.
//
// Failures: every call is bounded by its context. A connection whose oldest pending reply
// is overdue by ReadTimeout, or that fails a read or a write, is closed and every call
// waiting on it fails (unavailable: the command may or may not have run, so it is never
// resent). The next call dials again, at most once per pipeRedialDelay while dials fail.

// pipeRedialDelay is how long a pipe whose dial failed refuses calls before dialing again.
const pipeRedialDelay = 100 * time.Millisecond

// maxPending bounds the replies one connection may owe; beyond it calls fail at once.
const maxPending = 1 << 16

var (
	errPipeDown    = errors.New("redisstore: connection to Redis is down")
	errPipeClosed  = errors.New("redisstore: connection closed")
	errPipeBusy    = errors.New("redisstore: too many commands waiting for Redis")
	errPipeTimeout = errors.New("redisstore: Redis did not answer within the read timeout")
	errBadReply    = errors.New("redisstore: unexpected reply from Redis")
)

// replyError is an error reply from Redis (the text after '-').
type replyError string

func (e replyError) Error() string { return string(e) }

// errFallback reports an error reply that means the command did not run here and must go
// through go-redis, which handles it: an unknown script (EVAL), a cluster redirect or a
// slot in migration (follow it, reload the slot map), a node that is read-only, loading
// or without a master.
func errFallback(err error) bool {
	re, ok := err.(replyError)
	if !ok {
		return false
	}
	for _, p := range []string{"NOSCRIPT", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING", "MASTERDOWN"} {
		if len(re) >= len(p) && string(re[:len(p)]) == p {
			return true
		}
	}
	return false
}

// pipeOptions are how a pipe connects: go-redis's options for the node.
type pipeOptions struct {
	addr               string
	username, password string
	db                 int
	tls                *tls.Config
	dialTimeout        time.Duration
	readTimeout        time.Duration // an overdue reply breaks the connection
	writeTimeout       time.Duration
}

func pipeOptionsOf(o *redis.Options) pipeOptions {
	return pipeOptions{addr: o.Addr, username: o.Username, password: o.Password, db: o.DB, tls: o.TLSConfig,
		dialTimeout: o.DialTimeout, readTimeout: o.ReadTimeout, writeTimeout: o.WriteTimeout}
}

// pipe is the hot path's connection to one node; it dials on first use and again after a
// failure.
type pipe struct {
	opt pipeOptions
	wg  *sync.WaitGroup // the Store's: reader goroutines

	mu       sync.Mutex // guards cur, downTill, closed
	cur      *pconn
	downTill time.Time
	closed   bool
	dialMu   sync.Mutex // one dial at a time

	calls sync.Pool // of *pcall, reused across calls
}

// pconn is one established connection of a pipe.
type pconn struct {
	conn net.Conn
	rd   *bufio.Reader
	p    *pipe

	mu      sync.Mutex // guards everything below
	buf     []byte     // commands not written yet
	owed    owedQueue  // calls whose replies are owed, oldest first
	writing bool       // a caller is writing buf
	err     error      // set once the connection failed; nothing more is sent

	spare []byte // the buffer the writing caller last wrote (only it touches spare)
}

// pcall is one command and, once answered, its reply.
type pcall struct {
	cmd   []byte
	state atomic.Int32 // callPending, callDone, callAbandoned
	done  chan struct{}
	sent  time.Time // when it was queued, for the overdue check
	reply []int64
	err   error
	pool  *sync.Pool // its pipe's, where it goes back when done
}

const (
	callPending int32 = iota
	callDone
	callAbandoned
)

// newCall returns a pooled call whose command is an array of n bulk strings to come.
func (p *pipe) newCall(n int) *pcall {
	c, _ := p.calls.Get().(*pcall)
	if c == nil {
		c = &pcall{done: make(chan struct{}, 1), pool: &p.calls}
	}
	c.state.Store(callPending)
	c.reply, c.err = c.reply[:0], nil
	c.cmd = append(c.cmd[:0], '*')
	c.cmd = strconv.AppendInt(c.cmd, int64(n), 10)
	c.cmd = append(c.cmd, '\r', '\n')
	return c
}

// str appends a bulk string argument.
func (c *pcall) str(s string) { c.cmd = appendBulk(c.cmd, s) }

// int appends an integer argument, as Redis takes it: a bulk string of its digits.
func (c *pcall) int(v int64) {
	var d [20]byte
	c.cmd = appendBulk(c.cmd, strconv.AppendInt(d[:0], v, 10))
}

func appendBulk[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// finish records the reply (or err) and wakes the caller, or recycles an abandoned call.
func (c *pcall) finish(err error) {
	c.err = err
	if c.state.CompareAndSwap(callPending, callDone) {
		c.done <- struct{}{}
		return
	}
	release(c) // its caller gave up
}

func release(c *pcall) {
	if cap(c.cmd) > 4<<10 || cap(c.reply) > 256 {
		return
	}
	c.pool.Put(c)
}

func newPipe(opt pipeOptions, wg *sync.WaitGroup) *pipe { return &pipe{opt: opt, wg: wg} }

// do sends c and appends its reply to dst. c is recycled.
func (p *pipe) do(ctx context.Context, c *pcall, dst []int64) ([]int64, error) {
	pc, err := p.conn(ctx)
	if err != nil {
		release(c)
		return nil, err
	}
	if err := pc.send(c); err != nil {
		release(c)
		return nil, err
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		if c.state.CompareAndSwap(callPending, callAbandoned) {
			return nil, ctx.Err() // the reader recycles c when its reply comes
		}
		<-c.done // answered at this very moment
	}
	err = c.err
	if err == nil {
		dst = append(dst, c.reply...)
	}
	release(c)
	return dst, err
}

// conn returns the live connection, dialing one if there is none.
func (p *pipe) conn(ctx context.Context) (*pconn, error) {
	p.mu.Lock()
	pc, closed, down := p.cur, p.closed, time.Now().Before(p.downTill)
	p.mu.Unlock()
	switch {
	case closed:
		return nil, errPipeClosed
	case pc != nil:
		return pc, nil
	case down:
		return nil, errPipeDown
	}
	p.dialMu.Lock()
	defer p.dialMu.Unlock()
	p.mu.Lock()
	pc, closed = p.cur, p.closed
	p.mu.Unlock()
	if closed {
		return nil, errPipeClosed
	}
	if pc != nil {
		return pc, nil // another caller dialed meanwhile
	}
	pc, err := p.dial(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.downTill = time.Now().Add(pipeRedialDelay)
		return nil, err
	}
	if p.closed {
		_ = pc.conn.Close()
		return nil, errPipeClosed
	}
	p.cur = pc
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		pc.readLoop()
	}()
	return pc, nil
}

// dial connects, with TLS when configured, authenticates and selects the database.
func (p *pipe) dial(ctx context.Context) (*pconn, error) {
	o := &p.opt
	dctx, cancel := context.WithTimeout(ctx, o.dialTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(dctx, "tcp", o.addr)
	if err != nil {
		return nil, err
	}
	if o.tls != nil {
		cfg := o.tls.Clone()
		if cfg.ServerName == "" {
			if host, _, err := net.SplitHostPort(o.addr); err == nil {
				cfg.ServerName = host
			}
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(dctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		conn = tc
	}
	pc := &pconn{conn: conn, rd: bufio.NewReaderSize(conn, 16<<10), p: p}
	if err := pc.setup(dctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return pc, nil
}

// setup sends AUTH and SELECT, when needed, and reads their replies.
func (pc *pconn) setup(ctx context.Context) error {
	o := &pc.p.opt
	var b []byte
	n := 0
	if o.password != "" {
		var c *pcall
		if o.username != "" {
			c = pc.p.newCall(3)
			c.str("AUTH")
			c.str(o.username)
		} else {
			c = pc.p.newCall(2)
			c.str("AUTH")
		}
		c.str(o.password)
		b, n = append(b, c.cmd...), n+1
		release(c)
	}
	if o.db != 0 {
		c := pc.p.newCall(2)
		c.str("SELECT")
		c.int(int64(o.db))
		b, n = append(b, c.cmd...), n+1
		release(c)
	}
	if n == 0 {
		return nil
	}
	if d, ok := ctx.Deadline(); ok {
		_ = pc.conn.SetDeadline(d)
		defer pc.conn.SetDeadline(time.Time{})
	}
	if _, err := pc.conn.Write(b); err != nil {
		return err
	}
	for range n {
		line, err := pc.rd.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) > 0 && line[0] == '-' {
			return fmt.Errorf("redisstore: %s", trimCRLF(line[1:]))
		}
	}
	return nil
}

// send queues c's command and, unless another caller is writing, writes.
func (pc *pconn) send(c *pcall) error {
	pc.mu.Lock()
	if pc.err != nil {
		pc.mu.Unlock()
		return errPipeDown
	}
	if pc.owed.len() >= maxPending {
		pc.mu.Unlock()
		return errPipeBusy
	}
	c.sent = time.Now()
	pc.buf = append(pc.buf, c.cmd...)
	pc.owed.push(c)
	lead := !pc.writing
	pc.writing = true
	pc.mu.Unlock()
	if lead {
		// Let the callers that are about to queue do so first, so they share this write:
		// under load batches grow several-fold (and Redis reads them in one go); with
		// nothing else runnable this returns at once.
		runtime.Gosched()
		pc.flush()
	}
	return nil
}

// flush writes what is queued, again and again while callers keep queueing.
func (pc *pconn) flush() {
	for {
		pc.mu.Lock()
		if len(pc.buf) == 0 || pc.err != nil {
			pc.writing = false
			pc.mu.Unlock()
			return
		}
		b := pc.buf
		pc.buf = pc.spare[:0]
		pc.mu.Unlock()
		_ = pc.conn.SetWriteDeadline(time.Now().Add(pc.p.opt.writeTimeout))
		if _, err := pc.conn.Write(b); err != nil {
			pc.fail(err)
			pc.mu.Lock()
			pc.writing = false
			pc.mu.Unlock()
			return
		}
		pc.spare = b
	}
}

// fail closes the connection and fails every call still owed a reply.
func (pc *pconn) fail(err error) {
	pc.mu.Lock()
	if pc.err != nil {
		pc.mu.Unlock()
		return
	}
	pc.err = err
	owed := pc.owed.takeAll()
	pc.buf = nil
	pc.mu.Unlock()
	_ = pc.conn.Close()
	p := pc.p
	p.mu.Lock()
	if p.cur == pc {
		p.cur = nil
	}
	p.mu.Unlock()
	for _, c := range owed {
		c.finish(errPipeDown)
	}
}

// readLoop reads replies until the connection fails or is closed.
func (pc *pconn) readLoop() {
	for {
		if pc.rd.Buffered() == 0 {
			// Block for more, but not past the point where the oldest owed reply is overdue.
			pc.mu.Lock()
			var oldest time.Time
			if c := pc.owed.oldest(); c != nil {
				oldest = c.sent
			}
			pc.mu.Unlock()
			dl := time.Now().Add(pc.p.opt.readTimeout)
			if !oldest.IsZero() {
				dl = oldest.Add(pc.p.opt.readTimeout)
			}
			_ = pc.conn.SetReadDeadline(dl)
			if _, err := pc.rd.Peek(1); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					pc.mu.Lock()
					c := pc.owed.oldest()
					overdue := c != nil && time.Since(c.sent) >= pc.p.opt.readTimeout
					pc.mu.Unlock()
					if !overdue {
						continue // idle, or the oldest call is younger than it was
					}
					err = errPipeTimeout
				}
				pc.fail(err)
				return
			}
		}
		c := pc.next()
		if c == nil {
			pc.fail(errBadReply) // a reply nobody asked for
			return
		}
		var rerr error
		c.reply, rerr = readInts(pc.rd, c.reply[:0])
		if _, isReply := rerr.(replyError); rerr != nil && !isReply {
			c.finish(errPipeDown)
			pc.fail(rerr)
			return
		}
		c.finish(rerr)
	}
}

// next takes the oldest owed call.
func (pc *pconn) next() *pcall {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.owed.pop()
}

// owedQueue is a FIFO of calls. Popped slots are reclaimed as it goes, so its memory
// follows what is owed even when it never drains.
type owedQueue struct {
	calls []*pcall
	head  int
}

func (q *owedQueue) len() int      { return len(q.calls) - q.head }
func (q *owedQueue) push(c *pcall) { q.calls = append(q.calls, c) }

// oldest returns the next call to pop, or nil.
func (q *owedQueue) oldest() *pcall {
	if q.head >= len(q.calls) {
		return nil
	}
	return q.calls[q.head]
}

// pop removes and returns the oldest call, or nil.
func (q *owedQueue) pop() *pcall {
	c := q.oldest()
	if c == nil {
		return nil
	}
	q.calls[q.head] = nil
	q.head++
	switch {
	case q.head == len(q.calls):
		q.calls, q.head = q.calls[:0], 0
	case q.head >= 1024 && 2*q.head >= len(q.calls):
		// More popped than owed: move the owed to the front (amortised O(1) per call).
		n := copy(q.calls, q.calls[q.head:])
		clear(q.calls[n:])
		q.calls, q.head = q.calls[:n], 0
	}
	return c
}

// takeAll empties the queue and returns what was in it.
func (q *owedQueue) takeAll() []*pcall {
	all := q.calls[q.head:]
	q.calls, q.head = nil, 0
	return all
}

// close closes the pipe for good.
func (p *pipe) close() {
	p.mu.Lock()
	p.closed = true
	pc := p.cur
	p.mu.Unlock()
	if pc != nil {
		pc.fail(errPipeClosed)
	}
}

// open reports whether the pipe has a live connection.
func (p *pipe) open() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur != nil
}

// readInts reads one reply that should be an array of integers into dst. An error reply
// is a replyError (the connection is fine); anything else that is well formed is
// errBadReply after it was read whole; malformed input is another error (the connection is
// no longer usable).
func readInts(rd *bufio.Reader, dst []int64) ([]int64, error) {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return dst, err
	}
	if len(line) < 3 {
		return dst, errBadReply
	}
	switch line[0] {
	case '-':
		return dst, replyError(trimCRLF(line[1:]))
	case '*':
		n, ok := parseInt(line[1:])
		if !ok {
			return dst, errBadReply
		}
		bad := false
		for range n {
			l, err := rd.ReadSlice('\n')
			if err != nil {
				return dst, err
			}
			if len(l) > 0 && l[0] == ':' {
				v, ok := parseInt(l[1:])
				if !ok {
					return dst, errBadReply
				}
				dst = append(dst, v)
				continue
			}
			bad = true
			if err := skipReply(rd, l); err != nil {
				return dst, err
			}
		}
		if bad {
			return dst, replyError("ERR leash: script reply is not an array of integers")
		}
		return dst, nil
	default:
		if err := skipReply(rd, line); err != nil {
			return dst, err
		}
		return dst, replyError("ERR leash: script reply is not an array of integers")
	}
}

// skipReply reads past the rest of a reply whose first line is line.
func skipReply(rd *bufio.Reader, line []byte) error {
	if len(line) < 3 {
		return errBadReply
	}
	switch line[0] {
	case '+', '-', ':':
		return nil
	case '$':
		n, ok := parseInt(line[1:])
		if !ok {
			return errBadReply
		}
		if n < 0 {
			return nil
		}
		_, err := rd.Discard(int(n) + 2)
		return err
	case '*':
		n, ok := parseInt(line[1:])
		if !ok {
			return errBadReply
		}
		for range n {
			l, err := rd.ReadSlice('\n')
			if err != nil {
				return err
			}
			if err := skipReply(rd, l); err != nil {
				return err
			}
		}
		return nil
	}
	return errBadReply
}

// parseInt parses a RESP integer line ("-12\r\n"), without allocating.
func parseInt(b []byte) (int64, bool) {
	if len(b) < 3 || b[len(b)-2] != '\r' {
		return 0, false
	}
	b = b[:len(b)-2]
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v int64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		v = v*10 + int64(ch-'0')
	}
	if v < 0 { // 19 digits past int64
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

func trimCRLF(b []byte) string {
	if n := len(b); n >= 2 && b[n-2] == '\r' {
		return string(b[:n-2])
	}
	return string(b)
}
