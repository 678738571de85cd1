package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine/redisstore/respipe"
)

// The decisions' path to Redis: Spend, SpendAll, Acquire, Release and Renew are each one
// EVALSHA sent on the pipe (package respipe) to the master that serves the key: the single
// node, the key's slot's master in a Cluster (go-redis's MasterForKey), or the master the
// sentinels name (dialed through go-redis's Sentinel dialer). Spend requests that wait to be
// written together share one (spend.lua is a respipe.Merge; mergeGroup). The pipe is the
// decisions' only road: a call Redis answers it did not run (respipe.NotRunHere) is sent
// again on the pipe, as encoded, once go-redis has done what the answer asks (resendTo:
// load the script, reload the slot map, find the new master), at most maxResends times.
// A call whose script may have run (a lost reply) is never sent again. Everything else
// (rules, usage, webhooks, WAIT) goes through go-redis.

// maxResends is how many times one decision is sent again after answers that prove it did
// not run: e.g. MOVED to the slot's new master, then NOSCRIPT there.
const maxResends = 2

// arg is one script argument, a string or an integer, encoded without boxing.
type arg struct {
	str   string
	num   int64
	isNum bool
}

func strArg(s string) arg { return arg{str: s} }
func intArg(n int64) arg  { return arg{num: n, isNum: true} }

func (a arg) put(c *respipe.Call) {
	if a.isNum {
		c.Int(a.num)
		return
	}
	c.Str(a.str)
}

// runHot runs lua (a decision script: its reply is an array of integers) on the pipe of
// keys[0]'s node within ReadTimeout and appends the reply to dst.
func (s *Store) runHot(ctx context.Context, lua *script, dst []int64, keys []string, args ...arg) ([]int64, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	ctx = s.opCtx(ctx)
	p, err := s.pipeFor(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	var c *respipe.Call
	if lua.merge != nil && len(keys) == 1 {
		c = p.NewMerged(lua.merge, s.mergeGroup(keys[0]), keys[0])
	} else {
		c = p.NewEvalSha(lua.Hash(), keys, len(args))
	}
	for _, a := range args {
		a.put(c)
	}
	for resent := 0; ; resent++ {
		r, err := p.Do(ctx, c, dst)
		if resent == maxResends || !respipe.NotRunHere(err) {
			return r, err
		}
		if p, err = s.resendTo(ctx, lua, keys[0], p, c, err.(respipe.ReplyError)); err != nil {
			return nil, err
		}
	}
}

// resendTo does what Redis's answer to call c on pipe from asks, for the answers it can
// act on, and returns the pipe to send c to again; any other answer is returned as the
// error. NOSCRIPT: go-redis loads lua on the node that answered. MOVED and ASK (Cluster): the
// node the answer names, with ASKING for ASK; go-redis reloads its slot map for the calls
// after. READONLY: on Sentinel the pipe dials the master the sentinels name now; on a
// Cluster the key's master after a slot map reload.
func (s *Store) resendTo(ctx context.Context, lua *script, key string, from *respipe.Pipe, c *respipe.Call, reply respipe.ReplyError) (*respipe.Pipe, error) {
	switch code := reply.Code(); {
	case code == "NOSCRIPT":
		if err := s.loadOn(ctx, lua, from.Addr()); err != nil {
			return nil, err
		}
		return from, nil
	case (code == "MOVED" || code == "ASK") && s.cluster != nil:
		addr, ok := redirectAddr(string(reply), from.Addr())
		if !ok {
			return nil, reply
		}
		if code == "ASK" {
			c.Asking()
		} else {
			s.cluster.ReloadState(ctx)
		}
		return s.livePipe(addr)
	case code == "READONLY" && s.sentinel:
		// The pipe's master has been demoted: its next call dials the master the
		// sentinels name now.
		from.RedialAfter(c)
		return from, nil
	case code == "READONLY" && s.cluster != nil:
		s.cluster.ReloadState(ctx)
		return s.pipeFor(ctx, key)
	}
	return nil, reply
}

// loadOn loads lua on the node at addr: the single node, the Sentinel master (go-redis's
// connections and the pipe's both dial the one the sentinels name), or that Cluster node.
func (s *Store) loadOn(ctx context.Context, lua *script, addr string) error {
	var err error
	if s.cluster == nil {
		err = lua.Load(ctx, s.client).Err()
	} else {
		found := false
		err = s.cluster.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
			if node.Options().Addr != addr {
				return nil
			}
			found = true // one node has addr: no other goroutine writes found
			return lua.Load(ctx, node).Err()
		})
		if err == nil && !found {
			err = errors.New("the node is not in the slot map")
		}
	}
	if err != nil {
		return fmt.Errorf("redisstore: loading a script: %w", err)
	}
	return nil
}

// redirectAddr is the node address of a MOVED or ASK answer ("MOVED 3999 host:port"); a
// node that announces no host is on from's host.
func redirectAddr(reply, from string) (string, bool) {
	f := strings.Fields(reply)
	if len(f) != 3 {
		return "", false
	}
	host, port, err := net.SplitHostPort(f[2])
	if err != nil {
		return "", false
	}
	if host == "" {
		if host, _, err = net.SplitHostPort(from); err != nil {
			return "", false
		}
	}
	return net.JoinHostPort(host, port), true
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

// pipeFor returns the pipe to the node that serves key. When there is none to be had (the
// slot map cannot be loaded), the decision fails as Redis down: it never goes elsewhere.
func (s *Store) pipeFor(ctx context.Context, key string) (*respipe.Pipe, error) {
	if s.cluster == nil {
		return s.pipe, nil
	}
	node, err := s.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("redisstore: finding the key's master: %w: %v", respipe.ErrDown, err)
	}
	return s.livePipe(node.Options().Addr)
}

// livePipe returns the pipe to the node at addr, or errClosed once the Store is closed.
func (s *Store) livePipe(addr string) (*respipe.Pipe, error) {
	if p := s.pipes.Pipe(addr); p != nil {
		return p, nil
	}
	return nil, errClosed
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
