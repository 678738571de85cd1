package redisstore

import (
	"context"
	"errors"
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/algo"
	"github.com/leashd/leash/engine/redisstore/respipe"
)

// Reservations (spec §4.13, docs/redis.md "Reservations"): a counter that this instance
// spends on again and again (hot: ReserveOptions.Hits requests, each within
// reserveHotWithin of the one before) takes, with a request Redis allows, a slice of what
// is left (lua/reserve.lua: at most 1/Share of the remaining, none below From). Later
// requests are decided here, by engine/algo on the counter's state as Redis returned it,
// while the slice covers them: a window counter's units in the slice's window; a token
// bucket's stretch of TAT (the slots of its units, each W/L ms: a request fits while the
// bucket's TAT after it stays in the stretch, so no unit is used before its slot, and the
// slots of units not used in time pass unused, as in Redis). A request the slice cannot
// cover goes to Redis with the unspent part given back, in the same call. So nothing is
// admitted that Redis did not count, and on one instance every verdict, remaining and
// reset is the one Redis would give; other instances see the unspent slices as spent (at
// most a slice per instance and counter, given back within Idle of the last request, or
// when the window or stretch ends).
//
// A counter's calls to Redis are one at a time while it holds a slice (requests wait for
// the call in flight, then decide on its slice); a counter without one is spent the usual
// way (Spend's merged call), so a cold or nearly spent counter costs nothing more.

// ReserveOptions tune reservations; the zero value is the production setting.
type ReserveOptions struct {
	// Off decides every request in Redis.
	Off bool
	// From is the least a counter must have left, after a request, to reserve a slice;
	// default 1024.
	From int64
	// Share: a slice is at most 1/Share of what is left; default 16.
	Share int64
	// Hits is how many requests in a row, each within reserveHotWithin of the last, make a
	// counter hot; default 2 (the second request reserves).
	Hits int
	// Idle is how long after a counter's last request its unspent slice goes back;
	// default 10 s.
	Idle time.Duration
}

const (
	// A counter is followed while it is spent on at least every reserveHotWithin; its
	// slice goes back ReserveOptions.Idle (reserveIdle) after the last request. Both are long enough for a
	// counter spent on every few seconds (3,000/s over 10,000 keys: every 3.3 s) to keep
	// one, and a slice held while idle costs other instances at most 1/Share of what was
	// left.
	reserveHotWithin  = 10 * time.Second
	reserveIdle       = 10 * time.Second
	reserveQuick      = time.Second // a slice spent faster than this makes the next one twice as big
	reserveSweepEvery = 250 * time.Millisecond
	reserveFirstWant  = 32      // the first slice asked for, in costs
	reserveMaxWant    = 1 << 16 // units
	reserveShards     = 64
	reserveMaxEntries = 1 << 17 // counters followed, over all shards
	reserveGiveBacks  = 64      // give-back calls in flight at once
)

// reservations follows the counters this instance spends on and holds their slices.
type reservations struct {
	s      *Store
	opts   ReserveOptions
	seed   maphash.Seed
	shards [reserveShards]resShard
	n      atomic.Int64 // counters followed, over all shards
	// The reset log read so far (run's goroutine only): the last instant read (at first,
	// when the store opened), and the counters reset at that instant.
	resetsSeen   int64
	resetsAtSeen map[string]bool
	local        atomic.Int64 // requests decided from a slice
	calls        atomic.Int64 // reserve calls (give-backs included)
}

// ReserveStats counts, since Open, the requests decided from a slice and the calls to
// Redis that reserved or gave back (reserve.go); zero when reservations are off.
func (s *Store) ReserveStats() (local, calls int64) {
	if s.reserve == nil {
		return 0, 0
	}
	return s.reserve.local.Load(), s.reserve.calls.Load()
}

type resShard struct {
	mu sync.Mutex
	m  map[string]*resEntry
}

// resEntry is one counter: its slice, if any, and how often it is spent on. Its fields
// are guarded by its shard's mutex.
type resEntry struct {
	limit, windowMS int64
	alg             engine.Algorithm
	// The slice: units reserved (0: none held) and, for a window counter, units spent
	// from it, of window win; curr and prev are the counter's state without the unspent
	// units. A token bucket's slice is the stretch of TAT from the state after the request
	// that took it to end (endMS + endRem/limit): curr and prev hold the instance's own
	// TAT (ms, remainder), which only its requests have moved. gen is the counter's
	// generation.
	slice, used, win, gen, curr, prev int64
	endMS, endRem                     int64
	pipe                              *respipe.Pipe // the connection to the node the slice came from
	// The store's clock: baseMS at base, at most latMS old when it arrived (test clock:
	// unused).
	baseMS, latMS int64
	base          time.Time
	// Demand.
	hits int
	seen time.Time // the last request
	// The last call reserved nothing for lack of budget: none is asked for before lowUntil
	// (store clock, ms): the next window, or a second on for a bucket.
	lowUntil int64
	want     int64         // the next slice asked for, in units
	busy     chan struct{} // closed when the call in flight ends; nil when none is
	reserved time.Time     // when the slice was granted
}

func newReservations(s *Store, o ReserveOptions) *reservations {
	if o.From <= 0 {
		o.From = 1024
	}
	if o.Share <= 0 {
		o.Share = 16
	}
	if o.Hits <= 0 {
		o.Hits = 2
	}
	if o.Idle <= 0 {
		o.Idle = reserveIdle
	}
	r := &reservations{s: s, opts: o, seed: maphash.MakeSeed(), resetsAtSeen: map[string]bool{}}
	for i := range r.shards {
		r.shards[i].m = make(map[string]*resEntry)
	}
	return r
}

func (r *reservations) shard(key string) *resShard {
	return &r.shards[maphash.String(r.seed, key)%reserveShards]
}

// nowMS is the store's clock for a local decision on e: the test clock, or the reply's
// clock advanced by the time since, plus the call's latency, so it is never behind Redis.
func (r *reservations) nowMS(e *resEntry, now time.Time) int64 {
	if r.s.clock != nil {
		return r.s.clock.Now().UnixMilli()
	}
	return e.baseMS + now.Sub(e.base).Milliseconds() + e.latMS
}

// spend decides sp on counter key: ok false means Spend's usual call is to decide it.
func (r *reservations) spend(ctx context.Context, sp *engine.Spend, key string) (d engine.Decision, ok bool, err error) {
	alg := sp.Counter.Algorithm
	eligible := !sp.Overdraft
	sh, e, err := r.settled(ctx, key)
	if err != nil {
		return engine.Decision{}, false, err
	}
	now := time.Now()
	if e == nil {
		// A counter followed: one that could ever reserve (a limit From above the cost).
		if eligible && sp.Limit-sp.Cost >= r.opts.From && r.n.Load() < reserveMaxEntries {
			r.n.Add(1)
			sh.m[key] = &resEntry{hits: 1, seen: now, windowMS: sp.Counter.WindowMS, alg: alg}
		}
		sh.mu.Unlock()
		return engine.Decision{}, false, nil
	}
	if eligible && e.slice > 0 && e.limit == sp.Limit && (alg == engine.TokenBucket || e.used+sp.Cost <= e.slice) && r.live(e) {
		nowMS := r.nowMS(e, now)
		if d, ok := e.local(sp, nowMS); ok {
			e.seen = now
			sh.mu.Unlock()
			r.local.Add(1)
			return d, true, nil
		}
	}
	if now.Sub(e.seen) <= reserveHotWithin {
		e.hits++
	} else {
		e.hits = 1
	}
	e.seen = now
	reserve := eligible && sp.Cost > 0 && sp.Limit-sp.Cost >= r.opts.From && e.hits >= r.opts.Hits
	if reserve && e.lowUntil > 0 && r.estimateMS(e, now) < e.lowUntil {
		reserve = false
	}
	call, back := e.giveBack()
	if !back && !reserve {
		sh.mu.Unlock()
		return engine.Decision{}, false, nil
	}
	want := int64(0)
	if reserve {
		want = e.nextWant(sp, now)
	}
	call.want = want
	e.slice, e.used = 0, 0
	ch := make(chan struct{})
	e.busy = ch
	sh.mu.Unlock()

	t0 := time.Now()
	rep, err := r.s.reserveCall(ctx, key, sp, call)
	t1 := time.Now()

	sh.mu.Lock()
	e.busy = nil
	close(ch)
	if err == nil {
		e.granted(sp, rep, want, t1, t1.Sub(t0))
	}
	sh.mu.Unlock()
	if err != nil {
		return engine.Decision{}, false, err
	}
	return engine.Decision{Allowed: rep.allowed, Limit: sp.Limit, Remaining: rep.remaining, ResetMS: rep.resetMS, NowMS: rep.nowMS}, true, nil
}

// live reports whether e's slice may decide: only while Redis answers, so that a Redis
// that is down or frozen stops every decision (spec §3.8), as it stops those it is asked:
// the connection the slice came by is up (a killed Redis closes it at once) and the last
// call to Redis, or ping, succeeded (a frozen one fails them by their timeout).
func (r *reservations) live(e *resEntry) bool {
	return r.s.answering() && (e.pipe == nil || e.pipe.Open())
}

// estimateMS is nowMS for an entry that may hold no clock yet (then: Redis's last known
// time is unknown, and lowUntil, 0 then, is not in force).
func (r *reservations) estimateMS(e *resEntry, now time.Time) int64 {
	if r.s.clock == nil && e.base.IsZero() {
		return -1
	}
	return r.nowMS(e, now)
}

// local decides sp from e's slice at nowMS, when the slice covers it: a window counter's
// in its window, a token bucket's when the bucket's TAT after it is still in the slice.
func (e *resEntry) local(sp *engine.Spend, nowMS int64) (engine.Decision, bool) {
	var res algo.Result
	switch e.alg {
	case engine.SlidingWindow:
		if floorDiv(nowMS, e.windowMS) != e.win {
			return engine.Decision{}, false
		}
		var st algo.SlidingState
		st, res = algo.SlidingWindow(algo.SlidingState{Window: e.win, Curr: e.curr, Prev: e.prev}, nowMS, sp.Limit, e.windowMS, sp.Cost)
		if !res.Allowed {
			return engine.Decision{}, false
		}
		e.curr = st.Curr
	case engine.FixedWindow:
		if floorDiv(nowMS, e.windowMS) != e.win {
			return engine.Decision{}, false
		}
		var st algo.FixedState
		st, res = algo.FixedWindow(algo.FixedState{Window: e.win, Count: e.curr}, nowMS, sp.Limit, e.windowMS, sp.Cost)
		if !res.Allowed {
			return engine.Decision{}, false
		}
		e.curr = st.Count
	default:
		var st algo.BucketState
		st, res = algo.TokenBucket(algo.BucketState{TatMS: e.curr, TatRem: e.prev, Limit: sp.Limit}, nowMS, sp.Limit, e.windowMS, sp.Cost)
		if !res.Allowed || st.TatMS > e.endMS || (st.TatMS == e.endMS && st.TatRem > e.endRem) {
			return engine.Decision{}, false
		}
		e.curr, e.prev = st.TatMS, st.TatRem
	}
	e.used += sp.Cost
	return engine.Decision{Allowed: true, Limit: sp.Limit, Remaining: res.Remaining, ResetMS: res.ResetMS, NowMS: nowMS}, true
}

// giveBack is the part of a reserve call that gives back e's slice, and whether there is
// anything to give back.
func (e *resEntry) giveBack() (resCall, bool) {
	c := resCall{gen: e.gen}
	if e.slice <= 0 {
		return c, false
	}
	if e.alg == engine.TokenBucket {
		c.b1, c.b2, c.b3, c.b4, c.b5 = e.endMS, e.endRem, e.curr, e.prev, e.limit
		return c, true
	}
	if back := e.slice - e.used; back > 0 {
		c.b1, c.b2 = back, e.win
		return c, true
	}
	return c, false
}

// backSpend is the request of a give-back call: nothing spent, the slice's counter and limit.
func (e *resEntry) backSpend() engine.Spend {
	return engine.Spend{Counter: engine.Counter{Algorithm: e.alg, WindowMS: e.windowMS}, Limit: e.limit}
}

// ended reports whether e's slice can no longer cover a request at nowMS: a window
// counter's window has passed, a token bucket's stretch of TAT is behind.
func (e *resEntry) ended(nowMS int64) bool {
	if e.alg == engine.TokenBucket {
		return nowMS >= e.endMS
	}
	return floorDiv(nowMS, e.windowMS) != e.win
}

// nextWant is the slice to ask for: reserveFirstWant costs at first, twice the last when
// that lasted under reserveQuick, at most reserveMaxWant units (and never below the cost).
func (e *resEntry) nextWant(sp *engine.Spend, now time.Time) int64 {
	if e.alg == engine.TokenBucket {
		// A bucket's slice is cut by time, not by count: units whose slots have passed
		// are of no use, so only the share bounds it.
		return sp.Limit
	}
	cost := sp.Cost
	switch {
	case e.want == 0:
		e.want = reserveFirstWant * cost
	case !e.reserved.IsZero() && now.Sub(e.reserved) < reserveQuick:
		e.want *= 2
	}
	e.want = min(max(e.want, cost), reserveMaxWant)
	return e.want
}

// granted records a reserve call's reply on e.
func (e *resEntry) granted(sp *engine.Spend, rep resReply, want int64, at time.Time, took time.Duration) {
	e.baseMS, e.base, e.latMS = rep.nowMS, at, (took.Nanoseconds()+999_999)/1_000_000
	e.lowUntil = 0
	if want > 0 && rep.slice == 0 {
		if e.alg == engine.TokenBucket {
			e.lowUntil = rep.nowMS + reserveQuick.Milliseconds()
		} else {
			e.lowUntil = (floorDiv(rep.nowMS, e.windowMS) + 1) * e.windowMS
		}
	}
	if rep.slice > 0 {
		e.limit, e.slice, e.used, e.pipe = sp.Limit, rep.slice, 0, rep.pipe
		e.win, e.curr, e.prev, e.gen = rep.window, rep.count, rep.prev, rep.gen
		e.reserved = at
		if e.alg == engine.TokenBucket {
			// The state is the TAT (ms, remainder); the stretch ends slice·W/L ms after it
			// (algo's addCost, exactly).
			e.win, e.curr, e.prev = 0, rep.window, rep.count
			q, rem := algo.MulDiv(rep.slice, sp.Counter.WindowMS, sp.Limit)
			e.endMS, e.endRem = rep.window+q, rep.count+rem
			if e.endRem >= sp.Limit {
				e.endMS, e.endRem = e.endMS+1, e.endRem-sp.Limit
			}
		}
	}
}

// resCall is what a reserve call gives back and asks for, besides the request: the
// counter's generation, the slice wanted, and the give-back's b1..b5 (reserve.lua).
type resCall struct {
	gen, want, b1, b2, b3, b4, b5 int64
}

// resReply is reserve.lua's answer to one request.
type resReply struct {
	pipe                            *respipe.Pipe // the node's connection
	allowed                         bool
	remaining, resetMS, nowMS       int64
	slice, window, count, prev, gen int64
}

// floorDiv is floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

// reserveCall runs one request of lua/reserve.lua: give back, decide sp, reserve.
func (s *Store) reserveCall(ctx context.Context, key string, sp *engine.Spend, c resCall) (resReply, error) {
	s.reserve.calls.Add(1)
	var buf [9]int64
	args := [...]arg{strArg(s.nowArg()), intArg(s.slack), intArg(s.reserve.opts.From), intArg(s.reserve.opts.Share),
		strArg(spendCode(sp)), intArg(sp.Limit), intArg(sp.Counter.WindowMS), intArg(sp.Cost),
		intArg(c.gen), intArg(c.want), intArg(c.b1), intArg(c.b2), intArg(c.b3), intArg(c.b4), intArg(c.b5)}
	r, err := s.runHot(ctx, s.scripts.reserve, buf[:0], []string{key}, args[:]...)
	if err != nil {
		return resReply{}, err
	}
	if len(r) != 9 {
		return resReply{}, errors.New("redisstore: reserve: malformed script reply")
	}
	rep := resReply{allowed: r[0] == 1, remaining: r[1], resetMS: r[2], nowMS: r[3],
		slice: r[4], window: r[5], count: r[6], prev: r[7], gen: r[8]}
	if rep.slice > 0 {
		rep.pipe, _ = s.pipeFor(ctx, key) // the node that answered: the key's, as the call was routed
	}
	return rep, nil
}

// giveBack returns e's unspent slice to Redis (a reserve call that decides nothing) and
// lets the counter go; it waits for any call in flight first. The caller holds no lock.
func (r *reservations) giveBack(ctx context.Context, key string) error {
	sh, e, err := r.settled(ctx, key)
	if err != nil {
		return err
	}
	if e == nil {
		sh.mu.Unlock()
		return nil
	}
	delete(sh.m, key)
	r.n.Add(-1)
	c, back := e.giveBack()
	sh.mu.Unlock()
	if !back {
		return nil
	}
	sp := e.backSpend()
	_, err = r.s.reserveCall(ctx, key, &sp, c)
	return err
}

// pollResets reads the resets made since the last poll, on any instance (the reset log,
// Store.Reset), and gives back the slices of the counters they cleared: a reset made
// elsewhere ends this instance's slice of the counter within a poll.
func (r *reservations) pollResets(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, r.s.opTimeout)
	defer cancel()
	min := strconv.FormatInt(r.resetsSeen, 10) // the last instant again: resets may share it
	log, err := r.s.client.ZRangeByScoreWithScores(pctx, r.s.keys.resetLog(), &redis.ZRangeBy{Min: min, Max: "+inf"}).Result()
	if err != nil {
		if ctx.Err() == nil {
			r.s.log.Debug("redis store: reading the reset log failed", "err", err)
		}
		return
	}
	for _, z := range log {
		at, key := int64(z.Score), z.Member.(string)
		if at == r.resetsSeen && r.resetsAtSeen[key] {
			continue
		}
		_ = r.giveBack(pctx, key)
		if at > r.resetsSeen {
			r.resetsSeen, r.resetsAtSeen = at, map[string]bool{}
		}
		r.resetsAtSeen[key] = true
	}
}

// drop lets the counter go without giving anything back (Reset clears it in Redis).
func (r *reservations) drop(ctx context.Context, key string) error {
	sh, e, err := r.settled(ctx, key)
	if err != nil {
		return err
	}
	if e != nil {
		delete(sh.m, key)
		r.n.Add(-1)
	}
	sh.mu.Unlock()
	return nil
}

// settled returns key's shard, locked, and its entry (nil if none) once no call for it is
// in flight; on an error (ctx ended while waiting) the shard is not locked.
func (r *reservations) settled(ctx context.Context, key string) (*resShard, *resEntry, error) {
	sh := r.shard(key)
	sh.mu.Lock()
	e := sh.m[key]
	for e != nil && e.busy != nil {
		ch := e.busy
		sh.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		sh.mu.Lock()
		e = sh.m[key]
	}
	return sh, e, nil
}

// sweep gives back the slices idle for ReserveOptions.Idle or whose window has ended (a fixed
// window's are dropped: its count no longer matters), and forgets counters not spent on
// for reserveHotWithin. all gives back every slice (Close).
func (r *reservations) sweep(ctx context.Context, all bool) {
	type ret struct {
		key string
		sp  engine.Spend
		c   resCall
		e   *resEntry
		sh  *resShard
		ch  chan struct{}
	}
	var rets []ret
	now := time.Now()
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for key, e := range sh.m {
			if e.busy != nil {
				continue
			}
			idle := now.Sub(e.seen)
			if e.slice > 0 {
				nowMS := r.nowMS(e, now)
				ended := e.ended(nowMS)
				// An ended slice of a fixed window or a bucket has nothing left to give: the
				// window's count no longer matters, the bucket's slots have passed. A sliding
				// window's, of the window just ended, still weighs on the next one; it goes
				// back with the counter's next call, which goes to Redis anyway, or once idle:
				// not all at once at the window's end, where every hot counter's give-back
				// would hold up the requests behind it (a p99 of 135 ms at 3,000/s over
				// 10,000 counters, docs/performance.md).
				weighs := !ended || (e.alg == engine.SlidingWindow && floorDiv(nowMS, e.windowMS) == e.win+1)
				if !all && weighs && idle < r.opts.Idle {
					continue
				}
				if c, back := e.giveBack(); back && weighs {
					ch := make(chan struct{})
					e.busy = ch // the counter's next call waits for the give-back
					rets = append(rets, ret{key: key, sp: e.backSpend(), c: c, e: e, sh: sh, ch: ch})
				}
				e.slice, e.used = 0, 0
				e.want = max(e.want/2, 0)
				continue
			}
			if all || idle > reserveHotWithin {
				delete(sh.m, key)
				r.n.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
	if len(rets) == 0 {
		return
	}
	sem := make(chan struct{}, reserveGiveBacks)
	var wg sync.WaitGroup
	for i := range rets {
		sem <- struct{}{}
		wg.Add(1)
		go func(rt *ret) {
			defer func() { <-sem; wg.Done() }()
			defer func() {
				rt.sh.mu.Lock()
				rt.e.busy = nil
				close(rt.ch)
				rt.sh.mu.Unlock()
			}()
			if _, err := r.s.reserveCall(ctx, rt.key, &rt.sp, rt.c); err != nil && ctx.Err() == nil {
				r.s.log.Debug("redis store: giving back a slice failed; it is spent", "err", err)
			}
		}(&rets[i])
	}
	wg.Wait()
}

// run sweeps every reserveSweepEvery until ctx ends.
func (r *reservations) run(ctx context.Context) {
	t := time.NewTicker(reserveSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.pollResets(ctx)
			r.sweep(ctx, false)
		}
	}
}
