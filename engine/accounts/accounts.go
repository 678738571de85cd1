// Package accounts is the capability of accounts at runtime (spec §2, §15): the
// directory of accounts and operators that authentication reads, kept merged with the
// accounts and keys the admin API made in the store, and the admin and key routes' changes.
// Its port is engine.AccountStore.
package accounts

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
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

// Auditor records a change in the audit log (spec §15.10).
type Auditor interface {
	// Record adds a change made by by.
	Record(ctx context.Context, by engine.Actor, ent engine.AuditEntry)
}

// WebhookRemover removes a deleted account's webhook (the store's webhook role).
type WebhookRemover interface {
	// DeleteWebhook is engine.WebhookStore's.
	DeleteWebhook(ctx context.Context, account string) (deleted bool, err error)
}

// RuleRemover removes every rule of a deleted account (the rules capability).
type RuleRemover interface {
	// DeleteAll removes every rule of account.
	DeleteAll(ctx context.Context, account string) error
}

// Options configures Accounts.
type Options struct {
	// Store, if set, keeps the accounts and keys made through the admin API (spec §15.2);
	// they are served with the directory's. Call LoadAccounts before serving and run
	// WatchAccounts. Without it only the configured accounts are served.
	Store engine.AccountStore
	// Logger receives changes and poll failures; default slog.Default().
	Logger *slog.Logger
	// OnAdminChange, if set, sees every change made through the admin and key routes
	// (metrics, spec §15.8).
	OnAdminChange func(AdminAction)
	// Audit records the changes (spec §15.10).
	Audit Auditor
	// Webhooks and Rules remove what a deleted account leaves (spec §15.6).
	Webhooks WebhookRemover
	Rules    RuleRemover
}

// Accounts serves the directory and changes the accounts of an engine.AccountStore.
type Accounts struct {
	directory atomic.Pointer[engine.Directory]
	store     engine.AccountStore // nil: configured accounts only
	acct      accountState        // the accounts last loaded from it
	log       *slog.Logger
	onAdmin   func(AdminAction) // OnAdminChange
	audit     Auditor
	webhooks  WebhookRemover
	rules     RuleRemover
}

// New returns the accounts capability serving dir and, once loaded, the store's accounts.
func New(dir *engine.Directory, o Options) *Accounts {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ac := &Accounts{store: o.Store, log: o.Logger, onAdmin: o.OnAdminChange, audit: o.Audit, webhooks: o.Webhooks, rules: o.Rules}
	ac.directory.Store(dir)
	return ac
}

// AdminAction names one kind of change made through the admin or key routes (the log and
// the metric, spec §15.8).
type AdminAction string

// The changes the admin and key routes make.
const (
	ActionAccountCreated AdminAction = "account_created"
	ActionAccountUpdated AdminAction = "account_updated"
	ActionAccountDeleted AdminAction = "account_deleted"
	ActionKeyIssued      AdminAction = "key_issued"
	ActionKeyRevoked     AdminAction = "key_revoked"
)

// AccountInfo is an account as the admin API shows it.
type AccountInfo struct {
	ID        string
	Plan      string
	Source    engine.AccountSource
	Suspended bool
	// CreatedMS is 0 for an account from the configuration.
	CreatedMS int64
	// Keys is how many API keys the account has.
	Keys int
}

// KeyInfo is an API key as the key routes show it: never the key nor its hash.
type KeyInfo struct {
	ID     string
	Name   string
	Prefix string
	// CreatedMS is 0 for a key from the configuration.
	CreatedMS int64
	Source    engine.AccountSource
}

// IssuedKey is a key just issued: the only time the key itself is returned.
type IssuedKey struct {
	KeyInfo
	Key string
}

// accountState is the view of the AccountStore: the last snapshot loaded.
type accountState struct {
	mu       sync.Mutex // serialises loads and directory swaps
	snap     engine.AccountsSnapshot
	loaded   bool
	gen      uint64 // bumped by every snapshot installed
	reported int64  // the snapshot version whose conflicts were last logged
}

// NewAPIKey returns a fresh random API key: lsh_ followed by 32 random bytes in unpadded
// base64url (spec §2.2).
func NewAPIKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "lsh_" + base64.RawURLEncoding.EncodeToString(b)
}

// keyPrefixLen is how many leading characters of an issued key are kept as its prefix.
const keyPrefixLen = 12

func newKeyID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "key_" + hex.EncodeToString(b)
}

// AuthenticateOperator returns the operator that owns key.
func (ac *Accounts) AuthenticateOperator(key string) (*engine.Operator, bool) {
	return ac.directory.Load().LookupOperator(key)
}

// accountsStore returns the AccountStore, or an error when none was given.
func (ac *Accounts) accountsStore() (engine.AccountStore, error) {
	if ac.store == nil {
		return nil, engine.Internal(errors.New("engine: no account store"))
	}
	return ac.store, nil
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

// changed records a change made on this instance: it is logged, counted and served here at once.
func (ac *Accounts) changed(ctx context.Context, by engine.Actor, action AdminAction, account string, attrs ...any) {
	args := []any{"action", string(action), "account", account}
	if by.Operator != nil {
		args = append(args, "operator", by.Operator.ID)
	} else {
		args = append(args, "by_account", true)
	}
	if o := engine.OriginOf(ctx); o.RequestID != "" {
		args = append(args, "client", o.Client, "request_id", o.RequestID)
	}
	ac.log.Info("accounts: change", append(args, attrs...)...)
	if ac.onAdmin != nil {
		ac.onAdmin(action)
	}
	if err := ac.refresh(ctx, true); err != nil {
		ac.log.Warn("accounts: reload after a change failed; the poll will pick it up", "err", err)
	}
}

func infoOf(a *engine.Account) AccountInfo {
	return AccountInfo{ID: a.ID, Plan: a.Plan.Name, Source: a.Source, Suspended: a.Suspended, CreatedMS: a.CreatedMS, Keys: a.ConfigKeys()}
}

func storedInfo(a engine.StoredAccount, keys int) AccountInfo {
	return AccountInfo{ID: a.ID, Plan: a.Plan, Source: engine.SourceAPI, Suspended: a.Suspended, CreatedMS: a.CreatedMS, Keys: keys}
}

// configAccount returns the configuration's account with id.
func (ac *Accounts) configAccount(id string) (*engine.Account, bool) {
	a, ok := ac.directory.Load().Config().Account(id)
	return a, ok
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

func readOnly(id string) error {
	return engine.NewError(engine.CodeConfigReadOnly, fmt.Sprintf("account %q is defined in the configuration and cannot be changed through the API", id))
}

// checkPlan checks that plan names a plan accounts may use.
func (ac *Accounts) checkPlan(plan string) error {
	if !engine.ValidPlanName(plan) {
		return engine.Invalid("plan must match [a-z0-9][a-z0-9_-]{0,63}")
	}
	if _, ok := ac.directory.Load().Plans()[plan]; !ok {
		return engine.NewError(engine.CodeUnknownPlan, fmt.Sprintf("no plan %q", plan))
	}
	return nil
}

// CreateAccount creates an API account (POST /v1/admin/accounts).
func (ac *Accounts) CreateAccount(ctx context.Context, by engine.Actor, id, plan string) (AccountInfo, error) {
	s, err := ac.accountsStore()
	if err != nil {
		return AccountInfo{}, err
	}
	if err := checkAccountID(id); err != nil {
		return AccountInfo{}, err
	}
	if err := ac.checkPlan(plan); err != nil {
		return AccountInfo{}, err
	}
	if _, ok := ac.configAccount(id); ok {
		return AccountInfo{}, engine.NewError(engine.CodeAccountExists, fmt.Sprintf("account %q exists", id))
	}
	got, created, err := s.CreateAccount(ctx, engine.StoredAccount{ID: id, Plan: plan})
	if err != nil {
		return AccountInfo{}, engine.Unavailable(err)
	}
	if !created {
		return AccountInfo{}, engine.NewError(engine.CodeAccountExists, fmt.Sprintf("account %q exists", id))
	}
	ac.changed(ctx, by, ActionAccountCreated, id, "plan", plan)
	ac.audit.Record(ctx, by, engine.AuditEntry{Action: engine.AuditAccountCreated, Account: id, AccountCreatedMS: got.CreatedMS, Target: id,
		Details: map[string]string{"plan": plan}})
	return storedInfo(got, 0), nil
}

// ListAccounts returns up to limit accounts, configured and stored, by id after cursor, and
// the cursor of the next page ("" on the last) (GET /v1/admin/accounts).
func (ac *Accounts) ListAccounts(ctx context.Context, limit int, cursor string) ([]AccountInfo, string, error) {
	s, err := ac.accountsStore()
	if err != nil {
		return nil, "", err
	}
	if limit < 1 || limit > engine.MaxAccountsPage {
		return nil, "", engine.Invalid("limit must be from 1 to 1000")
	}
	if cursor != "" && !engine.ValidAccountID(cursor) {
		return nil, "", engine.Invalid("cursor is not one this API returned")
	}
	page, err := s.ListAccounts(ctx, cursor, limit+1)
	if err != nil {
		return nil, "", engine.Unavailable(err)
	}
	out := make([]AccountInfo, 0, limit+1)
	for _, a := range ac.directory.Load().Config().Accounts() {
		if a.ID > cursor {
			out = append(out, infoOf(a))
		}
	}
	for _, a := range page {
		if _, dup := ac.configAccount(a.ID); !dup {
			out = append(out, storedInfo(a, a.Keys))
		}
	}
	slices.SortFunc(out, func(x, y AccountInfo) int { return cmp.Compare(x.ID, y.ID) })
	if len(out) <= limit {
		return out, "", nil
	}
	out = out[:limit]
	return out, out[limit-1].ID, nil
}

// GetAccount returns one account (GET /v1/admin/accounts/{id}).
func (ac *Accounts) GetAccount(ctx context.Context, id string) (AccountInfo, error) {
	s, err := ac.accountsStore()
	if err != nil {
		return AccountInfo{}, err
	}
	if err := checkAccountID(id); err != nil {
		return AccountInfo{}, err
	}
	if a, ok := ac.configAccount(id); ok {
		return infoOf(a), nil
	}
	a, ok, err := s.GetAccount(ctx, id)
	if err != nil {
		return AccountInfo{}, engine.Unavailable(err)
	}
	if !ok {
		return AccountInfo{}, notFound(id)
	}
	return storedInfo(a, a.Keys), nil
}

// UpdateAccount re-plans, suspends or resumes an API account (PATCH /v1/admin/accounts/{id}).
func (ac *Accounts) UpdateAccount(ctx context.Context, by engine.Actor, id string, u engine.AccountUpdate) (AccountInfo, error) {
	s, err := ac.accountsStore()
	if err != nil {
		return AccountInfo{}, err
	}
	if err := checkAccountID(id); err != nil {
		return AccountInfo{}, err
	}
	if u.Plan != nil {
		if err := ac.checkPlan(*u.Plan); err != nil {
			return AccountInfo{}, err
		}
	}
	if _, ok := ac.configAccount(id); ok {
		return AccountInfo{}, readOnly(id)
	}
	a, ok, err := s.UpdateAccount(ctx, id, u)
	if err != nil {
		return AccountInfo{}, engine.Unavailable(err)
	}
	if !ok {
		return AccountInfo{}, notFound(id)
	}
	var what []any
	if u.Plan != nil {
		what = append(what, "plan", *u.Plan)
	}
	if u.Suspended != nil {
		what = append(what, "suspended", *u.Suspended)
	}
	ac.changed(ctx, by, ActionAccountUpdated, id, what...)
	if u.Plan != nil {
		ac.audit.Record(ctx, by, engine.AuditEntry{Action: engine.AuditAccountPlanChanged, Account: id, AccountCreatedMS: a.CreatedMS, Target: id,
			Details: map[string]string{"plan": *u.Plan}})
	}
	if u.Suspended != nil {
		act := engine.AuditAccountResumed
		if *u.Suspended {
			act = engine.AuditAccountSuspended
		}
		ac.audit.Record(ctx, by, engine.AuditEntry{Action: act, Account: id, AccountCreatedMS: a.CreatedMS, Target: id})
	}
	return storedInfo(a, a.Keys), nil
}

// DeleteAccount deletes an API account with its keys, its webhook and its rules (DELETE
// /v1/admin/accounts/{id}); what stays is spec §15.6's.
func (ac *Accounts) DeleteAccount(ctx context.Context, by engine.Actor, id string) error {
	s, err := ac.accountsStore()
	if err != nil {
		return err
	}
	if err := checkAccountID(id); err != nil {
		return err
	}
	if _, ok := ac.configAccount(id); ok {
		return readOnly(id)
	}
	created := ac.createdMS(ctx, id)
	deleted, err := s.DeleteAccount(ctx, id)
	if err != nil {
		return engine.Unavailable(err)
	}
	if !deleted {
		return notFound(id)
	}
	ac.changed(ctx, by, ActionAccountDeleted, id)
	ac.audit.Record(ctx, by, engine.AuditEntry{Action: engine.AuditAccountDeleted, Account: id, AccountCreatedMS: created, Target: id})
	// The account is gone, so its webhook and rules are never used again; they are removed
	// so that an account created with the same id does not inherit them.
	if _, err := ac.webhooks.DeleteWebhook(ctx, id); err != nil {
		ac.log.Warn("accounts: deleted account's webhook not removed", "account", id, "err", err)
	}
	if err := ac.rules.DeleteAll(ctx, id); err != nil {
		ac.log.Warn("accounts: deleted account's rules not all removed", "account", id, "err", err)
	}
	return nil
}

// IssueKey issues a new API key to an API account (POST .../keys): the key is returned
// here only, and the store keeps its SHA-256.
func (ac *Accounts) IssueKey(ctx context.Context, by engine.Actor, account, name string) (IssuedKey, error) {
	s, err := ac.accountsStore()
	if err != nil {
		return IssuedKey{}, err
	}
	if err := checkAccountID(account); err != nil {
		return IssuedKey{}, err
	}
	if by.Operator == nil {
		// An account issuing itself a key while suspended could keep it past a resume
		// (spec §15.6); its operator still can.
		if a, ok := ac.directory.Load().Account(account); ok {
			if err := engine.Active(a); err != nil {
				return IssuedKey{}, err
			}
		}
	}
	if err := engine.CheckKeyName(name); err != nil {
		return IssuedKey{}, err
	}
	if _, ok := ac.configAccount(account); ok {
		return IssuedKey{}, readOnly(account)
	}
	key := NewAPIKey()
	k, err := s.IssueKey(ctx, engine.StoredKey{ID: newKeyID(), Account: account, Name: name, Prefix: key[:keyPrefixLen], Hash: engine.HashKey(key)})
	switch {
	case errors.Is(err, engine.ErrNoAccount):
		return IssuedKey{}, notFound(account)
	case errors.Is(err, engine.ErrTooManyKeys):
		return IssuedKey{}, engine.NewError(engine.CodeTooManyKeys, fmt.Sprintf("an account holds at most %d keys; revoke one first", engine.MaxKeysPerAccount))
	case err != nil:
		return IssuedKey{}, engine.Unavailable(err)
	}
	ac.changed(ctx, by, ActionKeyIssued, account, "key_id", k.ID)
	ac.audit.Record(ctx, by, engine.AuditEntry{Action: engine.AuditKeyIssued, Account: account, AccountCreatedMS: ac.createdMS(ctx, account), Target: k.ID,
		Details: map[string]string{"name": name}})
	return IssuedKey{KeyInfo: keyInfo(k), Key: key}, nil
}

func keyInfo(k engine.StoredKey) KeyInfo {
	return KeyInfo{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedMS: k.CreatedMS, Source: engine.SourceAPI}
}

// ListKeys lists an account's keys without their secrets (GET .../keys). A configured
// account's keys are listed as config-1, config-2... in configuration order.
func (ac *Accounts) ListKeys(ctx context.Context, account string) ([]KeyInfo, error) {
	s, err := ac.accountsStore()
	if err != nil {
		return nil, err
	}
	if err := checkAccountID(account); err != nil {
		return nil, err
	}
	if a, ok := ac.configAccount(account); ok {
		out := make([]KeyInfo, a.ConfigKeys())
		for i := range out {
			out[i] = KeyInfo{ID: fmt.Sprintf("config-%d", i+1), Source: engine.SourceConfig}
		}
		return out, nil
	}
	if _, ok, err := s.GetAccount(ctx, account); err != nil {
		return nil, engine.Unavailable(err)
	} else if !ok {
		return nil, notFound(account)
	}
	keys, err := s.AccountKeys(ctx, account)
	if err != nil {
		return nil, engine.Unavailable(err)
	}
	out := make([]KeyInfo, len(keys))
	for i, k := range keys {
		out[i] = keyInfo(k)
	}
	return out, nil
}

// RevokeKey revokes one key of an API account (DELETE .../keys/{key_id}); it stops
// authenticating on every instance within 1 s.
func (ac *Accounts) RevokeKey(ctx context.Context, by engine.Actor, account, keyID string) error {
	s, err := ac.accountsStore()
	if err != nil {
		return err
	}
	if err := checkAccountID(account); err != nil {
		return err
	}
	if _, ok := ac.configAccount(account); ok {
		return readOnly(account)
	}
	if !engine.ValidKeyID(keyID) {
		return engine.NewError(engine.CodeAPIKeyNotFound, "no such key")
	}
	revoked, err := s.RevokeKey(ctx, account, keyID)
	if err != nil {
		return engine.Unavailable(err)
	}
	if !revoked {
		if _, ok, err := s.GetAccount(ctx, account); err == nil && !ok {
			return notFound(account)
		}
		return engine.NewError(engine.CodeAPIKeyNotFound, "no such key")
	}
	ac.changed(ctx, by, ActionKeyRevoked, account, "key_id", keyID)
	ac.audit.Record(ctx, by, engine.AuditEntry{Action: engine.AuditKeyRevoked, Account: account, AccountCreatedMS: ac.createdMS(ctx, account), Target: keyID})
	return nil
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

// createdMS returns the CreatedMS of the stored account id, from the store itself (a
// directory may lag by a poll); 0 for a configured account or one the store does not have.
func (ac *Accounts) createdMS(ctx context.Context, id string) int64 {
	if _, ok := ac.configAccount(id); ok || ac.store == nil {
		return 0
	}
	if a, ok, err := ac.store.GetAccount(ctx, id); err == nil && ok {
		return a.CreatedMS
	}
	return 0
}
