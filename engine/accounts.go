package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Accounts at runtime (spec §15): the configuration's accounts merged with those the
// admin API keeps in an AccountStore. The merged Directory is cached in process, so
// authentication never reaches the store; a poller reads the store's accounts version
// every AccountsPollInterval and reloads the whole set when it changed, and a write made
// on this instance is reloaded at once.

// AccountsPollInterval is how often WatchAccounts reads the store's accounts version.
const AccountsPollInterval = 250 * time.Millisecond

// Error codes of the admin and account routes (spec §15.9).
const (
	CodeAccountSuspended Code = "account_suspended"
	CodeAccountExists    Code = "account_exists"
	CodeAccountNotFound  Code = "account_not_found"
	CodeAPIKeyNotFound   Code = "api_key_not_found"
	CodeConfigReadOnly   Code = "config_read_only"
	CodeTooManyKeys      Code = "too_many_keys"
	CodeUnknownPlan      Code = "unknown_plan"
)

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
	Source    AccountSource
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
	Source    AccountSource
}

// IssuedKey is a key just issued: the only time the key itself is returned.
type IssuedKey struct {
	KeyInfo
	Key string
}

// Actor is who asks for a change: an operator, or (Operator nil) the account itself on its
// own routes.
type Actor struct {
	Operator *Operator
	// Account is the account acting on its own routes (Operator nil).
	Account string
}

// accountState is the engine's view of the AccountStore: the last snapshot loaded.
type accountState struct {
	mu       sync.Mutex // serialises loads and directory swaps
	snap     AccountsSnapshot
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
func (e *Engine) AuthenticateOperator(key string) (*Operator, bool) {
	return e.directory.Load().LookupOperator(key)
}

// accountsStore returns the AccountStore, or an error when the engine has none.
func (e *Engine) accountsStore() (AccountStore, error) {
	if e.accounts == nil {
		return nil, &Error{Code: CodeInternal, Message: "internal error", cause: errors.New("engine: no account store")}
	}
	return e.accounts, nil
}

// LoadAccounts reads the store's accounts and serves them with the configuration's. An API
// account whose id the configuration also defines, or whose plan it does not define, is an
// error naming it (spec §15.2): start-up refuses it.
func (e *Engine) LoadAccounts(ctx context.Context) error {
	if e.accounts == nil {
		return nil
	}
	snap, err := e.accounts.LoadAccounts(ctx)
	if err != nil {
		return fmt.Errorf("load accounts: %w", err)
	}
	st := &e.acct
	st.mu.Lock()
	defer st.mu.Unlock()
	m, conflicts, unknown := e.directory.Load().merge(&snap)
	if err := conflictError(conflicts, unknown, &snap); err != nil {
		return err
	}
	st.snap, st.loaded = snap, true
	st.gen++
	e.directory.Store(m)
	return nil
}

// CheckDirectory reports, as an error naming it, an account created through the API whose
// id d (a new configuration's directory) also defines, or whose plan d does not define; a
// reload is refused then (spec §15.2). It reads the cached accounts, not the store.
func (e *Engine) CheckDirectory(d *Directory) error {
	st := &e.acct
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.loaded {
		return nil
	}
	_, conflicts, unknown := d.merge(&st.snap)
	return conflictError(conflicts, unknown, &st.snap)
}

func conflictError(conflicts, unknown []string, snap *AccountsSnapshot) error {
	if len(conflicts) > 0 {
		return fmt.Errorf("account %q is defined in the configuration and was also created through the admin API; "+
			"delete one of them", conflicts[0])
	}
	if len(unknown) > 0 {
		i, _ := slices.BinarySearchFunc(snap.Accounts, unknown[0], func(a StoredAccount, id string) int { return strings.Compare(a.ID, id) })
		return fmt.Errorf("account %q (created through the admin API) has plan %q, which the configuration does not define",
			unknown[0], snap.Accounts[i].Plan)
	}
	return nil
}

// setConfigDirectory serves d's configuration with the store's accounts last loaded.
func (e *Engine) setConfigDirectory(d *Directory) {
	st := &e.acct
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.loaded {
		m, conflicts, unknown := d.merge(&st.snap)
		e.logConflicts(conflicts, unknown, true)
		d = m
	}
	e.directory.Store(d)
}

// logConflicts logs the API accounts left out of the directory (once per version unless
// always).
func (e *Engine) logConflicts(conflicts, unknown []string, always bool) {
	if len(conflicts)+len(unknown) == 0 {
		return
	}
	st := &e.acct
	if !always && st.reported == st.snap.Version {
		return
	}
	st.reported = st.snap.Version
	for _, id := range conflicts {
		e.log.Error("accounts: an account created through the admin API has the id of a configured account; it is not served",
			"account", id)
	}
	for _, id := range unknown {
		e.log.Error("accounts: an account created through the admin API names a plan the configuration does not define; it is not served",
			"account", id)
	}
}

// refresh reloads the store's accounts when their version is not the one loaded (or
// always when force), and serves them. Versions only grow, except when the store lost
// data (a Redis failover or flush): any other version than the one loaded is reloaded.
// A load that another, at least as new, overtook (a poll racing a write made here, or two
// writes) is dropped; were it wrong to drop, the next poll catches up.
func (e *Engine) refresh(ctx context.Context, force bool) error {
	st := &e.acct
	st.mu.Lock()
	gen := st.gen
	st.mu.Unlock()
	if !force {
		v, err := e.accounts.AccountsVersion(ctx)
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
	snap, err := e.accounts.LoadAccounts(ctx)
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
	m, conflicts, unknown := e.directory.Load().merge(&snap)
	e.logConflicts(conflicts, unknown, false)
	e.directory.Store(m)
	return nil
}

// WatchAccounts keeps the served accounts in step with the store until ctx ends: it reads
// the accounts version every AccountsPollInterval and reloads the accounts when it changed,
// so a change made on any instance is in force here within about 250 ms plus a round trip
// (spec §15.2). While the store does not answer, the accounts last loaded are served.
func (e *Engine) WatchAccounts(ctx context.Context) {
	if e.accounts == nil {
		return
	}
	t := time.NewTicker(AccountsPollInterval)
	defer t.Stop()
	failing := false
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := e.refresh(pctx, false)
		cancel()
		switch {
		case err == nil && failing:
			e.log.Info("accounts: poll recovered")
			failing = false
		case err != nil && ctx.Err() == nil && !failing:
			e.log.Warn("accounts: poll failed; serving the accounts last loaded until it recovers", "err", err)
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
func (e *Engine) changed(ctx context.Context, by Actor, action AdminAction, account string, attrs ...any) {
	args := []any{"action", string(action), "account", account}
	if by.Operator != nil {
		args = append(args, "operator", by.Operator.ID)
	} else {
		args = append(args, "by_account", true)
	}
	if o := originOf(ctx); o.RequestID != "" {
		args = append(args, "client", o.Client, "request_id", o.RequestID)
	}
	e.log.Info("accounts: change", append(args, attrs...)...)
	if e.onAdmin != nil {
		e.onAdmin(action)
	}
	if err := e.refresh(ctx, true); err != nil {
		e.log.Warn("accounts: reload after a change failed; the poll will pick it up", "err", err)
	}
}

func infoOf(a *Account) AccountInfo {
	return AccountInfo{ID: a.ID, Plan: a.Plan.Name, Source: a.Source, Suspended: a.Suspended, CreatedMS: a.CreatedMS, Keys: a.configKeys}
}

func storedInfo(a StoredAccount, keys int) AccountInfo {
	return AccountInfo{ID: a.ID, Plan: a.Plan, Source: SourceAPI, Suspended: a.Suspended, CreatedMS: a.CreatedMS, Keys: keys}
}

// configAccount returns the configuration's account with id.
func (e *Engine) configAccount(id string) (*Account, bool) {
	a, ok := e.directory.Load().config.Account(id)
	return a, ok
}

func checkAccountID(id string) error {
	if !ValidAccountID(id) {
		return Invalid("id must match [a-z0-9][a-z0-9_-]{0,63}")
	}
	return nil
}

func notFound(id string) error {
	return newError(CodeAccountNotFound, fmt.Sprintf("no account %q", id))
}

func readOnly(id string) error {
	return newError(CodeConfigReadOnly, fmt.Sprintf("account %q is defined in the configuration and cannot be changed through the API", id))
}

// checkPlan checks that plan names a plan accounts may use.
func (e *Engine) checkPlan(plan string) error {
	if !ValidPlanName(plan) {
		return Invalid("plan must match [a-z0-9][a-z0-9_-]{0,63}")
	}
	if _, ok := e.directory.Load().plans[plan]; !ok {
		return newError(CodeUnknownPlan, fmt.Sprintf("no plan %q", plan))
	}
	return nil
}

// CreateAccount creates an API account (POST /v1/admin/accounts).
func (e *Engine) CreateAccount(ctx context.Context, by Actor, id, plan string) (AccountInfo, error) {
	s, err := e.accountsStore()
	if err != nil {
		return AccountInfo{}, err
	}
	if err := checkAccountID(id); err != nil {
		return AccountInfo{}, err
	}
	if err := e.checkPlan(plan); err != nil {
		return AccountInfo{}, err
	}
	if _, ok := e.configAccount(id); ok {
		return AccountInfo{}, newError(CodeAccountExists, fmt.Sprintf("account %q exists", id))
	}
	got, created, err := s.CreateAccount(ctx, StoredAccount{ID: id, Plan: plan})
	if err != nil {
		return AccountInfo{}, unavailable(err)
	}
	if !created {
		return AccountInfo{}, newError(CodeAccountExists, fmt.Sprintf("account %q exists", id))
	}
	e.changed(ctx, by, ActionAccountCreated, id, "plan", plan)
	e.audit.record(ctx, by, AuditEntry{Action: AuditAccountCreated, Account: id, AccountCreatedMS: got.CreatedMS, Target: id,
		Details: map[string]string{"plan": plan}})
	return storedInfo(got, 0), nil
}

// ListAccounts returns up to limit accounts, configured and stored, by id after cursor, and
// the cursor of the next page ("" on the last) (GET /v1/admin/accounts).
func (e *Engine) ListAccounts(ctx context.Context, limit int, cursor string) ([]AccountInfo, string, error) {
	s, err := e.accountsStore()
	if err != nil {
		return nil, "", err
	}
	if limit < 1 || limit > MaxAccountsPage {
		return nil, "", Invalid("limit must be from 1 to 1000")
	}
	if cursor != "" && !ValidAccountID(cursor) {
		return nil, "", Invalid("cursor is not one this API returned")
	}
	page, err := s.ListAccounts(ctx, cursor, limit+1)
	if err != nil {
		return nil, "", unavailable(err)
	}
	out := make([]AccountInfo, 0, limit+1)
	for _, a := range e.directory.Load().config.accounts {
		if a.ID > cursor {
			out = append(out, infoOf(a))
		}
	}
	for _, a := range page {
		if _, dup := e.configAccount(a.ID); !dup {
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
func (e *Engine) GetAccount(ctx context.Context, id string) (AccountInfo, error) {
	s, err := e.accountsStore()
	if err != nil {
		return AccountInfo{}, err
	}
	if err := checkAccountID(id); err != nil {
		return AccountInfo{}, err
	}
	if a, ok := e.configAccount(id); ok {
		return infoOf(a), nil
	}
	a, ok, err := s.GetAccount(ctx, id)
	if err != nil {
		return AccountInfo{}, unavailable(err)
	}
	if !ok {
		return AccountInfo{}, notFound(id)
	}
	return storedInfo(a, a.Keys), nil
}

// UpdateAccount re-plans, suspends or resumes an API account (PATCH /v1/admin/accounts/{id}).
func (e *Engine) UpdateAccount(ctx context.Context, by Actor, id string, u AccountUpdate) (AccountInfo, error) {
	s, err := e.accountsStore()
	if err != nil {
		return AccountInfo{}, err
	}
	if err := checkAccountID(id); err != nil {
		return AccountInfo{}, err
	}
	if u.Plan != nil {
		if err := e.checkPlan(*u.Plan); err != nil {
			return AccountInfo{}, err
		}
	}
	if _, ok := e.configAccount(id); ok {
		return AccountInfo{}, readOnly(id)
	}
	a, ok, err := s.UpdateAccount(ctx, id, u)
	if err != nil {
		return AccountInfo{}, unavailable(err)
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
	e.changed(ctx, by, ActionAccountUpdated, id, what...)
	if u.Plan != nil {
		e.audit.record(ctx, by, AuditEntry{Action: AuditAccountPlanChanged, Account: id, AccountCreatedMS: a.CreatedMS, Target: id,
			Details: map[string]string{"plan": *u.Plan}})
	}
	if u.Suspended != nil {
		act := AuditAccountResumed
		if *u.Suspended {
			act = AuditAccountSuspended
		}
		e.audit.record(ctx, by, AuditEntry{Action: act, Account: id, AccountCreatedMS: a.CreatedMS, Target: id})
	}
	return storedInfo(a, a.Keys), nil
}

// DeleteAccount deletes an API account with its keys, its webhook and its rules (DELETE
// /v1/admin/accounts/{id}); what stays is spec §15.6's.
func (e *Engine) DeleteAccount(ctx context.Context, by Actor, id string) error {
	s, err := e.accountsStore()
	if err != nil {
		return err
	}
	if err := checkAccountID(id); err != nil {
		return err
	}
	if _, ok := e.configAccount(id); ok {
		return readOnly(id)
	}
	created := e.createdMS(ctx, id)
	deleted, err := s.DeleteAccount(ctx, id)
	if err != nil {
		return unavailable(err)
	}
	if !deleted {
		return notFound(id)
	}
	e.changed(ctx, by, ActionAccountDeleted, id)
	e.audit.record(ctx, by, AuditEntry{Action: AuditAccountDeleted, Account: id, AccountCreatedMS: created, Target: id})
	// The account is gone, so its webhook and rules are never used again; they are removed
	// so that an account created with the same id does not inherit them.
	if _, err := e.store.Webhooks.DeleteWebhook(ctx, id); err != nil {
		e.log.Warn("accounts: deleted account's webhook not removed", "account", id, "err", err)
	}
	if err := e.deleteRules(ctx, id); err != nil {
		e.log.Warn("accounts: deleted account's rules not all removed", "account", id, "err", err)
	}
	return nil
}

// IssueKey issues a new API key to an API account (POST .../keys): the key is returned
// here only, and the store keeps its SHA-256.
func (e *Engine) IssueKey(ctx context.Context, by Actor, account, name string) (IssuedKey, error) {
	s, err := e.accountsStore()
	if err != nil {
		return IssuedKey{}, err
	}
	if err := checkAccountID(account); err != nil {
		return IssuedKey{}, err
	}
	if by.Operator == nil {
		// An account issuing itself a key while suspended could keep it past a resume
		// (spec §15.6); its operator still can.
		if a, ok := e.directory.Load().Account(account); ok {
			if err := Active(a); err != nil {
				return IssuedKey{}, err
			}
		}
	}
	if err := CheckKeyName(name); err != nil {
		return IssuedKey{}, err
	}
	if _, ok := e.configAccount(account); ok {
		return IssuedKey{}, readOnly(account)
	}
	key := NewAPIKey()
	k, err := s.IssueKey(ctx, StoredKey{ID: newKeyID(), Account: account, Name: name, Prefix: key[:keyPrefixLen], Hash: HashKey(key)})
	switch {
	case errors.Is(err, ErrNoAccount):
		return IssuedKey{}, notFound(account)
	case errors.Is(err, ErrTooManyKeys):
		return IssuedKey{}, newError(CodeTooManyKeys, fmt.Sprintf("an account holds at most %d keys; revoke one first", MaxKeysPerAccount))
	case err != nil:
		return IssuedKey{}, unavailable(err)
	}
	e.changed(ctx, by, ActionKeyIssued, account, "key_id", k.ID)
	e.audit.record(ctx, by, AuditEntry{Action: AuditKeyIssued, Account: account, AccountCreatedMS: e.createdMS(ctx, account), Target: k.ID,
		Details: map[string]string{"name": name}})
	return IssuedKey{KeyInfo: keyInfo(k), Key: key}, nil
}

func keyInfo(k StoredKey) KeyInfo {
	return KeyInfo{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedMS: k.CreatedMS, Source: SourceAPI}
}

// ListKeys lists an account's keys without their secrets (GET .../keys). A configured
// account's keys are listed as config-1, config-2... in configuration order.
func (e *Engine) ListKeys(ctx context.Context, account string) ([]KeyInfo, error) {
	s, err := e.accountsStore()
	if err != nil {
		return nil, err
	}
	if err := checkAccountID(account); err != nil {
		return nil, err
	}
	if a, ok := e.configAccount(account); ok {
		out := make([]KeyInfo, a.configKeys)
		for i := range out {
			out[i] = KeyInfo{ID: fmt.Sprintf("config-%d", i+1), Source: SourceConfig}
		}
		return out, nil
	}
	if _, ok, err := s.GetAccount(ctx, account); err != nil {
		return nil, unavailable(err)
	} else if !ok {
		return nil, notFound(account)
	}
	keys, err := s.AccountKeys(ctx, account)
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]KeyInfo, len(keys))
	for i, k := range keys {
		out[i] = keyInfo(k)
	}
	return out, nil
}

// RevokeKey revokes one key of an API account (DELETE .../keys/{key_id}); it stops
// authenticating on every instance within 1 s.
func (e *Engine) RevokeKey(ctx context.Context, by Actor, account, keyID string) error {
	s, err := e.accountsStore()
	if err != nil {
		return err
	}
	if err := checkAccountID(account); err != nil {
		return err
	}
	if _, ok := e.configAccount(account); ok {
		return readOnly(account)
	}
	if !ValidKeyID(keyID) {
		return newError(CodeAPIKeyNotFound, "no such key")
	}
	revoked, err := s.RevokeKey(ctx, account, keyID)
	if err != nil {
		return unavailable(err)
	}
	if !revoked {
		if _, ok, err := s.GetAccount(ctx, account); err == nil && !ok {
			return notFound(account)
		}
		return newError(CodeAPIKeyNotFound, "no such key")
	}
	e.changed(ctx, by, ActionKeyRevoked, account, "key_id", keyID)
	e.audit.record(ctx, by, AuditEntry{Action: AuditKeyRevoked, Account: account, AccountCreatedMS: e.createdMS(ctx, account), Target: keyID})
	return nil
}

// Active refuses a suspended account's decisions, leases, rule writes, webhook writes and
// tests, and the keys it would issue itself, with account_suspended (spec §15.6).
func Active(a *Account) error {
	if a.Suspended {
		return newError(CodeAccountSuspended, "account "+a.ID+" is suspended")
	}
	return nil
}
