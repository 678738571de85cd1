package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/algo"
	"github.com/leashd/leash/engine/redisstore/respipe"
)

// Reservations (spec §4.13, docs/redis.md "Reservations"): a window counter that this
// instance spends on again and again (hot: ReserveOptions.Hits requests, each within
// reserveHotWithin of the one before) takes, with a request Redis allows, a slice of what
// is left (lua/reserve.lua: at most 1/Share of the remaining and 1/Part of the limit,
// none below From), counted in Redis at once and recorded there as this instance's grant.
// Later requests are decided here, by engine/algo on the counter's state as Redis returned
// it, while the slice covers them, so nothing is admitted that Redis did not count.
//
// A slice is held, not owned, and each rule below is what keeps a verdict from it the one
// Redis would give:
//   - Alive only while Redis is: it decides only within reserveValid of the sending of a
//     call Redis answered, the one that granted it or a later heartbeat (beat: every
//     reserveBeat, the fence log's read, and on a Cluster a ping of every master), and
//     while its connection is up.
//   - Fenced: a reset, or an overdraft denied, while another instance has a grant of the
//     counter logs a fence (lua/fence_add.lua) and answers only reserveFenceWait later:
//     by then every holder has either read the fence and stopped deciding from its slice,
//     or gone past reserveValid since its last answered call. A reset also stops new
//     grants until it is done (the counter's fence key), and deletes the grants, so nothing
//     taken before it is given back after it.
//   - Settled by the holder: every call reports the last grant the holder read and what it
//     spent of it (seq, ack, used): Redis takes the unspent part off, or all of a grant
//     whose reply the holder never read (timed out, cut). A call that reaches Redis after
//     its caller stopped waiting (its deadline, in Redis's clock) decides and grants
//     nothing.
//   - Given back when idle: a slice not spent from for ReserveOptions.Idle goes back
//     (sweep), and all of them at Close; a killed instance strands only its last grants,
//     each at most 1 % of its counter's limit.
//
// Token buckets are decided in Redis: a bucket refills continuously up to its size, so a
// slice of it held here would be refilled a second time in Redis; the exact form, units in
// their own time slots, strands the slots of a slice once another instance spent after it.
//
// A counter's calls to Redis are one at a time while it is followed (requests wait for the
// call in flight, then decide on its slice); a counter without one is spent the usual way
// (Spend's merged call), so a cold or nearly spent counter costs nothing more.

// ReserveOptions tune reservations; the zero value is the production setting.
type ReserveOptions struct {
	// Off decides every request in Redis.
	Off bool
	// From is the least a counter must have left, after a request, to reserve a slice;
	// default 1024.
	From int64
	// Share: a slice is at most 1/Share of what is left; default 16.
	Share int64
	// Part: a slice is at most 1/Part of the limit; default 100, so that an instance
	// killed while holding slices strands at most 1 % of each counter's budget.
	Part int64
	// Hits is how many requests in a row, each within reserveHotWithin of the last, make a
	// counter hot; default 2 (the second request reserves).
	Hits int
	// Idle is how long after a counter's last request its unspent slice goes back;
	// default 1 s.
	Idle time.Duration
}

const (
	// A counter is followed while it is spent on at least every reserveHotWithin; its
	// slice goes back ReserveOptions.Idle (reserveIdle) after the last request, so the
	// unspent budget of an idle instance is the others' again within about 1.25 s.
	reserveHotWithin = time.Second
	reserveIdle      = time.Second
	// reserveValid bounds how long a slice decides after the sending of the last call
	// Redis answered for it (spec §4.13), reserveBeat is how often the heartbeat renews
	// it, and reserveFenceWait how long a fence waits: reserveValid and a margin for the
	// clocks' rates and the fence log's write.
	reserveValid      = 100 * time.Millisecond
	reserveBeat       = 20 * time.Millisecond
	reserveFenceWait  = reserveValid + 20*time.Millisecond
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
	holder string       // this instance's name in the counters' grants
	seq    atomic.Int64 // the last call's seq

	epoch  time.Time    // the monotonic base of the instants below (ns since epoch)
	polled atomic.Int64 // when the last fence-log read Redis answered was sent
	// When the fence log was first read since the beat last started: a read renews only
	// the slices granted by calls sent since then (earlier ones may precede fences that
	// read skipped).
	baseline atomic.Int64
	nodes    sync.Map // Cluster: master address -> *atomic.Int64, when its last answered ping was sent
	// Redis's clock: tms (TIME, ms) was read no later than at (ns since epoch).
	clockMu sync.Mutex
	clockMS int64
	clockAt int64

	fenceSeen int64 // the fence log read so far (the beat's goroutine only); -1: not since the beat started
	local     atomic.Int64
	calls     atomic.Int64
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
	// The slice: units granted (0: none that decides) and units spent from it, of window
	// win; curr and prev are the counter's state without the unspent units.
	slice, used, win, curr, prev int64
	// The grant to settle with the next call: the seq of the last grant read (0: none),
	// with used; unsure when a call's reply was not read (it may have granted).
	gseq   int64
	unsure bool
	fenced bool          // a fence on the counter was read: the slice no longer decides
	fences int64         // fences read on the counter: a grant sent before one never decides
	pipe   *respipe.Pipe // the connection the slice came by
	addr   string        // its node
	sent   int64         // when the call that granted the slice was sent (ns since epoch)
	// The store's clock: baseMS at base, at most latMS old when it arrived (test clock:
	// unused).
	baseMS, latMS int64
	base          time.Time
	// Demand.
	hits int
	seen time.Time // the last request
	// The last call reserved nothing for lack of budget: none is asked for before lowUntil
	// (store clock, ms): the next window.
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
	if o.Part <= 0 {
		o.Part = 100
	}
	if o.Hits <= 0 {
		o.Hits = 2
	}
	if o.Idle <= 0 {
		o.Idle = reserveIdle
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	r := &reservations{s: s, opts: o, seed: maphash.MakeSeed(), holder: hex.EncodeToString(id[:]), epoch: time.Now(), fenceSeen: -1}
	r.polled.Store(-int64(time.Hour))
	r.baseline.Store(-int64(time.Hour))
	for i := range r.shards {
		r.shards[i].m = make(map[string]*resEntry)
	}
	return r
}

func (r *reservations) shard(key string) *resShard {
	return &r.shards[maphash.String(r.seed, key)%reserveShards]
}

// mono is the monotonic clock, in ns since r.epoch.
func (r *reservations) mono() int64 { return int64(time.Since(r.epoch)) }

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
	if alg == engine.TokenBucket {
		return engine.Decision{}, false, nil
	}
	if sp.Overdraft {
		return r.overdraft(ctx, sp, key)
	}
	sh, e, err := r.settled(ctx, key)
	if err != nil {
		return engine.Decision{}, false, err
	}
	now := time.Now()
	if e == nil {
		// A counter followed: one that could ever reserve (a limit From above the cost).
		if sp.Limit-sp.Cost >= r.opts.From && r.n.Load() < reserveMaxEntries {
			r.n.Add(1)
			sh.m[key] = &resEntry{hits: 1, seen: now, windowMS: sp.Counter.WindowMS, alg: alg}
		}
		sh.mu.Unlock()
		return engine.Decision{}, false, nil
	}
	if e.slice > 0 && e.limit == sp.Limit && e.used+sp.Cost <= e.slice && r.live(e) {
		if d, ok := e.local(sp, r.nowMS(e, now)); ok {
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
	reserve := sp.Cost > 0 && sp.Limit-sp.Cost >= r.opts.From && e.hits >= r.opts.Hits
	if reserve && e.lowUntil > 0 && r.estimateMS(e, now) < e.lowUntil {
		reserve = false
	}
	if !reserve && !e.owes() {
		sh.mu.Unlock()
		return engine.Decision{}, false, nil
	}
	want := int64(0)
	if reserve {
		want = e.nextWant(sp, now)
	}
	rep, err := r.call(ctx, sh, e, key, sp, want)
	if err != nil {
		return engine.Decision{}, false, err
	}
	return rep.decision(sp), true, nil
}

// owes reports whether e has a grant to settle in Redis: one read, or one whose reply was
// not read.
func (e *resEntry) owes() bool { return e.gseq != 0 || e.unsure }

// call sends one reserve call for e (locked in sh, which call unlocks): it settles e's
// last grant, decides sp and asks for want units. Requests for the counter wait for it.
func (r *reservations) call(ctx context.Context, sh *resShard, e *resEntry, key string, sp *engine.Spend, want int64) (resReply, error) {
	c := resCall{seq: r.seq.Add(1), ack: e.gseq, used: e.used, want: want}
	e.slice = 0 // it decides nothing more: what it left is settled by this call
	fences := e.fences
	ch := make(chan struct{})
	e.busy = ch
	sh.mu.Unlock()

	sent := r.mono()
	t0 := time.Now()
	rep, err := r.s.reserveCall(ctx, key, sp, c)
	t1 := time.Now()

	sh.mu.Lock()
	e.busy = nil
	close(ch)
	if err == nil && rep.verdict >= 0 {
		e.granted(sp, rep, c, want, sent, t1, t1.Sub(t0))
		if e.fences != fences {
			// A fence was read while the call was out: its grant may be from before the
			// fence, so it decides nothing (the next call settles it).
			e.fenced, e.slice = true, 0
		}
	} else {
		// The call may have run without its reply read: the next call settles its grant
		// (Redis knows it as newer than the one acked).
		e.unsure = true
	}
	sh.mu.Unlock()
	if err == nil && rep.verdict < 0 {
		err = errReserveLate
	}
	return rep, err
}

// errReserveLate is a reserve call that Redis ran after its caller's deadline, or after a
// later call of the same instance: it decided nothing.
var errReserveLate = errors.New("redisstore: reserve: the call reached Redis too late")

// overdraft decides an overdraft spend (spec §4.12) in Redis, with this instance's slice
// of the counter settled first; when it is denied (and so counted over the limit) while
// another instance has a grant of the counter, it answers only once no slice taken before
// it can decide (fence).
func (r *reservations) overdraft(ctx context.Context, sp *engine.Spend, key string) (engine.Decision, bool, error) {
	sh, e, err := r.settled(ctx, key)
	if err != nil {
		return engine.Decision{}, false, err
	}
	var rep resReply
	if e != nil {
		rep, err = r.call(ctx, sh, e, key, sp, 0)
	} else {
		sh.mu.Unlock()
		rep, err = r.s.reserveCall(ctx, key, sp, resCall{seq: r.seq.Add(1)})
		if err == nil && rep.verdict < 0 {
			err = errReserveLate
		}
	}
	if err != nil {
		return engine.Decision{}, false, err
	}
	if !rep.allowed() && rep.others > 0 {
		if err := r.s.fence(ctx, key); err != nil {
			return engine.Decision{}, false, err
		}
	}
	return rep.decision(sp), true, nil
}

// fence logs a fence on the counter key and waits reserveFenceWait: then no instance
// decides from a slice of it taken before the fence (each one's beat reads the log; one
// that could not read it has gone past reserveValid). Any instance may need it, with
// reservations on or off: another may hold a slice.
func (s *Store) fence(ctx context.Context, key string) error {
	if _, err := s.eval(s.opCtx(ctx), s.scripts.fenceAdd, []string{s.keys.fenceLog(), s.keys.fenceSeq()}, key); err != nil {
		return err
	}
	t := time.NewTimer(reserveFenceWait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// live reports whether e's slice may decide now: it was not fenced, its connection is up,
// the last call to Redis succeeded (spec §3.8), and Redis answered a call sent within
// reserveValid: the grant's own, or the beat's (the fence log's read, and on a Cluster a
// ping of the slice's master).
func (r *reservations) live(e *resEntry) bool {
	if e.fenced || !r.s.answering() || (e.pipe != nil && !e.pipe.Open()) {
		return false
	}
	since := e.sent
	if e.sent >= r.baseline.Load() {
		since = max(since, r.polled.Load())
	}
	if r.s.cluster != nil {
		node := int64(-1 << 62)
		if v, ok := r.nodes.Load(e.addr); ok {
			node = v.(*atomic.Int64).Load()
		}
		since = min(since, max(e.sent, node))
	}
	return r.mono() < since+int64(reserveValid)
}

// estimateMS is nowMS for an entry that may hold no clock yet (then: Redis's last known
// time is unknown, and lowUntil, 0 then, is not in force).
func (r *reservations) estimateMS(e *resEntry, now time.Time) int64 {
	if r.s.clock == nil && e.base.IsZero() {
		return -1
	}
	return r.nowMS(e, now)
}

// local decides sp from e's slice at nowMS, when the slice covers it in its window.
func (e *resEntry) local(sp *engine.Spend, nowMS int64) (engine.Decision, bool) {
	if floorDiv(nowMS, e.windowMS) != e.win {
		return engine.Decision{}, false
	}
	var res algo.Result
	if e.alg == engine.SlidingWindow {
		var st algo.SlidingState
		st, res = algo.SlidingWindow(algo.SlidingState{Window: e.win, Curr: e.curr, Prev: e.prev}, nowMS, sp.Limit, e.windowMS, sp.Cost)
		if !res.Allowed {
			return engine.Decision{}, false
		}
		e.curr = st.Curr
	} else {
		var st algo.FixedState
		st, res = algo.FixedWindow(algo.FixedState{Window: e.win, Count: e.curr}, nowMS, sp.Limit, e.windowMS, sp.Cost)
		if !res.Allowed {
			return engine.Decision{}, false
		}
		e.curr = st.Count
	}
	e.used += sp.Cost
	return engine.Decision{Allowed: true, Limit: sp.Limit, Remaining: res.Remaining, ResetMS: res.ResetMS, NowMS: nowMS}, true
}

// backSpend is the request of a give-back call: nothing spent, the slice's counter and limit.
func (e *resEntry) backSpend() engine.Spend {
	return engine.Spend{Counter: engine.Counter{Algorithm: e.alg, WindowMS: e.windowMS}, Limit: max(e.limit, 1)}
}

// ended reports whether e's slice can no longer cover a request at nowMS: its window has
// passed.
func (e *resEntry) ended(nowMS int64) bool { return floorDiv(nowMS, e.windowMS) != e.win }

// nextWant is the slice to ask for: reserveFirstWant costs at first, twice the last when
// that lasted under reserveQuick, at most reserveMaxWant units (and never below the cost).
func (e *resEntry) nextWant(sp *engine.Spend, now time.Time) int64 {
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

// granted records on e the reply to call c, sent at sent: its grant, if any, is the one to
// settle next.
func (e *resEntry) granted(sp *engine.Spend, rep resReply, c resCall, want, sent int64, at time.Time, took time.Duration) {
	e.baseMS, e.base, e.latMS = rep.nowMS, at, (took.Nanoseconds()+999_999)/1_000_000
	e.unsure, e.fenced = false, false
	e.gseq, e.used, e.slice = 0, 0, 0
	e.lowUntil = 0
	if want > 0 && rep.slice == 0 {
		e.lowUntil = (floorDiv(rep.nowMS, e.windowMS) + 1) * e.windowMS
	}
	if rep.slice > 0 {
		e.gseq, e.limit, e.slice, e.pipe, e.addr, e.sent = c.seq, sp.Limit, rep.slice, rep.pipe, rep.addr, sent
		e.win, e.curr, e.prev = rep.window, rep.count, rep.prev
		e.reserved = at
	}
}

// resCall is what a reserve call settles and asks for, besides the request: its seq, the
// grant it settles (ack, 0 for none) with the units spent of it, and the slice wanted.
type resCall struct {
	seq, ack, used, want int64
}

// resReply is reserve.lua's answer to one request.
type resReply struct {
	pipe                       *respipe.Pipe // the node's connection
	addr                       string
	verdict                    int64 // 1 allowed, 0 denied, -1 stale, -2 late
	remaining, resetMS, nowMS  int64
	slice, window, count, prev int64
	others                     int64 // other instances with a grant of the counter
}

func (rep resReply) allowed() bool { return rep.verdict == 1 }

func (rep resReply) decision(sp *engine.Spend) engine.Decision {
	return engine.Decision{Allowed: rep.allowed(), Limit: sp.Limit, Remaining: rep.remaining, ResetMS: rep.resetMS, NowMS: rep.nowMS}
}

// floorDiv is floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

// reserveCall runs one request of lua/reserve.lua: settle, decide sp, reserve.
func (s *Store) reserveCall(ctx context.Context, key string, sp *engine.Spend, c resCall) (resReply, error) {
	r := s.reserve
	r.calls.Add(1)
	ctx = s.opCtx(ctx)
	var buf [10]int64
	args := [...]arg{strArg(s.nowArg()), intArg(s.slack), intArg(r.opts.From), intArg(r.opts.Share), intArg(r.opts.Part), strArg(r.holder),
		strArg(spendCode(sp)), intArg(sp.Limit), intArg(sp.Counter.WindowMS), intArg(sp.Cost),
		intArg(c.seq), intArg(c.ack), intArg(c.used), intArg(c.want), intArg(r.deadline(ctx))}
	res, err := s.runHot(ctx, s.scripts.reserve, buf[:0], []string{key}, args[:]...)
	if err != nil {
		return resReply{}, err
	}
	if len(res) != 10 {
		return resReply{}, errors.New("redisstore: reserve: malformed script reply")
	}
	r.sawClock(res[9])
	rep := resReply{verdict: res[0], remaining: res[1], resetMS: res[2], nowMS: res[3],
		slice: res[4], window: res[5], count: res[6], prev: res[7], others: res[8]}
	if rep.slice > 0 {
		rep.pipe, _ = s.pipeFor(ctx, key) // the node that answered: the key's, as the call was routed
		if rep.pipe != nil {
			rep.addr = rep.pipe.Addr()
		}
	}
	return rep, nil
}

// sawClock notes Redis's clock, tms (TIME, ms), read by a call whose reply arrived now.
func (r *reservations) sawClock(tms int64) {
	at := r.mono()
	r.clockMu.Lock()
	r.clockMS, r.clockAt = tms, at
	r.clockMu.Unlock()
}

// deadline is the instant, on Redis's clock, after which a call made now with ctx would
// no longer have its reply read: ctx's deadline, less a tenth of the time left (at least
// 2 ms) for the reply's way back; 0 (none) before Redis's clock was read.
func (r *reservations) deadline(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	r.clockMu.Lock()
	tms, at := r.clockMS, r.clockAt
	r.clockMu.Unlock()
	if !ok || tms == 0 {
		return 0
	}
	now := r.mono()
	left := time.Until(dl)
	left -= max(left/10, 2*time.Millisecond)
	// Redis's clock now is at least tms plus the time since it was read.
	return tms + (now-at)/int64(time.Millisecond) + max(left.Milliseconds(), 0)
}

// giveBack settles key's grant in Redis and lets the counter go; it waits for any call in
// flight first. The caller holds no lock.
func (r *reservations) giveBack(ctx context.Context, key string) error {
	sh, e, err := r.settled(ctx, key)
	if err != nil {
		return err
	}
	if e == nil {
		sh.mu.Unlock()
		return nil
	}
	if !e.owes() {
		delete(sh.m, key)
		r.n.Add(-1)
		sh.mu.Unlock()
		return nil
	}
	sp := e.backSpend()
	if _, err := r.call(ctx, sh, e, key, &sp, 0); err != nil {
		return err
	}
	sh.mu.Lock()
	if cur := sh.m[key]; cur == e && e.busy == nil && !e.owes() {
		delete(sh.m, key)
		r.n.Add(-1)
	}
	sh.mu.Unlock()
	return nil
}

// drop lets the counter go without settling anything (Reset deletes its grants in Redis).
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

// beat reads the fence log (and, on a Cluster, pings every master) and renews the slices'
// life by what Redis answered: a fence read stops this instance's slice of its counter
// before the renewal counts. Entries lost from the log stop every slice.
func (r *reservations) beat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, reserveValid)
	defer cancel()
	var wg sync.WaitGroup
	if r.s.cluster != nil && r.n.Load() > 0 {
		wg.Go(func() {
			_ = r.s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
				sent := r.mono()
				if err := c.Ping(ctx).Err(); err != nil {
					return err
				}
				v, _ := r.nodes.LoadOrStore(c.Options().Addr, new(atomic.Int64))
				v.(*atomic.Int64).Store(sent)
				return nil
			})
		})
	}
	defer wg.Wait()
	sent := r.mono()
	seen := r.fenceSeen
	res, err := r.s.eval(ctx, r.s.scripts.fencePoll, []string{r.s.keys.fenceLog(), r.s.keys.fenceSeq()}, seen)
	if err != nil {
		return
	}
	vals, err := res.Slice()
	if err != nil || len(vals) < 3 {
		return
	}
	last, _ := vals[0].(int64)
	missed, _ := vals[1].(int64)
	if tms, ok := vals[2].(int64); ok {
		r.sawClock(tms)
	}
	switch {
	case seen < 0:
		// The first read since the beat started: it skips the fences logged before, so it
		// renews only the slices granted from now on.
		r.baseline.Store(sent)
	case missed != 0:
		r.fenceAll()
	default:
		for _, v := range vals[3:] {
			if m, ok := v.(string); ok {
				if _, key, ok := strings.Cut(m, ":"); ok {
					r.fenceOne(key)
				}
			}
		}
	}
	r.fenceSeen = last
	r.polled.Store(sent)
}

// fenceOne stops this instance's slice of counter key; its grant is settled by the
// counter's next call, or the next sweep.
func (r *reservations) fenceOne(key string) {
	sh := r.shard(key)
	sh.mu.Lock()
	if e := sh.m[key]; e != nil {
		e.fenced, e.slice = true, 0
		e.fences++
	}
	sh.mu.Unlock()
}

// fenceAll stops every slice (fences were missed).
func (r *reservations) fenceAll() {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			e.fenced, e.slice = true, 0
			e.fences++
		}
		sh.mu.Unlock()
	}
}

// sweep settles the grants of counters idle for ReserveOptions.Idle, fenced, or whose
// reply was not read, and forgets counters not spent on for reserveHotWithin. A slice whose
// window has ended decides nothing more: a fixed window's has nothing to give back; a
// sliding window's, of the window just ended, still weighs on the next one and goes back
// with the counter's next call or once idle (not every hot counter's at once at the
// window's end, where the give-backs would hold up the requests behind them: a p99 of
// 135 ms at 3,000/s over 10,000 counters, docs/performance.md). all settles every grant
// (Close).
func (r *reservations) sweep(ctx context.Context, all bool) {
	type ret struct {
		key string
		sh  *resShard
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
			if e.slice > 0 && e.alg == engine.FixedWindow && e.ended(r.nowMS(e, now)) {
				e.slice = 0 // nothing to give back: its window's count no longer matters
			}
			if e.owes() && (all || e.fenced || e.unsure || idle >= r.opts.Idle) {
				rets = append(rets, ret{key: key, sh: sh})
				continue
			}
			if !e.owes() && (all || idle > reserveHotWithin) {
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
	for _, rt := range rets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := r.giveBack(ctx, rt.key); err != nil && ctx.Err() == nil {
				r.s.log.Debug("redis store: giving back a slice failed; it is settled by the next call", "err", err)
			}
		})
	}
	wg.Wait()
}

// run beats every reserveBeat while counters are followed, and sweeps every
// reserveSweepEvery, until ctx ends. While none is followed there is no beat: the next one
// starts reading the fence log afresh.
func (r *reservations) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		t := time.NewTicker(reserveSweepEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				r.sweep(ctx, false)
			}
		}
	})
	t := time.NewTicker(reserveBeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if r.n.Load() == 0 {
				r.fenceSeen = -1
				continue
			}
			r.beat(ctx)
		}
	}
}
