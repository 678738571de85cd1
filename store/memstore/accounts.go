package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore/record"
)

// accountStore holds the admin API's accounts and keys behind one mutex: they change
// rarely and are read whole by each poll that sees a new version. They live as long as
// the process (spec §15.2), or as the journal keeps them.
type accountStore struct {
	mu       sync.Mutex
	accounts map[string]engine.StoredAccount
	keys     map[string]map[string]engine.StoredKey // account → key id → key
	version  int64
}

var _ engine.AccountStore = (*Store)(nil)

func (a *accountStore) lockInit() {
	a.mu.Lock()
	if a.accounts == nil {
		a.accounts = make(map[string]engine.StoredAccount)
		a.keys = make(map[string]map[string]engine.StoredKey)
	}
}

// withKeys returns acc with its key count.
func (a *accountStore) withKeys(acc engine.StoredAccount) engine.StoredAccount {
	acc.Keys = len(a.keys[acc.ID])
	return acc
}

// CreateAccount stores acc with CreatedMS now, unless its id exists.
func (s *admin) CreateAccount(_ context.Context, acc engine.StoredAccount) (engine.StoredAccount, bool, error) {
	if s.closed.Load() {
		return engine.StoredAccount{}, false, ErrClosed
	}
	if err := acc.Validate(); err != nil {
		return engine.StoredAccount{}, false, err
	}
	a := &s.accts
	a.lockInit()
	defer a.mu.Unlock()
	if old, ok := a.accounts[acc.ID]; ok {
		return a.withKeys(old), false, nil
	}
	acc.CreatedMS, acc.Keys = s.nowMS(), 0
	if err := s.journalAccounts(func(b JournalBatch) { b.Set(record.Prefixed(nil, record.Account, acc.ID), record.JSON(acc)) }); err != nil {
		return engine.StoredAccount{}, false, fmt.Errorf("memstore: create account: %w", err)
	}
	a.accounts[acc.ID] = acc
	a.version++
	return acc, true, nil
}

// GetAccount returns the account with id.
func (s *admin) GetAccount(_ context.Context, id string) (engine.StoredAccount, bool, error) {
	if s.closed.Load() {
		return engine.StoredAccount{}, false, ErrClosed
	}
	a := &s.accts
	a.lockInit()
	defer a.mu.Unlock()
	acc, ok := a.accounts[id]
	if !ok {
		return engine.StoredAccount{}, false, nil
	}
	return a.withKeys(acc), true, nil
}

// ListAccounts returns up to limit accounts with ids after after, by id.
func (s *admin) ListAccounts(_ context.Context, after string, limit int) ([]engine.StoredAccount, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d", engine.ErrInvalidArgument, limit)
	}
	a := &s.accts
	a.lockInit()
	defer a.mu.Unlock()
	var out []engine.StoredAccount
	for id, acc := range a.accounts {
		if id > after {
			out = append(out, a.withKeys(acc))
		}
	}
	slices.SortFunc(out, func(x, y engine.StoredAccount) int { return cmp.Compare(x.ID, y.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// UpdateAccount applies u to the account with id.
func (s *admin) UpdateAccount(_ context.Context, id string, u engine.AccountUpdate) (engine.StoredAccount, bool, error) {
	if s.closed.Load() {
		return engine.StoredAccount{}, false, ErrClosed
	}
	if u.Plan != nil && !engine.ValidPlanName(*u.Plan) {
		return engine.StoredAccount{}, false, fmt.Errorf("%w: plan %q", engine.ErrInvalidArgument, *u.Plan)
	}
	a := &s.accts
	a.lockInit()
	defer a.mu.Unlock()
	acc, ok := a.accounts[id]
	if !ok {
		return engine.StoredAccount{}, false, nil
	}
	if u.Plan != nil {
		acc.Plan = *u.Plan
	}
	if u.Suspended != nil {
		acc.Suspended = *u.Suspended
	}
	if err := s.journalAccounts(func(b JournalBatch) { b.Set(record.Prefixed(nil, record.Account, id), record.JSON(acc)) }); err != nil {
		return engine.StoredAccount{}, false, fmt.Errorf("memstore: update account: %w", err)
	}
	a.accounts[id] = acc
	a.version++
	return a.withKeys(acc), true, nil
}

// DeleteAccount removes the account and its keys.
func (s *admin) DeleteAccount(_ context.Context, id string) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	a := &s.accts
	a.lockInit()
	defer a.mu.Unlock()
	if _, ok := a.accounts[id]; !ok {
		return false, nil
	}
	err := s.journalAccounts(func(b JournalBatch) {
		b.Delete(record.Prefixed(nil, record.Account, id))
		for kid := range a.keys[id] {
			b.Delete(record.APIKey(nil, id, kid))
		}
	})
	if err != nil {
		return false, fmt.Errorf("memstore: delete account: %w", err)
	}
	delete(a.accounts, id)
	delete(a.keys, id)
	a.version++
	return true, nil
}

// IssueKey stores k with CreatedMS now.
func (s *admin) IssueKey(_ context.Context, k engine.StoredKey) (engine.StoredKey, error) {
	if s.closed.Load() {
		return engine.StoredKey{}, ErrClosed
	}
	if err := k.Validate(); err != nil {
		return engine.StoredKey{}, err
	}
	a := &s.accts
	a.lockInit()
	defer a.mu.Unlock()
	if _, ok := a.accounts[k.Account]; !ok {
		return engine.StoredKey{}, fmt.Errorf("issue key to %q: %w", k.Account, engine.ErrNoAccount)
	}
	ks := a.keys[k.Account]
	if _, dup := ks[k.ID]; dup {
		return engine.StoredKey{}, fmt.Errorf("%w: key id %q exists", engine.ErrInvalidArgument, k.ID)
	}
	if len(ks) >= engine.MaxKeysPerAccount {
		return engine.StoredKey{}, fmt.Errorf("issue key to %q: %w", k.Account, engine.ErrTooManyKeys)
	}
	if ks == nil {
		ks = make(map[string]engine.StoredKey)
		a.keys[k.Account] = ks
	}
	k.CreatedMS = s.nowMS()
	if err := s.journalAccounts(func(b JournalBatch) { b.Set(record.APIKey(nil, k.Account, k.ID), record.JSON(k)) }); err != nil {
		return engine.StoredKey{}, fmt.Errorf("memstore: issue key: %w", err)
	}
	ks[k.ID] = k
	a.version++
	return k, nil
}

func sortKeys(ks []engine.StoredKey) {
	slices.SortFunc(ks, func(x, y engine.StoredKey) int {
		return cmp.Or(cmp.Compare(x.Account, y.Account), cmp.Compare(x.CreatedMS, y.CreatedMS), cmp.Compare(x.ID, y.ID))
	})
}

// AccountKeys returns the account's keys, oldest first.
func (s *admin) AccountKeys(_ context.Context, account string) ([]engine.StoredKey, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	a := &s.accts
	a.lockInit()
	defer a.mu.Unlock()
	out := make([]engine.StoredKey, 0, len(a.keys[account]))
	for _, k := range a.keys[account] {
		out = append(out, k)
	}
	sortKeys(out)
	return out, nil
}

// RevokeKey removes one key of the account.
func (s *admin) RevokeKey(_ context.Context, account, keyID string) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	a := &s.accts
	a.lockInit()
	defer a.mu.Unlock()
	if _, ok := a.keys[account][keyID]; !ok {
		return false, nil
	}
	if err := s.journalAccounts(func(b JournalBatch) { b.Delete(record.APIKey(nil, account, keyID)) }); err != nil {
		return false, fmt.Errorf("memstore: revoke key: %w", err)
	}
	delete(a.keys[account], keyID)
	a.version++
	return true, nil
}

// AccountsVersion returns the version every account or key write bumps.
func (s *admin) AccountsVersion(context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	a := &s.accts
	a.lockInit()
	defer a.mu.Unlock()
	return a.version, nil
}

// LoadAccounts returns every account and key at the current version.
func (s *admin) LoadAccounts(context.Context) (engine.AccountsSnapshot, error) {
	if s.closed.Load() {
		return engine.AccountsSnapshot{}, ErrClosed
	}
	a := &s.accts
	a.lockInit()
	defer a.mu.Unlock()
	snap := engine.AccountsSnapshot{Version: a.version, Accounts: make([]engine.StoredAccount, 0, len(a.accounts))}
	for _, acc := range a.accounts {
		snap.Accounts = append(snap.Accounts, a.withKeys(acc))
	}
	slices.SortFunc(snap.Accounts, func(x, y engine.StoredAccount) int { return cmp.Compare(x.ID, y.ID) })
	for _, ks := range a.keys {
		for _, k := range ks {
			snap.Keys = append(snap.Keys, k)
		}
	}
	sortKeys(snap.Keys)
	return snap, nil
}

// journalAccounts records one account or key change, and the version it bumps to, in one
// journal batch; the caller holds the accounts lock and bumps the version after.
func (s *admin) journalAccounts(change func(JournalBatch)) error {
	if s.j == nil {
		return nil
	}
	b := s.j.Batch()
	change(b)
	b.Set([]byte{record.Version}, record.AppendVarints(nil, s.accts.version+1))
	return b.Commit()
}
