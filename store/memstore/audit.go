package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore/record"
)

// auditStore holds the audit log (spec §15.10) in process: every entry by id, and each
// account's by id, both bounded by time and count.
type auditStore struct {
	mu     sync.Mutex
	last   string                         // the id of the last entry recorded
	all    []engine.AuditEntry            // by id
	byAcct map[string][]engine.AuditEntry // account → its entries by id
}

var _ engine.AuditStore = (*Store)(nil)

func byID(a, b engine.AuditEntry) int { return strings.Compare(a.ID, b.ID) }

// insert adds e to list, kept by id, then drops what is older than cutoff and the oldest
// beyond most.
func insert(list []engine.AuditEntry, e engine.AuditEntry, cutoff string, most int, dropped func(engine.AuditEntry)) []engine.AuditEntry {
	i, _ := slices.BinarySearchFunc(list, e, byID)
	list = slices.Insert(list, i, e)
	drop, _ := slices.BinarySearchFunc(list, engine.AuditEntry{ID: cutoff}, byID)
	drop = max(drop, len(list)-most)
	if dropped != nil {
		for _, old := range list[:max(drop, 0)] {
			dropped(old)
		}
	}
	if drop > 0 {
		list = slices.Delete(list, 0, drop) // keeps the backing array: no regrowth per append
	}
	return list
}

// AppendAudit records e with its id and instant from the store's clock.
func (s *admin) AppendAudit(_ context.Context, e engine.AuditEntry) (engine.AuditEntry, error) {
	if s.closed.Load() {
		return engine.AuditEntry{}, ErrClosed
	}
	if err := e.Validate(); err != nil {
		return engine.AuditEntry{}, err
	}
	e.Details = maps.Clone(e.Details)
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	e.ID = engine.NextAuditID(a.last, s.nowMS())
	e.TimeMS = auditMS(e.ID)
	if s.j != nil {
		if err := s.j.Set(record.Prefixed(nil, record.Audit, e.ID), record.JSON(e)); err != nil {
			return engine.AuditEntry{}, fmt.Errorf("memstore: append audit: %w", err)
		}
	}
	a.last = e.ID
	a.add(e, s.j)
	return e, nil
}

// add inserts e into both lists, dropping what expired or is beyond the bounds; with a
// journal, what leaves the whole log leaves the journal too.
func (a *auditStore) add(e engine.AuditEntry, j Journal) {
	cutoff := engine.AuditCutoff(e.TimeMS)
	if a.byAcct == nil {
		a.byAcct = make(map[string][]engine.AuditEntry)
	}
	var dropped func(engine.AuditEntry)
	if j != nil {
		dropped = func(old engine.AuditEntry) { _ = j.Delete(record.Prefixed(nil, record.Audit, old.ID)) }
	}
	a.all = insert(a.all, e, cutoff, engine.MaxAuditEntries, dropped)
	a.byAcct[e.Account] = insert(a.byAcct[e.Account], e, cutoff, engine.MaxAuditPerAccount, nil)
	for id, list := range a.byAcct { // forget the accounts whose entries all expired
		if len(list) > 0 && list[len(list)-1].ID < cutoff {
			delete(a.byAcct, id)
		}
	}
}

// ListAudit returns up to limit unexpired entries of account ("" every account) with ids
// before before ("" none), newest first.
func (s *admin) ListAudit(_ context.Context, account, before string, limit int) ([]engine.AuditEntry, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	cutoff := engine.AuditCutoff(s.nowMS())
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.all
	if account != "" {
		list = a.byAcct[account]
	}
	end := len(list)
	if before != "" {
		end, _ = slices.BinarySearchFunc(list, engine.AuditEntry{ID: before}, byID)
	}
	out := make([]engine.AuditEntry, 0, min(limit, end))
	for i := end - 1; i >= 0 && len(out) < limit && list[i].ID >= cutoff; i-- {
		e := list[i]
		e.Details = maps.Clone(e.Details)
		out = append(out, e)
	}
	return out, nil
}

// auditMS reads the instant at the start of an entry id.
func auditMS(id string) int64 {
	ms, _ := strconv.ParseInt(id[:13], 10, 64)
	return ms
}
