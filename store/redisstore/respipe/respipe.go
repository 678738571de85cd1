// Package respipe is the Redis store's connection for decisions: one RESP2 connection per
// Redis node, shared by every concurrent caller, for commands whose reply is an array of
// integers (the decision scripts' EVALSHA).
//
// Concurrent callers queue their encoded commands, and whichever caller finds no write in
// progress writes everything queued in one syscall, looping while more arrived meanwhile
// (flat combining): commands that arrive together share a write without a writer goroutine
// to wake. With Options.Hold, what is queued while Redis still owes replies to two earlier
// commands is held (bounded by Hold) until it has answered all but one, so it merges deeper. Calls of one Merge (a script that decides any number of keys) queued together
// are written as one EVALSHA, and its reply is split among them. One reader goroutine per connection reads the replies, which
// Redis sends in order, and hands each to its caller. Against go-redis this saves a
// command object, boxed arguments and replies, and a goroutine handoff per call
// (docs/performance.md).
//
// It understands only an array of integers or an error reply. An error reply that means
// the command did not run on this node (NotRunHere: an unknown script, a cluster redirect,
// a read-only replica, ...) leaves the call with its caller, encoded, to be sent again
// once the caller has done what the reply asks (load the script, find the node; Asking
// for a Cluster's ASK redirect).
//
// Failures: every call is bounded by its context. A connection whose oldest owed reply is
// overdue by ReadTimeout, or that fails a read or a write, is closed and every call waiting
// on it fails with ErrDown: the command may or may not have run, so it is never resent.
// The next call dials again, at most once per redialDelay while dials fail.
package respipe

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// redialDelay is how long a pipe whose dial failed refuses calls before dialing again.
const redialDelay = 100 * time.Millisecond

// maxOwed bounds the replies one connection may owe; beyond it calls fail at once.
const maxOwed = 1 << 16

var (
	// ErrDown is a call that failed with its connection (it may or may not have run), or
	// that was refused while the node cannot be dialed.
	ErrDown = errors.New("respipe: connection to Redis is down")
	// ErrClosed is a call on a closed Pool.
	ErrClosed = errors.New("respipe: connection closed")
	// ErrBusy is a call refused because its connection already owes too many replies.
	ErrBusy = errors.New("respipe: too many commands waiting for Redis")
	// ErrTimeout breaks a connection whose oldest owed reply is overdue by ReadTimeout.
	ErrTimeout = errors.New("respipe: Redis did not answer within the read timeout")
	// ErrBadReply breaks a connection that sent a reply nobody asked for or a malformed one.
	ErrBadReply = errors.New("respipe: unexpected reply from Redis")
)

// ReplyError is an error reply from Redis: the text after '-'. The connection is fine.
type ReplyError string

// Error returns the reply's text.
func (e ReplyError) Error() string { return string(e) }

// Code returns the reply's first word, its error code (e.g. "READONLY").
func (e ReplyError) Code() string {
	code, _, _ := strings.Cut(string(e), " ")
	return code
}

// notRunHere are the error codes of a command that did not run on the node it was sent to.
var notRunHere = [...]string{"NOSCRIPT", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING", "MASTERDOWN"}

// NotRunHere reports an error reply meaning the command did not run on this node, so it
// may be sent again: an unknown script (load it first), a cluster redirect or a
// slot in migration (follow it, reload the slot map), a node that is read-only, loading
// or without a master.
func NotRunHere(err error) bool {
	re, ok := err.(ReplyError)
	if !ok {
		return false
	}
	for _, code := range notRunHere {
		if strings.HasPrefix(string(re), code) {
			return true
		}
	}
	return false
}

// Options are how a Pool's pipes connect to their nodes.
type Options struct {
	// Username and Password are sent with AUTH when Password is set (the ACL user, when
	// Username is set too).
	Username, Password string
	// DB is the database to SELECT; 0 sends none.
	DB int
	// TLS, when set, wraps every connection; an empty ServerName is the node's host.
	TLS *tls.Config
	// Dial, when set, connects instead of TCP (and TLS) to the node's address: e.g.
	// go-redis's Sentinel dialer, which connects to whichever node is master now.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// DialTimeout bounds connecting, the TLS handshake, AUTH and SELECT.
	DialTimeout time.Duration
	// ReadTimeout is how overdue the oldest owed reply may be before the connection breaks.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write.
	WriteTimeout time.Duration
	// Hold, when positive, lets a connection hold its queued calls, for at most this long,
	// while Redis still owes it replies to holdOwed earlier commands or more: they are then
	// written together once Redis has answered all but one of those (it is never left
	// idle), so calls of a Merge merge deeper. Never while fewer are owed: a call with little
	// else in flight is written at once.
	Hold time.Duration
}

// Pool holds one Pipe per node address, and the reader goroutines of their connections.
type Pool struct {
	opt   Options
	wg    sync.WaitGroup // reader goroutines
	stats counts

	mu     sync.RWMutex // guards byAddr, closed
	byAddr map[string]*Pipe
	closed bool
}

// NewPool returns an empty pool whose pipes connect with opt; Close stops it.
func NewPool(opt Options) *Pool { return &Pool{opt: opt, byAddr: make(map[string]*Pipe)} }

// Pipe returns the pipe to the node at addr, made on first use, or nil after Close. It
// does not dial: the pipe's first call does.
func (pl *Pool) Pipe(addr string) *Pipe {
	pl.mu.RLock()
	p := pl.byAddr[addr]
	pl.mu.RUnlock()
	if p != nil {
		return p
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed {
		return nil
	}
	if p = pl.byAddr[addr]; p == nil {
		p = &Pipe{addr: addr, opt: &pl.opt, wg: &pl.wg, stats: &pl.stats}
		pl.byAddr[addr] = p
	}
	return p
}

// Conns returns the number of pipes with an open connection.
func (pl *Pool) Conns() int {
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	n := 0
	for _, p := range pl.byAddr {
		if p.Open() {
			n++
		}
	}
	return n
}

// Stats are a Pool's totals since it was made.
type Stats struct {
	// Calls is the calls written to Redis; Commands is the commands they were written as
	// (fewer when calls of a Merge shared one).
	Calls, Commands int64
}

// counts are a Pool's Stats, kept as they happen.
type counts struct{ calls, commands atomic.Int64 }

func (c *counts) add(calls, commands int) {
	c.calls.Add(int64(calls))
	c.commands.Add(int64(commands))
}

// Stats returns the pool's totals.
func (pl *Pool) Stats() Stats {
	return Stats{Calls: pl.stats.calls.Load(), Commands: pl.stats.commands.Load()}
}

// Close closes every pipe, fails the calls waiting on them with ErrDown, and waits for
// their reader goroutines to end. It is idempotent.
func (pl *Pool) Close() {
	pl.mu.Lock()
	pl.closed = true
	all := pl.byAddr
	pl.byAddr = nil
	pl.mu.Unlock()
	for _, p := range all {
		p.close()
	}
	pl.wg.Wait()
}
