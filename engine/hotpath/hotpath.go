// Package hotpath decides hot window counters' requests in the process, from slices of
// their budget that a store which can reserve (the Redis store, through Port) counted for
// this instance in advance, and never changes a verdict by it (spec §4.13, docs/redis.md
// "Reservations"). Reservations wraps a store's Decider; the memory store needs none.
//
// A window counter that this instance spends on again and again (hot: Options.Hits
// requests, each within hotWithin of the one before) takes, with a request the store
// allows, a slice of what is left (at most 1/Share of the remaining and 1/Part of the
// limit, none below From), counted in the store at once and recorded there as this
// instance's grant. Later requests are decided here, by engine/algo on the counter's state
// as the store returned it, while the slice covers them, so nothing is admitted that the
// store did not count.
//
// A slice is held, not owned, and each rule below is what keeps a verdict from it the one
// the store would give:
//   - Alive only while the store is: it decides only within Options.Valid of the sending
//     of a call the store answered, the one that granted it or a later heartbeat (beat:
//     every Options.Beat, the fence log's read, and on several nodes a ping of each), and
//     while its connection is up.
//   - Fenced: a reset, or an overdraft denied, while another instance has a grant of the
//     counter logs a fence (Port.Fence) and answers only once every holder has either read
//     it and stopped deciding from its slice, or gone Options.Valid without an answer.
//   - Settled by the holder: every call reports the last grant the holder read and what it
//     spent of it (Call.Seq, Ack, Used): the store takes the unspent part off, or all of a
//     grant whose reply the holder never read (timed out, cut). A call that reaches the
//     store after its caller stopped waiting decides and grants nothing.
//   - Given back when idle: a slice not spent from for Options.Idle goes back (sweep), and
//     all of them at Close; a killed instance strands only its last grants, each at most
//     1/Part of its counter's limit.
//
// Token buckets are decided in the store: a bucket refills continuously up to its size, so
// a slice of it held here would be refilled a second time there; the exact form, units in
// their own time slots, strands the slots of a slice once another instance spent after it.
//
// A counter's calls to the store are one at a time while it is followed (requests wait for
// the call in flight, then decide on its slice); a counter without one is spent the usual
// way (the store's Spend), so a cold or nearly spent counter costs nothing more.
package hotpath

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/algo"
)

// Options tune reservations; the zero value is the production setting.
type Options struct {
	// From is the least a counter must have left, after a request, to reserve a slice;
	// default 1024.
	From int64
	// Share: a slice is at most 1/Share of what is left; default 16.
	Share int64
	// Part: a slice is at most 1/Part of the limit; default 100, so that an instance
	// killed while holding slices strands at most 1 % of each counter's budget.
	Part int64
	// Hits is how many requests in a row, each within hotWithin of the last, make a
	// counter hot; default 2 (the second request reserves).
	Hits int
	// Idle is how long after a counter's last request its unspent slice goes back;
	// default 1 s.
	Idle time.Duration
	// Clock, when set, is the store's test clock (tests only): local decisions read it.
	Clock engine.Clock
	// Logger receives the sweeper's failures (debug); nil discards them.
	Logger *slog.Logger
}

const (
	// A counter is followed while it is spent on at least every hotWithin; its slice goes
	// back Options.Idle (1 s) after the last request, so the unspent budget of an idle
	// instance is the others' again within about 1.25 s.
	hotWithin = time.Second
	idle      = time.Second
	// Valid bounds how long a slice decides after the sending of the last call the store
	// answered for it (spec §4.13), and Beat is how often the heartbeat renews it. A fence
	// (Port.Fence) waits Valid and a margin.
	Valid        = 100 * time.Millisecond
	Beat         = 20 * time.Millisecond
	quick        = time.Second // a slice spent faster than this makes the next one twice as big
	sweepEvery   = 250 * time.Millisecond
	firstWant    = 32      // the first slice asked for, in costs
	maxWant      = 1 << 16 // units
	shards       = 64
	maxEntries   = 1 << 17 // counters followed, over all shards
	giveBackRuns = 64      // give-back calls in flight at once
)

// Reservations decides hot window counters from slices and everything else through the
// Decider it wraps. Close gives every slice back.
type Reservations struct {
	engine.Decider
	p      Port
	opts   Options
	log    *slog.Logger
	seed   maphash.Seed
	shards [shards]shard
	n      atomic.Int64 // counters followed, over all shards
	holder string       // this instance's name in the counters' grants
	seq    atomic.Int64 // the last call's seq

	epoch  time.Time    // the monotonic base of the instants below (ns since epoch)
	polled atomic.Int64 // when the last fence-log read the store answered was sent
	// When the fence log was first read since the beat last started: a read renews only
	// the slices granted by calls sent since then (earlier ones may precede fences that
	// read skipped).
	baseline atomic.Int64
	nodes    sync.Map // several nodes: name -> *atomic.Int64, when its last answered ping was sent

	fenceSeen int64 // the fence log read so far (the beat's goroutine only); -1: not since the beat started
	local     atomic.Int64
	calls     atomic.Int64
	sweeps    atomic.Int64 // the sweeper's rounds finished

	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

type shard struct {
	mu sync.Mutex
	m  map[string]*entry
}

// entry is one counter: its slice, if any, and how often it is spent on. Its fields are
// guarded by its shard's mutex.
type entry struct {
	limit, windowMS int64
	alg             engine.Algorithm
	// The slice: units granted (0: none that decides) and units spent from it, of window
	// win; curr and prev are the counter's state without the unspent units.
	slice, used, win, curr, prev int64
	// The grant to settle with the next call: the seq of the last grant read (0: none),
	// with used; unsure when a call's reply was not read (it may have granted).
	gseq   int64
	unsure bool
	fenced bool  // a fence on the counter was read: the slice no longer decides
	fences int64 // fences read on the counter: a grant sent before one never decides
	conn   Conn  // the connection the slice came by
	sent   int64 // when the call that granted the slice was sent (ns since epoch)
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

// New wraps next, the Decider of the store behind p, with reservations, and starts their
// heartbeat and sweeper; Close stops them.
func New(next engine.Decider, p Port, o Options) *Reservations {
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
		o.Idle = idle
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	r := &Reservations{Decider: next, p: p, opts: o, log: log, seed: maphash.MakeSeed(), holder: hex.EncodeToString(id[:]),
		epoch: time.Now(), fenceSeen: -1}
	r.polled.Store(-int64(time.Hour))
	r.baseline.Store(-int64(time.Hour))
	for i := range r.shards {
		r.shards[i].m = make(map[string]*entry)
	}
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	r.wg.Go(func() { r.run(ctx) })
	return r
}

// Stats counts, since New, the requests decided from a slice and the calls to the store
// that reserved or gave back.
func (r *Reservations) Stats() (local, calls int64) { return r.local.Load(), r.calls.Load() }

// Sweeps counts the sweeper's rounds finished since New (not Close's last one): a test
// waits on it for rounds to have run, where a sleep would hope they had.
func (r *Reservations) Sweeps() int64 { return r.sweeps.Load() }

// Close stops the heartbeat and the sweeper and gives every slice back, within ctx. It is
// idempotent.
func (r *Reservations) Close(ctx context.Context) {
	r.closeOnce.Do(func() {
		r.stop()
		r.wg.Wait()
		r.sweep(ctx, true)
	})
}

func (r *Reservations) shard(key string) *shard {
	return &r.shards[maphash.String(r.seed, key)%shards]
}

// mono is the monotonic clock, in ns since r.epoch.
func (r *Reservations) mono() int64 { return int64(time.Since(r.epoch)) }

// nowMS is the store's clock for a local decision on e: the test clock, or the reply's
// clock advanced by the time since, plus the call's latency, so it is never behind the
// store.
func (r *Reservations) nowMS(e *entry, now time.Time) int64 {
	if r.opts.Clock != nil {
		return r.opts.Clock.Now().UnixMilli()
	}
	return e.baseMS + now.Sub(e.base).Milliseconds() + e.latMS
}

// Spend decides sp from this instance's slice of its counter when it can, else through
// the store (spec §4.13).
func (r *Reservations) Spend(ctx context.Context, sp engine.Spend) (engine.Decision, error) {
	if err := sp.Validate(); err != nil {
		return engine.Decision{}, err
	}
	if sp.Counter.Algorithm == engine.TokenBucket {
		return r.Decider.Spend(ctx, sp)
	}
	key := r.p.CounterKey(sp.Counter)
	var (
		d   engine.Decision
		ok  bool
		err error
	)
	if sp.Overdraft {
		d, ok, err = r.overdraft(ctx, &sp, key)
	} else {
		d, ok, err = r.spend(ctx, &sp, key)
	}
	if ok || err != nil {
		return d, err
	}
	return r.p.SpendKey(ctx, key, sp) // validated above, its key made once
}

// SpendAll settles this instance's slices of the counters first, so the store decides
// them on the counts as they are.
func (r *Reservations) SpendAll(ctx context.Context, spends []engine.Spend, out []engine.Decision) error {
	for i := range spends {
		if spends[i].Counter.Algorithm == engine.TokenBucket {
			continue
		}
		if err := r.giveBack(ctx, r.p.CounterKey(spends[i].Counter)); err != nil {
			return err
		}
	}
	return r.Decider.SpendAll(ctx, spends, out)
}

// Reset settles this instance's slice of c first (so the store needs no fence for it),
// then resets c in the store, which fences the other holders' slices.
func (r *Reservations) Reset(ctx context.Context, c engine.Counter) (bool, error) {
	if c.Algorithm != engine.TokenBucket {
		if err := r.giveBack(ctx, r.p.CounterKey(c)); err != nil {
			return false, err
		}
	}
	return r.Decider.Reset(ctx, c)
}

// spend decides sp on counter key: ok false means the store's Spend is to decide it.
func (r *Reservations) spend(ctx context.Context, sp *engine.Spend, key string) (d engine.Decision, ok bool, err error) {
	sh, e, err := r.settled(ctx, key)
	if err != nil {
		return engine.Decision{}, false, err
	}
	now := time.Now()
	if e == nil {
		// A counter followed: one that could ever reserve (a limit From above the cost).
		if sp.Limit-sp.Cost >= r.opts.From && r.n.Load() < maxEntries {
			r.n.Add(1)
			sh.m[key] = &entry{hits: 1, seen: now, windowMS: sp.Counter.WindowMS, alg: sp.Counter.Algorithm}
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
	if now.Sub(e.seen) <= hotWithin {
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
	return decision(sp, rep), true, nil
}

// owes reports whether e has a grant to settle in the store: one read, or one whose
// reply was not read.
func (e *entry) owes() bool { return e.gseq != 0 || e.unsure }

// call sends one reserve call for e (locked in sh, which call unlocks): it settles e's
// last grant, decides sp and asks for want units. Requests for the counter wait for it.
func (r *Reservations) call(ctx context.Context, sh *shard, e *entry, key string, sp *engine.Spend, want int64) (Reply, error) {
	c := r.newCall(e.gseq, e.used, want)
	e.slice = 0 // it decides nothing more: what it left is settled by this call
	fences := e.fences
	ch := make(chan struct{})
	e.busy = ch
	sh.mu.Unlock()

	sent := r.mono()
	t0 := time.Now()
	rep, err := r.reserve(ctx, key, sp, c)
	t1 := time.Now()

	sh.mu.Lock()
	e.busy = nil
	close(ch)
	if err == nil {
		e.granted(sp, rep, c, want, sent, t1, t1.Sub(t0))
		if e.fences != fences {
			// A fence was read while the call was out: its grant may be from before the
			// fence, so it decides nothing (the next call settles it).
			e.fenced, e.slice = true, 0
		}
	} else {
		// The call may have run without its reply read: the next call settles its grant
		// (the store knows it as newer than the one acked).
		e.unsure = true
	}
	sh.mu.Unlock()
	return rep, err
}

// newCall is a reserve call of this instance: the next seq, settling grant ack (used units
// of it), wanting want.
func (r *Reservations) newCall(ack, used, want int64) Call {
	return Call{Holder: r.holder, Seq: r.seq.Add(1), Ack: ack, Used: used, Want: want,
		From: r.opts.From, Share: r.opts.Share, Part: r.opts.Part}
}

// reserve runs one reserve call; a call that decided nothing (too late) is an error.
func (r *Reservations) reserve(ctx context.Context, key string, sp *engine.Spend, c Call) (Reply, error) {
	r.calls.Add(1)
	rep, err := r.p.Reserve(ctx, key, sp, c)
	if err == nil && rep.Verdict < 0 {
		err = errLate
	}
	return rep, err
}

// errLate is a reserve call that the store ran after its caller's deadline, or after a
// later call of the same instance: it decided nothing.
var errLate = errors.New("hotpath: the reserve call reached the store too late")

// overdraft settles this instance's slice of the counter, then has the store decide the
// overdraft spend (spec §4.12): the store fences the other instances' slices when it is
// denied (Port.Fence).
func (r *Reservations) overdraft(ctx context.Context, sp *engine.Spend, key string) (engine.Decision, bool, error) {
	if err := r.giveBack(ctx, key); err != nil {
		return engine.Decision{}, false, err
	}
	return engine.Decision{}, false, nil
}

func decision(sp *engine.Spend, rep Reply) engine.Decision {
	return engine.Decision{Allowed: rep.Verdict == 1, Limit: sp.Limit, Remaining: rep.Remaining, ResetMS: rep.ResetMS, NowMS: rep.NowMS}
}

// live reports whether e's slice may decide now: it was not fenced, its connection is up,
// the store's last call was answered (spec §3.8), and the store answered a call sent
// within Valid: the grant's own, or the beat's (the fence log's read, and on several nodes
// a ping of the slice's).
func (r *Reservations) live(e *entry) bool {
	if e.fenced || !r.p.Answering() || (e.conn != nil && !e.conn.Open()) {
		return false
	}
	since := e.sent
	if e.sent >= r.baseline.Load() {
		since = max(since, r.polled.Load())
	}
	if r.p.MultiNode() {
		// The slice's node answered since: a ping, or any call on its connection.
		node := int64(-1 << 62)
		if e.conn != nil {
			if v, ok := r.nodes.Load(e.conn.Addr()); ok {
				node = v.(*atomic.Int64).Load()
			}
			if at := e.conn.AnsweredAt(); !at.IsZero() {
				node = max(node, int64(at.Sub(r.epoch)))
			}
		}
		since = min(since, max(e.sent, node))
	}
	return r.mono() < since+int64(Valid)
}

// estimateMS is nowMS for an entry that may hold no clock yet (then: the store's last
// known time is unknown, and lowUntil, 0 then, is not in force).
func (r *Reservations) estimateMS(e *entry, now time.Time) int64 {
	if r.opts.Clock == nil && e.base.IsZero() {
		return -1
	}
	return r.nowMS(e, now)
}

// local decides sp from e's slice at nowMS, when the slice covers it in its window.
func (e *entry) local(sp *engine.Spend, nowMS int64) (engine.Decision, bool) {
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

// backSpend is the request of a give-back call: nothing spent, the slice's counter and
// limit.
func (e *entry) backSpend() engine.Spend {
	return engine.Spend{Counter: engine.Counter{Algorithm: e.alg, WindowMS: e.windowMS}, Limit: max(e.limit, 1)}
}

// ended reports whether e's slice can no longer cover a request at nowMS: its window has
// passed.
func (e *entry) ended(nowMS int64) bool { return floorDiv(nowMS, e.windowMS) != e.win }

// nextWant is the slice to ask for: firstWant costs at first, twice the last when that
// lasted under quick, at most maxWant units (and never below the cost).
func (e *entry) nextWant(sp *engine.Spend, now time.Time) int64 {
	cost := sp.Cost
	switch {
	case e.want == 0:
		e.want = firstWant * cost
	case !e.reserved.IsZero() && now.Sub(e.reserved) < quick:
		e.want *= 2
	}
	e.want = min(max(e.want, cost), maxWant)
	return e.want
}

// granted records on e the reply to call c, sent at sent: its grant, if any, is the one
// to settle next.
func (e *entry) granted(sp *engine.Spend, rep Reply, c Call, want, sent int64, at time.Time, took time.Duration) {
	e.baseMS, e.base, e.latMS = rep.NowMS, at, (took.Nanoseconds()+999_999)/1_000_000
	e.unsure, e.fenced = false, false
	e.gseq, e.used, e.slice = 0, 0, 0
	e.lowUntil = 0
	if want > 0 && rep.Slice == 0 {
		e.lowUntil = (floorDiv(rep.NowMS, e.windowMS) + 1) * e.windowMS
	}
	if rep.Slice > 0 {
		e.gseq, e.limit, e.slice, e.conn, e.sent = c.Seq, sp.Limit, rep.Slice, rep.Conn, sent
		e.win, e.curr, e.prev = rep.Window, rep.Count, rep.Prev
		e.reserved = at
	}
}

// floorDiv is floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

// giveBack settles key's grant in the store and lets the counter go; it waits for any
// call in flight first. The caller holds no lock.
func (r *Reservations) giveBack(ctx context.Context, key string) error {
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

// settled returns key's shard, locked, and its entry (nil if none) once no call for it
// is in flight; on an error (ctx ended while waiting) the shard is not locked.
func (r *Reservations) settled(ctx context.Context, key string) (*shard, *entry, error) {
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

// beat reads the fence log (and, on several nodes, pings each) and renews the slices'
// life by what the store answered: a fence read stops this instance's slice of its
// counter before the renewal counts. Entries lost from the log stop every slice.
func (r *Reservations) beat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, Valid)
	defer cancel()
	var wg sync.WaitGroup
	if r.p.MultiNode() {
		wg.Go(func() {
			sent := r.mono()
			r.p.PingNodes(ctx, func(node string) {
				v, _ := r.nodes.LoadOrStore(node, new(atomic.Int64))
				v.(*atomic.Int64).Store(sent)
			})
		})
	}
	defer wg.Wait()
	sent := r.mono()
	seen := r.fenceSeen
	f, err := r.p.ReadFences(ctx, seen)
	if err != nil {
		return
	}
	switch {
	case seen < 0:
		// The first read since the beat started: it skips the fences logged before, so it
		// renews only the slices granted from now on.
		r.baseline.Store(sent)
	case f.Missed:
		r.fenceAll()
	default:
		for _, key := range f.Keys {
			r.fenceOne(key)
		}
	}
	r.fenceSeen = f.Last
	r.polled.Store(sent)
}

// fenceOne stops this instance's slice of counter key; its grant is settled by the
// counter's next call, or the next sweep.
func (r *Reservations) fenceOne(key string) {
	sh := r.shard(key)
	sh.mu.Lock()
	if e := sh.m[key]; e != nil {
		e.fenced, e.slice = true, 0
		e.fences++
	}
	sh.mu.Unlock()
}

// fenceAll stops every slice (fences were missed).
func (r *Reservations) fenceAll() {
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

// sweep settles the grants of counters idle for Options.Idle, fenced, or whose reply was
// not read, and forgets counters not spent on for hotWithin. A slice whose window has
// ended decides nothing more: a fixed window's has nothing to give back; a sliding
// window's, of the window just ended, still weighs on the next one and goes back with the
// counter's next call or once idle (not every hot counter's at once at the window's end,
// where the give-backs would hold up the requests behind them: a p99 of 135 ms at 3,000/s
// over 10,000 counters, docs/performance.md). all settles every grant (Close).
func (r *Reservations) sweep(ctx context.Context, all bool) {
	var keys []string
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
				keys = append(keys, key)
				continue
			}
			if !e.owes() && (all || idle > hotWithin) {
				delete(sh.m, key)
				r.n.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
	sem := make(chan struct{}, giveBackRuns)
	var wg sync.WaitGroup
	for _, key := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := r.giveBack(ctx, key); err != nil && ctx.Err() == nil {
				r.log.Debug("hot path: giving back a slice failed; it is settled by the next call", "err", err)
			}
		})
	}
	wg.Wait()
}

// run beats every Beat while counters are followed, and sweeps every sweepEvery, until
// ctx ends. While none is followed there is no beat: the next one reads the fence log
// afresh.
func (r *Reservations) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				r.sweep(ctx, false)
				r.sweeps.Add(1)
			}
		}
	})
	t := time.NewTicker(Beat)
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

// Over is s with r deciding its Spend, SpendAll and Reset: the store as leash serve uses
// it with reservations. Its Close gives r's slices back, then closes s.
func Over(s engine.Store, r *Reservations) engine.Store { return over{s, r} }

type over struct {
	engine.Store
	r *Reservations
}

func (o over) Spend(ctx context.Context, sp engine.Spend) (engine.Decision, error) {
	return o.r.Spend(ctx, sp)
}

func (o over) SpendAll(ctx context.Context, spends []engine.Spend, out []engine.Decision) error {
	return o.r.SpendAll(ctx, spends, out)
}

func (o over) Reset(ctx context.Context, c engine.Counter) (bool, error) { return o.r.Reset(ctx, c) }

func (o over) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o.r.Close(ctx)
	return o.Store.Close()
}
