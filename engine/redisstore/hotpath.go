package redisstore

import (
	"context"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine/redisstore/respipe"
)

// The decisions' path to Redis: Spend, SpendAll, Acquire, Release and Renew are each one
// EVALSHA sent on the pipe (package respipe) to the master that serves the key: the single
// node, the key's slot's master in a Cluster (go-redis's MasterForKey), or the master the
// sentinels name (dialed through go-redis's Sentinel dialer). Spend requests that wait to be
// written together share one (spend.lua is a respipe.Merge; mergeGroup). go-redis takes
// every call the pipe hands back (respipe.NotRunHere): it loads the script, follows the
// redirect, reloads the slot map or finds the new master. Everything else (rules, usage,
// webhooks, WAIT) goes through go-redis.

// arg is one script argument, a string or an integer, encoded without boxing.
type arg struct {
	s     string
	n     int64
	isNum bool
}

func sarg(s string) arg { return arg{s: s} }
func narg(n int64) arg  { return arg{n: n, isNum: true} }

func (a arg) put(c *respipe.Call) {
	if a.isNum {
		c.Int(a.n)
		return
	}
	c.Str(a.s)
}

func (a arg) boxed() any {
	if a.isNum {
		return a.n
	}
	return a.s
}

// runHot runs sc (a decision script: its reply is an array of integers) within
// ReadTimeout and appends the reply to dst.
func (s *Store) runHot(ctx context.Context, sc *script, dst []int64, keys []string, args ...arg) ([]int64, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	ctx = s.opCtx(ctx)
	if p := s.pipeFor(ctx, keys[0]); p != nil {
		var c *respipe.Call
		if sc.merge != nil && len(keys) == 1 {
			c = p.NewMerged(sc.merge, s.mergeGroup(keys[0]), keys[0])
		} else {
			c = p.NewEvalSha(sc.Hash(), keys, len(args))
		}
		for _, a := range args {
			a.put(c)
		}
		r, err := p.Do(ctx, c, dst)
		if !respipe.NotRunHere(err) {
			return r, err
		}
		if s.sentinel && err.(respipe.ReplyError).Code() == "READONLY" {
			// The pipe's master has been demoted: the next calls dial the master the
			// sentinels name now.
			p.Redial()
		}
	}
	boxed := make([]any, len(args))
	for i, a := range args {
		boxed[i] = a.boxed()
	}
	r, err := s.evalInts(ctx, sc, keys, boxed...)
	return append(dst, r...), err
}

// mergeGroup is the group of a key for respipe's Merge: on a Cluster its hash tag (one
// script call may only touch keys of one slot), elsewhere one group for every key.
func (s *Store) mergeGroup(key string) string {
	if s.cluster == nil {
		return ""
	}
	if i := strings.IndexByte(key, '}'); key != "" && key[0] == '{' && i > 0 {
		return key[:i+1]
	}
	return key
}

// pipeFor returns the pipe to the node that serves key, or nil to use go-redis.
func (s *Store) pipeFor(ctx context.Context, key string) *respipe.Pipe {
	if s.cluster == nil {
		return s.pipe
	}
	node, err := s.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil
	}
	return s.pipes.Pipe(node.Options().Addr)
}

// pipeOptions are the pipes' connection settings: go-redis's for the client's nodes, so
// the pipes log in, select and encrypt as its pooled connections do. On Sentinel the
// client's dialer is go-redis's, which asks the sentinels for the master on every dial.
func pipeOptions(c redis.UniversalClient, sentinel bool) respipe.Options {
	var o respipe.Options
	switch c := c.(type) {
	case *redis.ClusterClient:
		co := c.Options()
		o = respipe.Options{Username: co.Username, Password: co.Password, TLS: co.TLSConfig,
			DialTimeout: co.DialTimeout, ReadTimeout: co.ReadTimeout, WriteTimeout: co.WriteTimeout}
	case *redis.Client:
		co := c.Options()
		o = respipe.Options{Username: co.Username, Password: co.Password, DB: co.DB, TLS: co.TLSConfig,
			DialTimeout: co.DialTimeout, ReadTimeout: co.ReadTimeout, WriteTimeout: co.WriteTimeout}
		if sentinel {
			dial := co.Dialer // dials the current master, with TLS when configured
			o.TLS = nil
			o.Dial = func(ctx context.Context, _ string) (net.Conn, error) { return dial(ctx, "tcp", "") }
		}
	}
	return o
}
