// Package accounts is the capability of accounts at runtime (spec §2, §15): the
// directory of accounts and operators that authentication reads, kept merged with the
// accounts and keys the admin API made in the store (Accounts, over Port), and the admin
// and key routes' changes (Admin, over AdminPort).
package accounts

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leashd/leash/engine"
)

// Accounts at runtime (spec §15): the configuration's accounts merged with those the
// admin API keeps in an AccountStore. The merged Directory is cached in process, so
// authentication never reaches the store; a poller reads the store's accounts version
// every AccountsPollInterval and reloads the whole set when it changed, and a write made
// on this instance is reloaded at once.

// AccountsPollInterval is how often WatchAccounts reads the store's accounts version.
const AccountsPollInterval = 250 * time.Millisecond

// Port is what serving accounts needs of a store: the AccountStore role's whole-set
// load, its version, and one account's read.
type Port interface {
	// LoadAccounts is engine.AccountStore's.
	LoadAccounts(ctx context.Context) (engine.AccountsSnapshot, error)
	// AccountsVersion is engine.AccountStore's.
	AccountsVersion(ctx context.Context) (int64, error)
	// GetAccount is engine.AccountStore's.
	GetAccount(ctx context.Context, id string) (a engine.StoredAccount, ok bool, err error)
}

// Options configures Accounts.
type Options struct {
	// Store, if set, keeps the accounts and keys made through the admin API (spec §15.2);
	// they are served with the directory's. Call LoadAccounts before serving and run
	// WatchAccounts. Without it only the configured accounts are served.
	Store Port
	// Logger receives reloads' conflicts and poll failures; default slog.Default().
	Logger *slog.Logger
}

// Accounts serves the directory authentication reads: the configuration's accounts merged
// with those of a Port, reloaded when they change.
type Accounts struct {
	directory atomic.Pointer[engine.Directory]
	store     Port         // nil: configured accounts only
	acct      accountState // the accounts last loaded from it
	log       *slog.Logger
}

// New returns the accounts capability serving dir and, once loaded, the store's accounts.
func New(dir *engine.Directory, o Options) *Accounts {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ac := &Accounts{store: o.Store, log: o.Logger}
	ac.directory.Store(dir)
	return ac
}

// accountState is the view of the AccountStore: the last snapshot loaded.
type accountState struct {
	mu       sync.Mutex // serialises loads and directory swaps
	snap     engine.AccountsSnapshot
	loaded   bool
	gen      uint64 // bumped by every snapshot installed
	reported int64  // the snapshot version whose conflicts were last logged
}

// AuthenticateOperator returns the operator that owns key.
func (ac *Accounts) AuthenticateOperator(key string) (*engine.Operator, bool) {
	return ac.directory.Load().LookupOperator(key)
}

// LoadAccounts reads the store's accounts and serves them with the configuration's. An API
// account whose id the configuration also defines, or whose plan it does not define, is an
// error naming it (spec §15.2): start-up refuses it.
func (ac *Accounts) LoadAccounts(ctx context.Context) error {
	if ac.store == nil {
		return nil
	}
	snap, err := ac.store.LoadAccounts(ctx)
	if err != nil {
		return fmt.Errorf("load accounts: %w", err)
	}
	st := &ac.acct
	st.mu.Lock()
	defer st.mu.Unlock()
	m, conflicts, unknown := ac.directory.Load().Merge(&snap)
	if err := conflictError(conflicts, unknown, &snap); err != nil {
		return err
	}
	st.snap, st.loaded = snap, true
	st.gen++
	ac.directory.Store(m)
	return nil
}

// CheckDirectory reports, as an error naming it, an account created through the API whose
// id d (a new configuration's directory) also defines, or whose plan d does not define; a
// reload is refused then (spec §15.2). It reads the cached accounts, not the store.
func (ac *Accounts) CheckDirectory(d *engine.Directory) error {
	st := &ac.acct
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.loaded {
		return nil
	}
	_, conflicts, unknown := d.Merge(&st.snap)
	return conflictError(conflicts, unknown, &st.snap)
}

func conflictError(conflicts, unknown []string, snap *engine.AccountsSnapshot) error {
	if len(conflicts) > 0 {
		return fmt.Errorf("account %q is defined in the configuration and was also created through the admin API; "+
			"delete one of them", conflicts[0])
	}
	if len(unknown) > 0 {
		i, _ := slices.BinarySearchFunc(snap.Accounts, unknown[0], func(a engine.StoredAccount, id string) int { return strings.Compare(a.ID, id) })
		return fmt.Errorf("account %q (created through the admin API) has plan %q, which the configuration does not define",
			unknown[0], snap.Accounts[i].Plan)
	}
	return nil
}

// setConfigDirectory serves d's configuration with the store's accounts last loaded.
func (ac *Accounts) setConfigDirectory(d *engine.Directory) {
	st := &ac.acct
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.loaded {
		m, conflicts, unknown := d.Merge(&st.snap)
		ac.logConflicts(conflicts, unknown, true)
		d = m
	}
	ac.directory.Store(d)
}

// logConflicts logs the API accounts left out of the directory (once per version unless
// always).
func (ac *Accounts) logConflicts(conflicts, unknown []string, always bool) {
	if len(conflicts)+len(unknown) == 0 {
		return
	}
	st := &ac.acct
	if !always && st.reported == st.snap.Version {
		return
	}
	st.reported = st.snap.Version
	for _, id := range conflicts {
		ac.log.Error("accounts: an account created through the admin API has the id of a configured account; it is not served",
			"account", id)
	}
	for _, id := range unknown {
		ac.log.Error("accounts: an account created through the admin API names a plan the configuration does not define; it is not served",
			"account", id)
	}
}

// refresh reloads the store's accounts when their version is not the one loaded (or
// always when force), and serves them. Versions only grow, except when the store lost
// data (a Redis failover or flush): any other version than the one loaded is reloaded.
// A load that another, at least as new, overtook (a poll racing a write made here, or two
// writes) is dropped; were it wrong to drop, the next poll catches up.
func (ac *Accounts) refresh(ctx context.Context, force bool) error {
	st := &ac.acct
	st.mu.Lock()
	gen := st.gen
	st.mu.Unlock()
	if !force {
		v, err := ac.store.AccountsVersion(ctx)
		if err != nil {
			return err
		}
		st.mu.Lock()
		same := st.loaded && st.snap.Version == v
		st.mu.Unlock()
		if same {
			return nil
		}
	}
	snap, err := ac.store.LoadAccounts(ctx)
	if err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.gen != gen && snap.Version <= st.snap.Version {
		return nil // another load, as new, was installed since this one began
	}
	st.snap, st.loaded = snap, true
	st.gen++
	m, conflicts, unknown := ac.directory.Load().Merge(&snap)
	ac.logConflicts(conflicts, unknown, false)
	ac.directory.Store(m)
	return nil
}

// WatchAccounts keeps the served accounts in step with the store until ctx ends: it reads
// the accounts version every AccountsPollInterval and reloads the accounts when it changed,
// so a change made on any instance is in force here within about 250 ms plus a round trip
// (spec §15.2). While the store does not answer, the accounts last loaded are served.
func (ac *Accounts) WatchAccounts(ctx context.Context) {
	if ac.store == nil {
		return
	}
	t := time.NewTicker(AccountsPollInterval)
	defer t.Stop()
	failing := false
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := ac.refresh(pctx, false)
		cancel()
		switch {
		case err == nil && failing:
			ac.log.Info("accounts: poll recovered")
			failing = false
		case err != nil && ctx.Err() == nil && !failing:
			ac.log.Warn("accounts: poll failed; serving the accounts last loaded until it recovers", "err", err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func checkAccountID(id string) error {
	if !engine.ValidAccountID(id) {
		return engine.Invalid("id must match [a-z0-9][a-z0-9_-]{0,63}")
	}
	return nil
}

func notFound(id string) error {
	return engine.NewError(engine.CodeAccountNotFound, fmt.Sprintf("no account %q", id))
}

// SetDirectory replaces the configured accounts served (config reload); the
// accounts of the AccountStore are served with them (see CheckDirectory).
func (ac *Accounts) SetDirectory(d *engine.Directory) { ac.setConfigDirectory(d) }

// Authenticate returns the account that owns apiKey.
func (ac *Accounts) Authenticate(apiKey string) (*engine.Account, bool) {
	return ac.directory.Load().Lookup(apiKey)
}

// Account returns the account with the given id from the current directory.
func (ac *Accounts) Account(id string) (*engine.Account, bool) {
	return ac.directory.Load().Account(id)
}

// Directory returns the accounts served now.
func (ac *Accounts) Directory() *engine.Directory { return ac.directory.Load() }

// Resolve returns the account with id to read its usage (GET
// /v1/admin/accounts/{id}/usage): one served now, or one the store holds that was created
// on another instance since the last poll; neither is account_not_found.
func (ac *Accounts) Resolve(ctx context.Context, id string) (*engine.Account, error) {
	if err := checkAccountID(id); err != nil {
		return nil, err
	}
	if a, ok := ac.Account(id); ok {
		return a, nil
	}
	if ac.store == nil {
		return nil, notFound(id)
	}
	// Created on another instance since the last poll: read it from the store.
	sa, found, err := ac.store.GetAccount(ctx, id)
	if err != nil {
		return nil, engine.Unavailable(err)
	}
	plan, known := ac.directory.Load().Plans()[sa.Plan]
	if !found || !known {
		return nil, notFound(id)
	}
	return &engine.Account{ID: sa.ID, Plan: plan, Source: engine.SourceAPI}, nil
}
