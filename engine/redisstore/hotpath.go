package redisstore

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The decisions' path to Redis: Spend, SpendAll, Acquire, Release and Renew are each one
// EVALSHA sent on the node's pipe (pipe.go) when the deployment allows it (single node or
// Cluster), else through go-redis, which also takes every call the pipe hands back
// (errFallback). Everything else (rules, usage, webhooks, WAIT) goes through go-redis.

// arg is one script argument, a string or an integer, encoded without boxing.
type arg struct {
	s     string
	n     int64
	isNum bool
}

func sarg(s string) arg { return arg{s: s} }
func narg(n int64) arg  { return arg{n: n, isNum: true} }

func (a arg) put(c *pcall) {
	if a.isNum {
		c.int(a.n)
		return
	}
	c.str(a.s)
}

func (a arg) boxed() any {
	if a.isNum {
		return a.n
	}
	return a.s
}

// pipes are the Store's pipes, one per node address; nil for Sentinel (the master moves
// under go-redis's management) or when a test or benchmark selects a go-redis mode.
type pipes struct {
	mu     sync.RWMutex
	byAddr map[string]*pipe
	closed bool
}

// runHot runs sc (a decision script: its reply is an array of integers) within
// ReadTimeout and appends the reply to dst.
func (s *Store) runHot(ctx context.Context, sc *script, dst []int64, keys []string, args ...arg) ([]int64, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	ctx = s.opCtx(ctx)
	if p := s.pipeFor(ctx, keys[0]); p != nil {
		c := p.newCall(3 + len(keys) + len(args))
		c.str("EVALSHA")
		c.str(sc.Hash())
		c.int(int64(len(keys)))
		for _, k := range keys {
			c.str(k)
		}
		for _, a := range args {
			a.put(c)
		}
		r, err := p.do(ctx, c, dst)
		if !errFallback(err) {
			return r, err
		}
	}
	boxed := make([]any, len(args))
	for i, a := range args {
		boxed[i] = a.boxed()
	}
	r, err := s.evalInts(ctx, sc, keys, boxed...)
	return append(dst, r...), err
}

// pipeFor returns the pipe to the node that serves key, or nil to use go-redis.
func (s *Store) pipeFor(ctx context.Context, key string) *pipe {
	if s.pipes == nil {
		return nil
	}
	var o *redis.Options
	switch {
	case s.cluster != nil:
		node, err := s.cluster.MasterForKey(ctx, key)
		if err != nil {
			return nil
		}
		o = node.Options()
	default:
		o = s.client.(*redis.Client).Options()
	}
	ps := s.pipes
	ps.mu.RLock()
	p := ps.byAddr[o.Addr]
	ps.mu.RUnlock()
	if p != nil {
		return p
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil
	}
	if p = ps.byAddr[o.Addr]; p == nil {
		p = newPipe(pipeOptionsOf(o), &s.wg)
		ps.byAddr[o.Addr] = p
	}
	return p
}

// closePipes closes every pipe; their readers end.
func (s *Store) closePipes() {
	if s.pipes == nil {
		return
	}
	ps := s.pipes
	ps.mu.Lock()
	ps.closed = true
	all := ps.byAddr
	ps.mu.Unlock()
	for _, p := range all {
		p.close()
	}
}

// pipeConns is the number of pipes with an open connection.
func (s *Store) pipeConns() uint32 {
	if s.pipes == nil {
		return 0
	}
	s.pipes.mu.RLock()
	defer s.pipes.mu.RUnlock()
	var n uint32
	for _, p := range s.pipes.byAddr {
		if p.open() {
			n++
		}
	}
	return n
}
