package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/hotpath"
)

// The primitives of reservations (spec §4.13, docs/redis.md "Reservations"), for the hot
// path above the store (package engine/hotpath, which holds the policy): Reservations is its
// hotpath.Port. A reserve call is one lua/reserve.lua request on the pipe; the fence log is
// lua/fence_add.lua and lua/fence_poll.lua; a reset fences in two phases (Reset,
// lua/reset.lua).

// fenceWait is how long a fence waits after it is logged: the hot path's validity and a
// margin for the clocks' rates and the log's write.
const fenceWait = hotpath.Valid + 20*time.Millisecond

// redisClock is Redis's clock as last read: tms (TIME, ms) no later than at (monotonic).
type redisClock struct {
	mu  sync.Mutex
	tms int64
	at  time.Time
}

// saw notes Redis's clock, tms (TIME, ms), read by a call whose reply arrived now.
func (c *redisClock) saw(tms int64) {
	now := time.Now()
	c.mu.Lock()
	c.tms, c.at = tms, now
	c.mu.Unlock()
}

// deadline is the instant, on Redis's clock, after which a call made now with ctx would
// no longer have its reply read: ctx's deadline, less a tenth of the time left (at least
// 2 ms) for the reply's way back; 0 (none) before Redis's clock was read.
func (c *redisClock) deadline(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	c.mu.Lock()
	tms, at := c.tms, c.at
	c.mu.Unlock()
	if !ok || tms == 0 {
		return 0
	}
	left := time.Until(dl)
	left -= max(left/10, 2*time.Millisecond)
	// Redis's clock now is at least tms plus the time since it was read.
	return tms + time.Since(at).Milliseconds() + max(left.Milliseconds(), 0)
}

// CounterKey is c's key (keys.go).
func (s *Reservations) CounterKey(c engine.Counter) string { return s.keys.Counter(c) }

// SpendKey is Spend of a valid sp whose counter's key (CounterKey) is already made: the
// hot path's road to Redis for the requests it does not decide, with no second key.
func (s *Reservations) SpendKey(ctx context.Context, key string, sp engine.Spend) (engine.Decision, error) {
	if sp.Overdraft && sp.Counter.Algorithm != engine.TokenBucket {
		return s.overdraft(ctx, &sp, key)
	}
	code := spendCode(&sp)
	var buf [4]int64 // the reply, without a heap allocation
	keys := []string{key}
	args := [...]arg{strArg(s.nowArg()), intArg(s.slack), strArg(code), intArg(sp.Limit), intArg(sp.Counter.WindowMS), intArg(sp.Cost)}
	lua := s.scripts.Spend
	if s.crossSlot {
		lua = s.scripts.SpendX // merged with any Spend for the same master (hotpath.go)
	}
	r, err := s.runHot(ctx, lua, buf[:0], keys, args[:]...)
	if err == nil && lua == s.scripts.SpendX && len(r) == 4 && r[0] == -1 {
		// That master does not serve the key (a stale slot map): nothing was spent; send
		// it again on its own, routed, redirected and retried by its own key.
		s.undecided.Add(1)
		r, err = s.runHot(ctx, s.scripts.Spend, buf[:0], keys, args[:]...)
	}
	if err != nil {
		return engine.Decision{}, err
	}
	if len(r) != 4 {
		return engine.Decision{}, errors.New("redisstore: spend: malformed script reply")
	}
	return engine.Decision{Allowed: r[0] == 1, Limit: sp.Limit, Remaining: r[1], ResetMS: r[2], NowMS: r[3]}, nil
}

// overdraft decides an overdraft spend of a window counter (spec §4.12) with one
// lua/reserve.lua request, which also tells how many instances hold a grant of the
// counter: when it is denied, and so counted over the limit, while some do, it answers only
// once no slice taken before it can decide anywhere (Fence, spec §4.13), whichever
// instance made it and whether or not its own reservations are on.
func (s *Reservations) overdraft(ctx context.Context, sp *engine.Spend, key string) (engine.Decision, error) {
	rep, err := s.Reserve(ctx, key, sp, hotpath.Call{From: 1, Share: 1, Part: 1})
	if err != nil {
		return engine.Decision{}, err
	}
	if rep.Verdict < 0 {
		return engine.Decision{}, errors.New("redisstore: overdraft: the call reached Redis after its deadline")
	}
	if rep.Verdict == 0 && rep.Others > 0 {
		if err := s.Fence(ctx, key); err != nil {
			return engine.Decision{}, err
		}
	}
	return engine.Decision{Allowed: rep.Verdict == 1, Limit: sp.Limit, Remaining: rep.Remaining, ResetMS: rep.ResetMS, NowMS: rep.NowMS}, nil
}

// Reserve runs one request of lua/reserve.lua: settle, decide sp, grant.
func (s *Reservations) Reserve(ctx context.Context, key string, sp *engine.Spend, c hotpath.Call) (hotpath.Reply, error) {
	ctx = s.opCtx(ctx)
	var buf [10]int64
	args := [...]arg{strArg(s.nowArg()), intArg(s.slack), intArg(c.From), intArg(c.Share), intArg(c.Part), strArg(c.Holder),
		strArg(spendCode(sp)), intArg(sp.Limit), intArg(sp.Counter.WindowMS), intArg(sp.Cost),
		intArg(c.Seq), intArg(c.Ack), intArg(c.Used), intArg(c.Want), intArg(s.redisTime.deadline(ctx))}
	res, err := s.runHot(ctx, s.scripts.Reserve, buf[:0], []string{key}, args[:]...)
	if err != nil {
		return hotpath.Reply{}, err
	}
	if len(res) != 10 {
		return hotpath.Reply{}, errors.New("redisstore: reserve: malformed script reply")
	}
	s.redisTime.saw(res[9])
	rep := hotpath.Reply{Verdict: res[0], Remaining: res[1], ResetMS: res[2], NowMS: res[3],
		Slice: res[4], Window: res[5], Count: res[6], Prev: res[7], Others: res[8]}
	if rep.Slice > 0 {
		if p, err := s.pipeFor(ctx, key); err == nil { // the node that answered: the key's, as the call was routed
			rep.Conn = p
		}
	}
	return rep, nil
}

// Fence logs a fence on the counter key and waits fenceWait: then no instance decides
// from a slice of it taken before the fence (each one's beat reads the log; one that could
// not read it has gone past hotpath.Valid).
func (s *Reservations) Fence(ctx context.Context, key string) error {
	if _, err := s.eval(s.opCtx(ctx), s.scripts.FenceAdd, []string{s.keys.FenceLog(), s.keys.FenceSeq()}, key); err != nil {
		return err
	}
	t := time.NewTimer(fenceWait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ReadFences reads the fence log after seq after (lua/fence_poll.lua), and Redis's clock.
func (s *Reservations) ReadFences(ctx context.Context, after int64) (hotpath.Fences, error) {
	res, err := s.eval(ctx, s.scripts.FencePoll, []string{s.keys.FenceLog(), s.keys.FenceSeq()}, after)
	if err != nil {
		return hotpath.Fences{}, err
	}
	vals, err := res.Slice()
	if err != nil || len(vals) < 3 {
		return hotpath.Fences{}, errors.New("redisstore: fence log: malformed script reply")
	}
	last, _ := vals[0].(int64)
	missed, _ := vals[1].(int64)
	if tms, ok := vals[2].(int64); ok {
		s.redisTime.saw(tms)
	}
	f := hotpath.Fences{Last: last, Missed: missed != 0}
	for _, v := range vals[3:] {
		if m, ok := v.(string); ok {
			if _, key, ok := strings.Cut(m, ":"); ok { // "seq:counter key"
				f.Keys = append(f.Keys, key)
			}
		}
	}
	return f, nil
}

// MultiNode reports whether the store is a Cluster.
func (s *Reservations) MultiNode() bool { return s.cluster != nil }

// PingNodes pings every Cluster master and reports each that answered by its address
// (the pipes' Addr).
func (s *Reservations) PingNodes(ctx context.Context, answered func(node string)) {
	if s.cluster == nil {
		return
	}
	_ = s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if err := c.Ping(ctx).Err(); err != nil {
			return err
		}
		answered(c.Options().Addr)
		return nil
	})
}

// Answering reports whether Redis answered the last call made to it.
func (s *Reservations) Answering() bool { return s.answering() }
