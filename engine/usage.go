package engine

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Usage is counted in process and written to the store in batches, off the request path
// (spec §7.3), so that a decision costs one store operation:
//
//   - record adds one decision to one of several maps keyed by (account, namespace, day),
//     picked at random so concurrent decisions rarely share a lock;
//   - Flush moves the map into a batch with a unique id and applies it with AddUsage. A
//     failed batch is kept and sent again, with the same id, before anything newer, so a
//     store that already applied it ignores the repeat: nothing is lost or counted twice;
//   - each account's month total is the store's total (refreshed on every flush) plus what
//     this instance counted since. The hard cap is enforced from it, so with several
//     instances the cap is overshot by at most what they serve in about two flush intervals.

const usageShards = 32

type usageShard struct {
	mu     sync.Mutex
	counts map[UsageKey]*UsageCount // pointers: one map lookup per decision
	capped map[string]int64         // per account with a hard cap: decisions also added to accountTotal.local
	_      [32]byte                 // keep shards on separate cache lines
}

// accountTotal is one account's month total as this instance knows it.
type accountTotal struct {
	stored atomic.Int64 // the store's total at the last refresh (plus batches flushed since)
	local  atomic.Int64 // counted here and not yet flushed
}

// usageTally is the usage this instance counted and has not yet flushed, and each
// account's month total as it knows it.
type usageTally struct {
	shards    [usageShards]usageShard
	totalsMu  sync.RWMutex
	totals    map[string]*accountTotal // by account id
	lastNowMS atomic.Int64
	instance  string
	batchSeq  atomic.Uint64

	flushMu  sync.Mutex // one flush at a time; guards pending and notified
	pending  *pendingBatch
	notified map[notifiedKey]Month // the month each usage event was last queued for
}

type pendingBatch struct {
	batch UsageBatch
	sums  map[string]int64 // per capped account: decisions in the batch counted in accountTotal.local
}

func newUsageTally() *usageTally {
	var id [8]byte
	_, _ = crand.Read(id[:])
	u := &usageTally{instance: hex.EncodeToString(id[:]), totals: make(map[string]*accountTotal), notified: make(map[notifiedKey]Month)}
	for i := range u.shards {
		u.shards[i].counts = make(map[UsageKey]*UsageCount)
		u.shards[i].capped = make(map[string]int64)
	}
	return u
}

func (u *usageTally) total(account string) *accountTotal {
	u.totalsMu.RLock()
	t := u.totals[account]
	u.totalsMu.RUnlock()
	if t != nil {
		return t
	}
	u.totalsMu.Lock()
	defer u.totalsMu.Unlock()
	if t = u.totals[account]; t == nil {
		t = new(accountTotal)
		u.totals[account] = t
	}
	return t
}

// record counts one decision of account a taken at the store's time nowMS. Only accounts
// with a hard cap keep a running local total (the cap is checked against it).
func (u *usageTally) record(a *Account, namespace string, nowMS int64, blocked bool) {
	var b int64
	if blocked {
		b = 1
	}
	u.recordN(a, namespace, nowMS, 1, b)
}

// recordN counts n requests, blocked of them blocked (an RLQS report, spec §14.3).
func (u *usageTally) recordN(a *Account, namespace string, nowMS int64, n, blocked int64) {
	if n <= 0 {
		return
	}
	k := UsageKey{Account: a.ID, Namespace: namespace, Day: DayOf(nowMS)}
	capped := a.Plan.HardCap != nil
	s := &u.shards[rand.Uint32()%usageShards]
	s.mu.Lock()
	c := s.counts[k]
	if c == nil {
		c = new(UsageCount)
		s.counts[k] = c
	}
	c.Total += n
	c.Blocked += blocked
	if capped {
		s.capped[a.ID] += n
	}
	s.mu.Unlock()
	if capped {
		u.total(a.ID).local.Add(n)
	}
	if nowMS > u.lastNowMS.Load() {
		u.lastNowMS.Store(nowMS)
	}
}

// monthTotal returns the account's month usage as known here and the latest store time seen.
func (u *usageTally) monthTotal(account string) (total, nowMS int64) {
	t := u.total(account)
	return t.stored.Load() + t.local.Load(), u.lastNowMS.Load()
}

// takeBatch empties the shards into a new batch; nil when nothing was counted.
func (u *usageTally) takeBatch() *pendingBatch {
	var p *pendingBatch
	for i := range u.shards {
		s := &u.shards[i]
		s.mu.Lock()
		counts := s.counts
		if len(counts) == 0 {
			s.mu.Unlock()
			continue
		}
		capped := s.capped
		s.counts = make(map[UsageKey]*UsageCount, len(counts))
		s.capped = make(map[string]int64, len(capped))
		s.mu.Unlock()
		if p == nil {
			p = &pendingBatch{
				batch: UsageBatch{ID: u.instance + "-" + itoa(int64(u.batchSeq.Add(1))), Counts: make(map[UsageKey]UsageCount)},
				sums:  make(map[string]int64),
			}
		}
		for k, c := range counts {
			sum := p.batch.Counts[k]
			sum.Total += c.Total
			sum.Blocked += c.Blocked
			p.batch.Counts[k] = sum
		}
		for account, n := range capped {
			p.sums[account] += n
		}
	}
	return p
}

// Flush writes counted usage to the store and refreshes the month totals the hard cap
// uses. A batch that fails stays pending and is retried first by the next Flush.
func (e *Engine) Flush(ctx context.Context) error {
	u := e.tally
	u.flushMu.Lock()
	defer u.flushMu.Unlock()
	for range 2 { // the pending retry, if any, then what was counted since
		if u.pending == nil {
			u.pending = u.takeBatch()
			if u.pending == nil {
				break
			}
		}
		if err := e.store.Usage.AddUsage(ctx, u.pending.batch); err != nil {
			return err
		}
		for account, n := range u.pending.sums {
			t := u.total(account)
			t.stored.Add(n) // first, so the total errs high, never low
			t.local.Add(-n)
		}
		u.pending = nil
	}
	return e.refreshTotals(ctx)
}

// refreshTotals reads the month totals of the accounts that have a hard cap or
// webhooks, and queues the usage events they became due (webhooks.go).
func (e *Engine) refreshTotals(ctx context.Context) error {
	nowMS, err := e.store.Decider.NowMS(ctx)
	if err != nil {
		return err
	}
	e.tally.lastNowMS.Store(nowMS)
	if e.cache != nil {
		e.clock.observe(nowMS)
	}
	var accounts []*Account
	var ids []string
	for _, a := range e.directory.Load().Accounts() {
		if a.Plan.HardCap != nil || a.Plan.Webhooks {
			accounts = append(accounts, a)
			ids = append(ids, a.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	month := DayOf(nowMS).Month()
	totals, err := e.store.Usage.MonthTotals(ctx, month, ids)
	if err != nil {
		return err
	}
	for i, a := range accounts {
		if a.Plan.HardCap != nil {
			e.tally.total(a.ID).stored.Store(totals[i])
		}
	}
	return e.notifyUsage(ctx, nowMS, month, accounts, totals)
}

// Run flushes usage every interval until ctx is done, then flushes once more within
// finalTimeout so a clean shutdown loses nothing.
func (e *Engine) Run(ctx context.Context, finalTimeout time.Duration) error {
	t := time.NewTicker(e.flushInterval)
	defer t.Stop()
	e.flushLogged(ctx)
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), finalTimeout)
			defer cancel()
			for {
				err := e.Flush(fctx)
				if err == nil {
					return nil
				}
				e.log.Error("final usage flush failed", "err", err)
				select {
				case <-fctx.Done():
					return err
				case <-time.After(100 * time.Millisecond):
				}
			}
		case <-t.C:
			e.flushLogged(ctx)
		}
	}
}

func (e *Engine) flushLogged(ctx context.Context) {
	fctx, cancel := context.WithTimeout(ctx, e.flushInterval)
	defer cancel()
	if err := e.Flush(fctx); err != nil && ctx.Err() == nil {
		e.log.Warn("usage flush failed; will retry", "err", err)
	}
}
