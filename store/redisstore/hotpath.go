package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/store/redisstore/lua"
	"github.com/leashd/leash/store/redisstore/respipe"
)

// The decisions' path to Redis: Spend, SpendAll, Acquire, Release and Renew are each one
// EVALSHA sent on the pipe (package respipe) to the master that serves the key: the single
// node, the key's slot's master in a Cluster (go-redis's MasterForKey), or the master the
// sentinels name (dialed through go-redis's Sentinel dialer). Spend requests that wait to be
// written together share one (spend.lua, or spend_x.lua on a Redis 7 Cluster, is a
// respipe.Merge; mergeGroup; "Merging" below). The pipe is the
// decisions' only road: a call Redis answers it did not run (respipe.NotRunHere) is sent
// again on the pipe, as encoded, once go-redis has done what the answer asks (resendTo:
// load the script, reload the slot map, find the new master), until its deadline (maxResends
// at once, then after a pause: resendPause).
// A call whose script may have run (a lost reply) is never sent again. Everything else
// (rules, usage, webhooks, WAIT) goes through go-redis.

// Merging (spec §11.2, docs/redis.md): the pipes hold queued calls for at most mergeHold
// while Redis still owes two earlier commands (respipe Options.Hold), so that Spend requests
// merge deeper under load; a call with little else in flight is written at once. On a
// Cluster whose masters all run Redis >= 7.0 (crossSlotMerge), Spend uses spend_x.lua,
// flagged allow-cross-slot-keys, whose keys are arguments: its calls merge per master, not
// per slot. A request whose key that master does not serve comes back undecided (-1,
// nothing spent) and is sent again with spend.lua, routed by its own key. On older
// masters (6.2) Spend merges per hash tag, as spend.lua's declared keys must be of one slot.

// mergeHold bounds how long the pipe holds a call to merge it with later ones.
const mergeHold = 100 * time.Microsecond

// crossSlotMerge reports whether s is on a Cluster whose every master runs Redis >= 7.0
// (INFO server: redis_version), and loads spend_x.lua there. Anything else (a single node,
// Sentinel, an older or unreadable version) merges Spend per slot.
func (s *conn) crossSlotMerge(ctx context.Context) bool {
	if s.cluster == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*s.opTimeout)
	defer cancel()
	var mu sync.Mutex
	ok := true
	err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		info, err := node.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		if !atLeast7(info) {
			mu.Lock()
			ok = false
			mu.Unlock()
			return nil
		}
		return s.scripts.SpendX.Load(ctx, node).Err()
	})
	if err != nil {
		s.log.Warn("redis store: reading the masters' version failed; Spend merges per slot", "err", err)
		return false
	}
	return ok
}

// atLeast7 reports whether INFO server's redis_version is 7.0 or later.
func atLeast7(info string) bool {
	for line := range strings.Lines(info) {
		v, found := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !found {
			continue
		}
		major, _, _ := strings.Cut(v, ".")
		n, err := strconv.Atoi(major)
		return err == nil && n >= 7
	}
	return false
}

// maxResends is how many times one decision is sent again at once after answers that prove
// it did not run: e.g. MOVED to the slot's new master, then NOSCRIPT there. Past that it is
// sent again after a pause (resendPause) until its deadline.
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
func (s *conn) runHot(ctx context.Context, lua *script, dst []int64, keys []string, args ...arg) ([]int64, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	ctx = s.opCtx(ctx)
	p, err := s.pipeFor(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	var c *respipe.Call
	if lua.Merge != nil && len(keys) == 1 {
		c = p.NewMerged(lua.Merge, s.mergeGroup(lua.Merge, keys[0]), keys[0])
	} else {
		c = p.NewEvalSha(lua.Hash(), keys, len(args))
	}
	for _, a := range args {
		a.put(c)
	}
	for resent := 0; ; resent++ {
		r, err := p.Do(ctx, c, dst)
		if !respipe.NotRunHere(err) {
			s.noteOutcome(err)
			return r, err
		}
		reply := err.(respipe.ReplyError)
		if resent >= maxResends && !resendPause(ctx, resent-maxResends) {
			// Still redirected, or the Cluster still moving, at the deadline: the decision
			// was not taken, and the caller hears so, never the reply itself (spec §3.8).
			return nil, fmt.Errorf("redisstore: %w: %s at the deadline", errNotServed, reply.Code())
		}
		if p, err = s.resendTo(ctx, lua, keys[0], p, c, reply); err != nil {
			return nil, err
		}
	}
}

// errNotServed is a decision that no node ran before its deadline: redirected (MOVED, ASK),
// refused (TRYAGAIN, CLUSTERDOWN, LOADING, ...) each time it was sent.
var errNotServed = errors.New("no node ran the call")

// resendPause waits before the n-th resend past maxResends, 250 µs doubling to 16 ms, so a
// call redirected while go-redis reloads its slot map (lazily, in the background) or while a
// Cluster moves a slot or fails over is sent again until its deadline, without spinning.
// It reports false once ctx is done.
func resendPause(ctx context.Context, n int) bool {
	d := 250 * time.Microsecond << min(n, 6)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// resendTo does what Redis's answer to call c on pipe from asks, for the answers it can
// act on, and returns the pipe to send c to again; any other answer is returned as the
// error. NOSCRIPT: go-redis loads lua on the node that answered. MOVED and ASK (Cluster): the
// node the answer names, with ASKING for ASK; go-redis reloads its slot map for the calls
// after. READONLY: on Sentinel the pipe dials the master the sentinels name now; on a
// Cluster the key's master after a slot map reload.
func (s *conn) resendTo(ctx context.Context, lua *script, key string, from *respipe.Pipe, c *respipe.Call, reply respipe.ReplyError) (*respipe.Pipe, error) {
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
		if lua.Merge != nil && lua.Merge.ArgKeys && !redirectsSlotOf(string(reply), key) {
			// The redirect is for the key that routed the merged call (spend_x.lua), not
			// c's: c's own key goes where the slot map says.
			if code == "MOVED" {
				s.cluster.ReloadState(ctx)
			}
			return s.pipeFor(ctx, key)
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
func (s *conn) loadOn(ctx context.Context, lua *script, addr string) error {
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

// redirectsSlotOf reports whether a MOVED or ASK answer ("MOVED 3999 host:port") is for
// key's slot.
func redirectsSlotOf(reply, key string) bool {
	f := strings.Fields(reply)
	return len(f) == 3 && f[1] == strconv.Itoa(int(lua.Slot(key)))
}

// mergeGroup is the group of a key for respipe's Merge: on a Cluster its hash tag (one
// script call may only touch keys of one slot), elsewhere, and for a Merge whose keys are
// arguments (ArgKeys: spend_x.lua, any slot of the pipe's node), one group for every key.
func (s *conn) mergeGroup(m *respipe.Merge, key string) string {
	if s.cluster == nil || m.ArgKeys {
		return ""
	}
	if i := strings.IndexByte(key, '}'); key != "" && key[0] == '{' && i > 0 {
		return key[:i+1]
	}
	return key
}

// pipeFor returns the pipe to the node that serves key. When there is none to be had (the
// slot map cannot be loaded), the decision fails as Redis down: it never goes elsewhere.
func (s *conn) pipeFor(ctx context.Context, key string) (*respipe.Pipe, error) {
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
func (s *conn) livePipe(addr string) (*respipe.Pipe, error) {
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
	o.Hold = mergeHold
	return o
}
