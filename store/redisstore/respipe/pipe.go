package respipe

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Pipe is the connection to one node; it dials on first use and again after a failure.
type Pipe struct {
	addr  string
	opt   *Options        // its Pool's
	wg    *sync.WaitGroup // its Pool's: reader goroutines
	stats *counts         // its Pool's

	// answered is when the last call Redis answered was sent (ns since epoch): the node
	// answered this process then (AnsweredAt).
	answered atomic.Int64

	mu       sync.Mutex // guards cur, retired, downTill, closed
	cur      *pconn
	live     atomic.Bool // cur != nil, for Open without the lock
	retired  []*pconn    // retired by Redial, still owed replies
	downTill time.Time
	closed   bool
	dialMu   sync.Mutex // one dial at a time

	calls sync.Pool // of *Call, reused across calls
}

// pconn is one established connection of a pipe.
type pconn struct {
	conn   net.Conn
	reader *bufio.Reader
	p      *Pipe

	retired atomic.Bool // set under mu: takes no more calls, closes once it owes nothing

	mu      sync.Mutex  // guards everything below
	queued  []*Call     // calls not written yet, in arrival order
	owed    owedQueue   // calls (a merged command's first) whose replies are owed, oldest first
	writing bool        // a caller is writing what is queued
	held    atomic.Bool // what is queued is held (Options.Hold): a reply or holdTimer writes it; set under mu
	err     error       // set once the connection failed; nothing more is sent

	holdTimer *time.Timer // writes what is held once Options.Hold has passed; made on first hold

	// The writing caller's scratch, touched by it alone: the buffer it last wrote, the
	// queue it last took, and the commands it formed.
	spare       []byte
	spareQueued []*Call
	cmds        []*Call
}

// errRetired is send's answer on a retired connection: nothing was written.
var errRetired = errors.New("respipe: connection retired")

// Call is one command and, once answered, its reply. Make one with NewCall, NewEvalSha or
// NewMerged, add its arguments, and give it to Do, which recycles it.
type Call struct {
	cmd   []byte       // the whole command; for a call of a Merge: key, head arguments, own arguments
	state atomic.Int32 // callPending, callDone, callAbandoned
	done  chan struct{}
	sent  time.Time // when it was queued, for the overdue check
	reply []int64
	err   error
	pool  *sync.Pool // its pipe's, where it goes back when done

	// asking sends ASKING before the command (a Cluster's ASK redirect); such a call is
	// never merged. Set by its caller between sends. sentOn is the connection it was last
	// written to.
	asking bool
	sentOn *pconn

	// A call of a Merge: its group, how many arguments it has, where its key and its head
	// arguments end in cmd, and, once it is the first of a merged command, the others.
	merge           *Merge
	group           string
	nargs           int
	keyEnd, headEnd int
	others          []*Call
}

// Merge is a script whose calls may share one EVALSHA: it takes any number of keys, then
// Head arguments that apply to all of them, then Width arguments per key in key order,
// and replies Reply integers per key in key order. Calls of one Merge that are waiting to
// be written together, name the same group (on Redis Cluster: keys of one slot) and have
// equal head arguments are sent as one command of at most Max keys. A Merge must not be
// changed once used.
//
// With ArgKeys the command declares one key, the first call's, and passes every call's
// key among the arguments, first of its own: EVALSHA Sha 1 key_1 head... key_1 args_1...
// key_n args_n... A script that reads its keys from its arguments may then merge calls of
// any slots of one Redis Cluster node (group: the node), while the declared key routes the
// command (a redirect comes before the script runs).
type Merge struct {
	Sha                     string
	Head, Width, Reply, Max int
	ArgKeys                 bool
}

const (
	callPending int32 = iota
	callDone
	callAbandoned
)

// NewCall returns a call whose command is an array of n bulk strings, to be added with
// Str and Int.
func (p *Pipe) NewCall(n int) *Call {
	c := p.get()
	c.cmd = append(c.cmd[:0], '*')
	c.cmd = strconv.AppendInt(c.cmd, int64(n), 10)
	c.cmd = append(c.cmd, '\r', '\n')
	return c
}

// get returns a pending call, from the pool when it has one, with no reply and no Merge.
func (p *Pipe) get() *Call {
	c, _ := p.calls.Get().(*Call)
	if c == nil {
		c = &Call{done: make(chan struct{}, 1), pool: &p.calls}
	}
	c.state.Store(callPending)
	c.reply, c.err, c.merge, c.asking = c.reply[:0], nil, nil, false
	return c
}

// NewEvalSha returns the call EVALSHA sha len(keys) keys..., to which nargs arguments are
// still to be added.
func (p *Pipe) NewEvalSha(sha string, keys []string, nargs int) *Call {
	c := p.NewCall(3 + len(keys) + nargs)
	c.Str("EVALSHA")
	c.Str(sha)
	c.Int(int64(len(keys)))
	for _, k := range keys {
		c.Str(k)
	}
	return c
}

// NewMerged returns a call of m on key, in group, to which m.Head and then m.Width
// arguments are still to be added. Sent alone it is EVALSHA m.Sha 1 key arguments...
func (p *Pipe) NewMerged(m *Merge, group, key string) *Call {
	c := p.get()
	c.merge, c.group, c.nargs = m, group, 0
	c.cmd = appendBulk(c.cmd[:0], key)
	c.keyEnd, c.headEnd = len(c.cmd), len(c.cmd)
	return c
}

// Str appends a string argument.
func (c *Call) Str(s string) {
	c.cmd = appendBulk(c.cmd, s)
	c.counted()
}

// Int appends an integer argument, as Redis takes it: a bulk string of its digits.
func (c *Call) Int(v int64) {
	var digits [20]byte
	c.cmd = appendBulk(c.cmd, strconv.AppendInt(digits[:0], v, 10))
	c.counted()
}

// counted notes one more argument of a call of a Merge, and where its head ends.
func (c *Call) counted() {
	if c.merge == nil {
		return
	}
	c.nargs++
	if c.nargs == c.merge.Head {
		c.headEnd = len(c.cmd)
	}
}

// Asking makes c's sends from now on go after ASKING, as a Cluster's ASK redirect asks: the
// node then runs it on a slot it is importing (elsewhere ASKING changes nothing). Such a
// call is sent alone, not merged.
func (c *Call) Asking() { c.asking = true }

// joins reports whether c may be sent in the merged command that h begins.
func (h *Call) joins(c *Call) bool {
	return !h.asking && !c.asking && h.merge == c.merge && h.group == c.group && len(h.others)+1 < h.merge.Max &&
		bytes.Equal(h.cmd[h.keyEnd:h.headEnd], c.cmd[c.keyEnd:c.headEnd])
}

// appendCommand appends the command h begins: h's own, or the EVALSHA of h and its others.
func (h *Call) appendCommand(b []byte) []byte {
	if h.asking {
		b = append(b, askingCommand...)
	}
	if h.merge == nil {
		return append(b, h.cmd...)
	}
	m, n := h.merge, 1+len(h.others)
	if m.ArgKeys {
		return h.appendArgKeys(b, n)
	}
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(3+n+m.Head+n*m.Width), 10)
	b = append(b, '\r', '\n')
	b = appendBulk(b, "EVALSHA")
	b = appendBulk(b, m.Sha)
	var digits [20]byte
	b = appendBulk(b, strconv.AppendInt(digits[:0], int64(n), 10))
	b = append(b, h.cmd[:h.keyEnd]...)
	for _, c := range h.others {
		b = append(b, c.cmd[:c.keyEnd]...)
	}
	b = append(b, h.cmd[h.keyEnd:]...) // the head, then h's own arguments
	for _, c := range h.others {
		b = append(b, c.cmd[c.headEnd:]...)
	}
	return b
}

// appendArgKeys appends the command of h and its others as an ArgKeys Merge has it.
func (h *Call) appendArgKeys(b []byte, n int) []byte {
	m := h.merge
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(4+m.Head+n*(1+m.Width)), 10)
	b = append(b, '\r', '\n')
	b = appendBulk(b, "EVALSHA")
	b = appendBulk(b, m.Sha)
	b = appendBulk(b, "1")
	b = append(b, h.cmd[:h.keyEnd]...)
	b = append(b, h.cmd[h.keyEnd:h.headEnd]...) // the head
	b = append(b, h.cmd[:h.keyEnd]...)
	b = append(b, h.cmd[h.headEnd:]...)
	for _, c := range h.others {
		b = append(b, c.cmd[:c.keyEnd]...)
		b = append(b, c.cmd[c.headEnd:]...)
	}
	return b
}

// replyFits reports whether the reply read into h.reply has Reply integers for every call
// of a merged command (any reply fits a command of one call).
func (h *Call) replyFits() bool {
	return len(h.others) == 0 || len(h.reply) == h.merge.Reply*(1+len(h.others))
}

// answer hands the reply read into h.reply (or err) to the calls of the command h begins;
// a reply that does not fit (replyFits) gives every call ErrDown.
func (h *Call) answer(err error) {
	if err == nil && !h.replyFits() {
		err = ErrDown
	}
	if len(h.others) > 0 {
		if err == nil {
			r := h.merge.Reply
			for i, c := range h.others {
				c.reply = append(c.reply[:0], h.reply[r*(i+1):r*(i+2)]...)
			}
			h.reply = h.reply[:r]
		}
		for i, c := range h.others {
			c.finish(err)
			h.others[i] = nil
		}
		h.others = h.others[:0]
	}
	h.finish(err)
}

// askingCommand is ASKING, encoded.
const askingCommand = "*1\r\n$6\r\nASKING\r\n"

func appendBulk[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// finish records the reply (or err) and wakes the caller, or recycles an abandoned call.
func (c *Call) finish(err error) {
	c.err = err
	if c.state.CompareAndSwap(callPending, callDone) {
		c.done <- struct{}{}
		return
	}
	c.release() // its caller gave up
}

func (c *Call) release() {
	c.sentOn = nil
	if cap(c.cmd) > 4<<10 || cap(c.reply) > 256 || cap(c.others) > 256 {
		return
	}
	c.pool.Put(c)
}

// Do sends c and appends its integer array reply to dst. The error is a ReplyError for an
// error reply (see NotRunHere), ctx's error when ctx ended first (the command may still
// run), or one of ErrDown, ErrClosed, ErrBusy. c is recycled, except after a reply that
// NotRunHere reports: then c, unchanged, is the caller's to give to Do again (on this pipe
// or another, e.g. once the script is loaded or the redirect's node found) or to drop.
func (p *Pipe) Do(ctx context.Context, c *Call, dst []int64) ([]int64, error) {
	c.state.Store(callPending)
	c.reply, c.err = c.reply[:0], nil
	if c.merge != nil && c.nargs != c.merge.Head+c.merge.Width {
		n := c.nargs
		c.release()
		return nil, fmt.Errorf("respipe: a call of a Merge has %d arguments, want %d", n, c.merge.Head+c.merge.Width)
	}
	for {
		pc, err := p.conn(ctx)
		if err != nil {
			c.release()
			return nil, err
		}
		err = pc.send(c)
		if err == errRetired {
			continue // nothing was written; p has a newer connection or none
		}
		if err != nil {
			c.release()
			return nil, err
		}
		break
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		if c.state.CompareAndSwap(callPending, callAbandoned) {
			return nil, ctx.Err() // the reader recycles c when its reply comes
		}
		<-c.done // answered at this very moment
	}
	err := c.err
	if err == nil {
		dst = append(dst, c.reply...)
	}
	if !NotRunHere(err) {
		c.release()
	}
	return dst, err
}

// Redial makes the next calls use a new connection, dialed afresh; the current one takes
// no more calls and closes once it has received the replies it owes. For a connection to
// a node that is no longer the one wanted, e.g. a Sentinel master since demoted.
func (p *Pipe) Redial() {
	p.mu.Lock()
	pc := p.cur
	p.cur = nil
	p.live.Store(false)
	if pc != nil {
		p.retired = append(p.retired, pc)
	}
	p.mu.Unlock()
	if pc != nil {
		pc.retire()
	}
}

// RedialAfter is Redial, unless the pipe's connection is no longer the one c was last
// written to (another caller redialed already): for the calls of one merged command, which
// all get the same answer, one redial.
func (p *Pipe) RedialAfter(c *Call) {
	p.mu.Lock()
	current := p.cur != nil && p.cur == c.sentOn
	p.mu.Unlock()
	if current {
		p.Redial()
	}
}

// epoch is the base of Pipe.answered.
var epoch = time.Now()

// noteAnswered records that a call sent at sent was answered (read whole, a reply or an
// error reply).
func (p *Pipe) noteAnswered(sent time.Time) {
	ns := int64(sent.Sub(epoch))
	for {
		old := p.answered.Load()
		if ns <= old || p.answered.CompareAndSwap(old, ns) {
			return
		}
	}
}

// AnsweredAt returns when the last call the node answered on this pipe was sent (the zero
// time before any): the node was alive then, for this process.
func (p *Pipe) AnsweredAt() time.Time {
	ns := p.answered.Load()
	if ns == 0 {
		return time.Time{}
	}
	return epoch.Add(time.Duration(ns))
}

// Addr returns the address of the pipe's node.
func (p *Pipe) Addr() string { return p.addr }

// Open reports whether the pipe has a live connection. It takes no lock: the redis store
// asks it for every decision made from a reservation.
func (p *Pipe) Open() bool { return p.live.Load() }

// close closes the pipe for good, and its connections.
func (p *Pipe) close() {
	p.mu.Lock()
	p.closed = true
	all := append(p.retired[:len(p.retired):len(p.retired)], p.cur)
	p.mu.Unlock()
	for _, pc := range all {
		if pc != nil {
			pc.fail(ErrClosed)
		}
	}
}

// conn returns the live connection, dialing one if there is none.
func (p *Pipe) conn(ctx context.Context) (*pconn, error) {
	p.mu.Lock()
	pc, closed, down := p.cur, p.closed, time.Now().Before(p.downTill)
	p.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case pc != nil:
		return pc, nil
	case down:
		return nil, ErrDown
	}
	p.dialMu.Lock()
	defer p.dialMu.Unlock()
	p.mu.Lock()
	pc, closed = p.cur, p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if pc != nil {
		return pc, nil // another caller dialed meanwhile
	}
	pc, err := p.dial(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.downTill = time.Now().Add(redialDelay)
		return nil, err
	}
	if p.closed {
		_ = pc.conn.Close()
		return nil, ErrClosed
	}
	p.cur = pc
	p.live.Store(true)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		pc.readLoop()
	}()
	return pc, nil
}

// dial connects (with Options.Dial, or TCP and TLS when configured), authenticates and
// selects the database.
func (p *Pipe) dial(ctx context.Context) (*pconn, error) {
	o := p.opt
	dialCtx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	if o.Dial != nil {
		conn, err = o.Dial(dialCtx, p.addr)
	} else {
		conn, err = dialTCP(dialCtx, p.addr, o.TLS)
	}
	if err != nil {
		return nil, err
	}
	pc := &pconn{conn: conn, reader: bufio.NewReaderSize(conn, 16<<10), p: p}
	if err := pc.setup(dialCtx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return pc, nil
}

// dialTCP connects to addr, with TLS when cfg is set.
func dialTCP(ctx context.Context, addr string, cfg *tls.Config) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil || cfg == nil {
		return conn, err
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return tc, nil
}

// setup sends AUTH and SELECT, when needed, and reads their replies.
func (pc *pconn) setup(ctx context.Context) error {
	o := pc.p.opt
	var b []byte
	n := 0
	if o.Password != "" {
		var c *Call
		if o.Username != "" {
			c = pc.p.NewCall(3)
			c.Str("AUTH")
			c.Str(o.Username)
		} else {
			c = pc.p.NewCall(2)
			c.Str("AUTH")
		}
		c.Str(o.Password)
		b, n = append(b, c.cmd...), n+1
		c.release()
	}
	if o.DB != 0 {
		c := pc.p.NewCall(2)
		c.Str("SELECT")
		c.Int(int64(o.DB))
		b, n = append(b, c.cmd...), n+1
		c.release()
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
		line, err := pc.reader.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) > 0 && line[0] == '-' {
			return fmt.Errorf("respipe: %s", trimCRLF(line[1:]))
		}
	}
	return nil
}

// send queues c's command and, unless another caller is writing, writes.
func (pc *pconn) send(c *Call) error {
	pc.mu.Lock()
	if pc.retired.Load() {
		pc.mu.Unlock()
		return errRetired
	}
	if pc.err != nil {
		pc.mu.Unlock()
		return ErrDown
	}
	if pc.owed.len()+len(pc.queued) >= maxOwed {
		pc.mu.Unlock()
		return ErrBusy
	}
	c.sent, c.sentOn = time.Now(), pc
	pc.queued = append(pc.queued, c)
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

// holdOwed is how many commands Redis must still owe replies to for a connection to
// hold its queued calls (Options.Hold), and holdFull how many queued calls end a hold.
const (
	holdOwed = 2
	holdFull = 64
)

// flush writes what is queued, again and again while callers keep queueing. Calls of a
// Merge that may share a command are merged as they are taken.
func (pc *pconn) flush() {
	for {
		pc.mu.Lock()
		if len(pc.queued) == 0 || pc.err != nil {
			pc.writing = false
			pc.mu.Unlock()
			return
		}
		if pc.holds() {
			pc.writing = false
			pc.held.Store(true)
			pc.mu.Unlock()
			return
		}
		pc.held.Store(false)
		q := pc.queued
		pc.queued = pc.spareQueued[:0]
		cmds := pc.form(pc.cmds[:0], q)
		// Encoded under mu: once the reader has failed the connection, it may recycle
		// the calls, but not before this returns.
		b := pc.spare[:0]
		for _, h := range cmds {
			pc.owed.push(h)
			b = h.appendCommand(b)
		}
		pc.mu.Unlock()
		pc.p.stats.add(len(q), len(cmds))
		clear(q)
		clear(cmds)
		pc.spareQueued, pc.cmds = q, cmds
		_ = pc.conn.SetWriteDeadline(time.Now().Add(pc.p.opt.WriteTimeout))
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

// holds reports, under mu, whether what is queued is to be held (Options.Hold), and arms
// holdTimer for a hold that begins.
func (pc *pconn) holds() bool {
	hold := pc.p.opt.Hold
	if hold <= 0 || pc.owed.len() < holdOwed || len(pc.queued) >= holdFull || time.Since(pc.queued[0].sent) >= hold {
		return false
	}
	if !pc.held.Load() {
		if pc.holdTimer == nil {
			pc.holdTimer = time.AfterFunc(hold, pc.unhold)
		} else {
			pc.holdTimer.Reset(hold)
		}
	}
	return true
}

// unhold writes what is held, if anything and nobody is writing: called by holdTimer, and
// by the reader after each reply (written once fewer than holdOwed commands are owed).
func (pc *pconn) unhold() {
	if !pc.held.Load() {
		return // nothing held: no lock taken
	}
	pc.mu.Lock()
	if !pc.held.Load() || pc.writing || pc.err != nil {
		pc.mu.Unlock()
		return
	}
	pc.writing = true
	pc.mu.Unlock()
	pc.flush()
}

// mergeLookBack is how many of the commands formed last form looks through for one that a
// call of a Merge can join.
const mergeLookBack = 8

// form appends to cmds the commands q makes, in order: each call alone, or a call of a
// Merge joined to an earlier command of the same Merge, group and head.
func (pc *pconn) form(cmds, q []*Call) []*Call {
	for _, c := range q {
		if c.merge != nil && !c.asking {
			joined := false
			for i := len(cmds) - 1; i >= 0 && i >= len(cmds)-mergeLookBack; i-- {
				if h := cmds[i]; h.merge != nil && h.joins(c) {
					h.others = append(h.others, c)
					joined = true
					break
				}
			}
			if joined {
				continue
			}
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// retire makes pc take no more calls, and closes it now if it owes nothing (else the
// reader does once it has read what is owed).
func (pc *pconn) retire() {
	pc.mu.Lock()
	pc.retired.Store(true)
	idle := pc.owed.len() == 0 && len(pc.queued) == 0
	pc.mu.Unlock()
	if idle {
		pc.fail(ErrClosed)
	}
}

// drained reports a retired connection that owes nothing more and has nothing to write.
func (pc *pconn) drained() bool {
	if !pc.retired.Load() {
		return false
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.owed.len() == 0 && len(pc.queued) == 0
}

// fail closes the connection and fails every call still owed a reply.
func (pc *pconn) fail(err error) {
	pc.mu.Lock()
	if pc.err != nil {
		pc.mu.Unlock()
		return
	}
	pc.err = err
	if pc.holdTimer != nil {
		pc.holdTimer.Stop()
	}
	owed := pc.owed.takeAll()
	queued := pc.queued
	pc.queued = nil
	pc.mu.Unlock()
	_ = pc.conn.Close()
	p := pc.p
	p.mu.Lock()
	if p.cur == pc {
		p.cur = nil
		p.live.Store(false)
	}
	if i := slices.Index(p.retired, pc); i >= 0 {
		p.retired = slices.Delete(p.retired, i, i+1)
	}
	p.mu.Unlock()
	for _, h := range owed {
		h.answer(ErrDown)
	}
	for _, c := range queued {
		c.finish(ErrDown)
	}
}

// readLoop reads replies until the connection fails, is closed, or is retired and drained.
func (pc *pconn) readLoop() {
	readTimeout := pc.p.opt.ReadTimeout
	for {
		if pc.reader.Buffered() == 0 {
			// Block for more, but not past the point where the oldest owed reply is overdue.
			pc.mu.Lock()
			var oldest time.Time
			if c := pc.owed.oldest(); c != nil {
				oldest = c.sent
			}
			pc.mu.Unlock()
			deadline := time.Now().Add(readTimeout)
			if !oldest.IsZero() {
				deadline = oldest.Add(readTimeout)
			}
			_ = pc.conn.SetReadDeadline(deadline)
			if _, err := pc.reader.Peek(1); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					pc.mu.Lock()
					c := pc.owed.oldest()
					overdue := c != nil && time.Since(c.sent) >= readTimeout
					pc.mu.Unlock()
					if !overdue {
						continue // idle, or the oldest call is younger than it was
					}
					err = ErrTimeout
				}
				pc.fail(err)
				return
			}
		}
		c := pc.next()
		if c == nil {
			pc.fail(ErrBadReply) // a reply nobody asked for
			return
		}
		if c.asking {
			// ASKING's own reply (+OK) comes first.
			line, err := pc.reader.ReadSlice('\n')
			if err == nil {
				err = skipReply(pc.reader, line)
			}
			if err != nil {
				pc.fail(err) // before c hears of it: see below
				c.answer(ErrDown)
				return
			}
		}
		var replyErr error
		c.reply, replyErr = readInts(pc.reader, c.reply[:0])
		if _, isReply := replyErr.(ReplyError); replyErr != nil && !isReply {
			// The connection is let go before c's callers hear ErrDown, so a call they
			// make next is written to a new one, not to this one, to fail again.
			pc.fail(replyErr)
			c.answer(ErrDown)
			return
		}
		if replyErr == nil && !c.replyFits() {
			// A merged reply of the wrong length: drop the connection before its calls
			// hear ErrDown, so a call made once they have is written to a new one.
			pc.fail(ErrBadReply)
			c.answer(ErrDown)
			return
		}
		pc.p.noteAnswered(c.sent)
		c.answer(replyErr)
		pc.unhold()
		if pc.drained() {
			pc.fail(ErrClosed)
			return
		}
	}
}

// next takes the oldest owed call.
func (pc *pconn) next() *Call {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.owed.pop()
}

// owedQueue is a FIFO of calls. Popped slots are reclaimed as it goes, so its memory
// follows what is owed even when it never drains.
type owedQueue struct {
	calls []*Call
	head  int
}

func (q *owedQueue) len() int     { return len(q.calls) - q.head }
func (q *owedQueue) push(c *Call) { q.calls = append(q.calls, c) }

// oldest returns the next call to pop, or nil.
func (q *owedQueue) oldest() *Call {
	if q.head >= len(q.calls) {
		return nil
	}
	return q.calls[q.head]
}

// pop removes and returns the oldest call, or nil.
func (q *owedQueue) pop() *Call {
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
func (q *owedQueue) takeAll() []*Call {
	all := q.calls[q.head:]
	q.calls, q.head = nil, 0
	return all
}
