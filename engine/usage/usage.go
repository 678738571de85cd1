// Package usage is the capability that counts usage and enforces the hard cap (spec §7):
// usage counted in process and flushed in batches, each account's month total, and the
// usage reads of spec §7.2 and §15.5. It reaches the store only through Port.
package usage

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leashd/leash/engine"
)

// Port is what usage needs of a store: the usage role, the store's clock, and which
// namespaces have rules (for the namespace list).
type Port interface {
	// AddUsage is engine.UsageStore's.
	AddUsage(ctx context.Context, b engine.UsageBatch) error
	// ReadUsage is engine.UsageStore's.
	ReadUsage(ctx context.Context, q engine.UsageQuery) (engine.UsageReport, error)
	// MonthTotals is engine.UsageStore's.
	MonthTotals(ctx context.Context, month engine.Month, accounts []string) ([]int64, error)
	// ReadAccountUsage is engine.UsageStore's.
	ReadAccountUsage(ctx context.Context, q engine.AccountUsageQuery) (engine.AccountUsageReport, error)
	// NowMS is engine.Decider's.
	NowMS(ctx context.Context) (int64, error)
	// RuleNamespaces is engine.RuleStore's.
	RuleNamespaces(ctx context.Context, account string) ([]engine.NamespaceRules, error)
}

// Directory gives the accounts served now (the accounts capability).
type Directory interface {
	// Directory returns the accounts served now.
	Directory() *engine.Directory
}

// Notifier is told, after each refresh, the month totals of the accounts with a hard cap
// or webhooks, so it can queue the usage events they became due (the webhooks capability).
type Notifier interface {
	// NotifyUsage sees accounts[i]'s month total totals[i] at the store's nowMS.
	NotifyUsage(ctx context.Context, nowMS int64, month engine.Month, accounts []*engine.Account, totals []int64) error
}

// Options configures a Meter.
type Options struct {
	// FlushInterval is how often usage is written to the store; default 1s.
	FlushInterval time.Duration
	// Logger receives flush failures; default slog.Default().
	Logger *slog.Logger
	// Observer, if set, sees every hard-cap refusal (metrics, spec §12.2).
	Observer engine.Observer
	// Notifier, if set, queues usage events after each refresh of the month totals.
	Notifier Notifier
	// OnNow, if set, sees the store's clock read by each refresh.
	OnNow func(nowMS int64)
}

// Meter counts usage, flushes it to a Port, and enforces the hard cap.
type Meter struct {
	store         Port
	dir           Directory
	tally         *usageTally // usage counted here, not yet in the store
	flushInterval time.Duration
	log           *slog.Logger
	observer      engine.Observer
	notifier      Notifier
	onNow         func(int64)
}

// New returns a Meter over store for the accounts dir serves.
func New(store Port, dir Directory, o Options) *Meter {
	if o.FlushInterval <= 0 {
		o.FlushInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Meter{store: store, dir: dir, tally: newUsageTally(), flushInterval: o.FlushInterval, log: o.Logger,
		observer: o.Observer, notifier: o.Notifier, onNow: o.OnNow}
}

// Record counts one decision of account a taken at the store's time nowMS.
func (m *Meter) Record(a *engine.Account, namespace string, nowMS int64, blocked bool) {
	m.tally.record(a, namespace, nowMS, blocked)
}

// RecordN counts n requests of a, blocked of them denied (an RLQS report, spec §14.3).
func (m *Meter) RecordN(a *engine.Account, namespace string, nowMS int64, n, blocked int64) {
	m.tally.recordN(a, namespace, nowMS, n, blocked)
}

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
	counts map[engine.UsageKey]*engine.UsageCount // pointers: one map lookup per decision
	capped map[string]int64                       // per account with a hard cap: decisions also added to accountTotal.local
	_      [32]byte                               // keep shards on separate cache lines
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

	flushMu sync.Mutex // one flush at a time; guards pending
	pending *pendingBatch
}

type pendingBatch struct {
	batch engine.UsageBatch
	sums  map[string]int64 // per capped account: decisions in the batch counted in accountTotal.local
}

func newUsageTally() *usageTally {
	var id [8]byte
	_, _ = crand.Read(id[:])
	u := &usageTally{instance: hex.EncodeToString(id[:]), totals: make(map[string]*accountTotal)}
	for i := range u.shards {
		u.shards[i].counts = make(map[engine.UsageKey]*engine.UsageCount)
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
func (u *usageTally) record(a *engine.Account, namespace string, nowMS int64, blocked bool) {
	var b int64
	if blocked {
		b = 1
	}
	u.recordN(a, namespace, nowMS, 1, b)
}

// recordN counts n requests, blocked of them blocked (an RLQS report, spec §14.3).
func (u *usageTally) recordN(a *engine.Account, namespace string, nowMS int64, n, blocked int64) {
	if n <= 0 {
		return
	}
	k := engine.UsageKey{Account: a.ID, Namespace: namespace, Day: engine.DayOf(nowMS)}
	capped := a.Plan.HardCap != nil
	s := &u.shards[rand.Uint32()%usageShards]
	s.mu.Lock()
	c := s.counts[k]
	if c == nil {
		c = new(engine.UsageCount)
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
		s.counts = make(map[engine.UsageKey]*engine.UsageCount, len(counts))
		s.capped = make(map[string]int64, len(capped))
		s.mu.Unlock()
		if p == nil {
			p = &pendingBatch{
				batch: engine.UsageBatch{ID: u.instance + "-" + strconv.FormatUint(u.batchSeq.Add(1), 10), Counts: make(map[engine.UsageKey]engine.UsageCount)},
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
func (m *Meter) Flush(ctx context.Context) error {
	u := m.tally
	u.flushMu.Lock()
	defer u.flushMu.Unlock()
	for range 2 { // the pending retry, if any, then what was counted since
		if u.pending == nil {
			u.pending = u.takeBatch()
			if u.pending == nil {
				break
			}
		}
		if err := m.store.AddUsage(ctx, u.pending.batch); err != nil {
			return err
		}
		for account, n := range u.pending.sums {
			t := u.total(account)
			t.stored.Add(n) // first, so the total errs high, never low
			t.local.Add(-n)
		}
		u.pending = nil
	}
	return m.refreshTotals(ctx)
}

// refreshTotals reads the month totals of the accounts that have a hard cap or
// webhooks, and has the Notifier queue the usage events they became due.
func (m *Meter) refreshTotals(ctx context.Context) error {
	nowMS, err := m.store.NowMS(ctx)
	if err != nil {
		return err
	}
	m.tally.lastNowMS.Store(nowMS)
	if m.onNow != nil {
		m.onNow(nowMS)
	}
	var accounts []*engine.Account
	var ids []string
	for _, a := range m.dir.Directory().Accounts() {
		if a.Plan.HardCap != nil || a.Plan.Webhooks {
			accounts = append(accounts, a)
			ids = append(ids, a.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	month := engine.DayOf(nowMS).Month()
	totals, err := m.store.MonthTotals(ctx, month, ids)
	if err != nil {
		return err
	}
	for i, a := range accounts {
		if a.Plan.HardCap != nil {
			m.tally.total(a.ID).stored.Store(totals[i])
		}
	}
	if m.notifier == nil {
		return nil
	}
	return m.notifier.NotifyUsage(ctx, nowMS, month, accounts, totals)
}

// Run flushes usage every interval until ctx is done, then flushes once more within
// finalTimeout so a clean shutdown loses nothing.
func (m *Meter) Run(ctx context.Context, finalTimeout time.Duration) error {
	t := time.NewTicker(m.flushInterval)
	defer t.Stop()
	m.flushLogged(ctx)
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), finalTimeout)
			defer cancel()
			for {
				err := m.Flush(fctx)
				if err == nil {
					return nil
				}
				m.log.Error("final usage flush failed", "err", err)
				select {
				case <-fctx.Done():
					return err
				case <-time.After(100 * time.Millisecond):
				}
			}
		case <-t.C:
			m.flushLogged(ctx)
		}
	}
}

func (m *Meter) flushLogged(ctx context.Context) {
	fctx, cancel := context.WithTimeout(ctx, m.flushInterval)
	defer cancel()
	if err := m.Flush(fctx); err != nil && ctx.Err() == nil {
		m.log.Warn("usage flush failed; will retry", "err", err)
	}
}
