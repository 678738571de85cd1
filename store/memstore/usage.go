package memstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore/record"
)

// Retention of usage state, by the store's clock: spec §7.7 asks for at least 35 days,
// 13 months and one hour.
const (
	keepDays      = 40                 // daily usage: days before today kept
	keepMonths    = 13                 // monthly totals: months before this one kept
	keepBatchesMS = 2 * 60 * 60 * 1000 // applied batch ids
	pruneEveryMS  = 60 * 1000          // how often sweeps prune usage
	maxReadDays   = 10 * 366           // longest span ReadUsage answers
)

type accountMonth struct {
	account string
	month   engine.Month
}

// usageStore holds usage counts behind one mutex: they are written in batches, off the
// request path.
type usageStore struct {
	mu        sync.Mutex
	daily     map[engine.UsageKey]engine.UsageCount
	monthly   map[accountMonth]int64
	batches   map[string]int64 // applied batch id → when (Unix ms)
	lastPrune int64
}

func (u *usageStore) init() {
	u.daily = make(map[engine.UsageKey]engine.UsageCount)
	u.monthly = make(map[accountMonth]int64)
	u.batches = make(map[string]int64)
}

// prune drops usage older than the retention, at most once a minute of store time.
func (u *usageStore) prune(now int64, j Journal) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if now >= u.lastPrune && now-u.lastPrune < pruneEveryMS {
		return
	}
	u.lastPrune = now
	var b JournalBatch
	if j != nil {
		b = j.Batch()
	}
	today := engine.DayOf(now)
	month := today.Month()
	for k := range u.daily {
		if k.Day < today-keepDays {
			delete(u.daily, k)
			if b != nil {
				b.Delete(record.DailyKey(nil, k))
			}
		}
	}
	for k := range u.monthly {
		if k.month < month-keepMonths {
			delete(u.monthly, k)
			if b != nil {
				b.Delete(record.MonthlyKey(nil, k.account, int64(k.month)))
			}
		}
	}
	for id, at := range u.batches {
		if now-at > keepBatchesMS {
			delete(u.batches, id)
			if b != nil {
				b.Delete(record.Prefixed(nil, record.Batch, id))
			}
		}
	}
	if b != nil {
		_ = b.Commit() // a failure is the journal's to report; Restore drops what is old
	}
}

// AddUsage applies a batch of usage increments once: a batch whose ID was applied before
// (within the last two hours) is ignored. A batch without an ID is always applied.
func (s *tables) AddUsage(_ context.Context, b engine.UsageBatch) error {
	if s.closed.Load() {
		return ErrClosed
	}
	now := s.nowMS()
	u := &s.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	if b.ID != "" {
		if _, seen := u.batches[b.ID]; seen {
			return nil
		}
	}
	if s.j != nil {
		if err := s.journalUsage(b, now); err != nil {
			return fmt.Errorf("memstore: add usage: %w", err)
		}
	}
	if b.ID != "" {
		u.batches[b.ID] = now
	}
	for k, c := range b.Counts {
		d := u.daily[k]
		d.Total += c.Total
		d.Blocked += c.Blocked
		u.daily[k] = d
		u.monthly[accountMonth{k.Account, k.Day.Month()}] += c.Total
	}
	return nil
}

// ReadUsage returns a namespace's daily usage, oldest first and zero-filled, and its
// account's month total.
func (s *tables) ReadUsage(_ context.Context, q engine.UsageQuery) (engine.UsageReport, error) {
	if s.closed.Load() {
		return engine.UsageReport{}, ErrClosed
	}
	n := int64(q.LastDay-q.FirstDay) + 1
	if n > maxReadDays {
		return engine.UsageReport{}, errUsageSpan
	}
	n = max(n, 0)
	rep := engine.UsageReport{Days: make([]engine.UsageCount, n)}
	u := &s.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := range rep.Days {
		rep.Days[i] = u.daily[engine.UsageKey{Account: q.Account, Namespace: q.Namespace, Day: q.FirstDay + engine.Day(i)}]
	}
	rep.MonthTotal = u.monthly[accountMonth{q.Account, q.Month}]
	return rep, nil
}

// MonthTotals returns each account's usage total in month, in the order given.
func (s *tables) MonthTotals(_ context.Context, month engine.Month, accounts []string) ([]int64, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	out := make([]int64, len(accounts))
	u := &s.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	for i, a := range accounts {
		out[i] = u.monthly[accountMonth{a, month}]
	}
	return out, nil
}

// journalUsage records what b will make of the counts it touches, with its id, in one
// journal batch; the caller holds the usage lock.
func (s *tables) journalUsage(b engine.UsageBatch, now int64) error {
	u := &s.usage
	jb := s.j.Batch()
	if b.ID != "" {
		jb.Set(record.Prefixed(nil, record.Batch, b.ID), record.AppendVarints(nil, now))
	}
	months := make(map[accountMonth]int64)
	for k, c := range b.Counts {
		d := u.daily[k]
		jb.Set(record.DailyKey(nil, k), record.AppendVarints(nil, d.Total+c.Total, d.Blocked+c.Blocked))
		months[accountMonth{k.Account, k.Day.Month()}] += c.Total
	}
	for m, add := range months {
		jb.Set(record.MonthlyKey(nil, m.account, int64(m.month)), record.AppendVarints(nil, u.monthly[m]+add))
	}
	return jb.Commit()
}
