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

	"github.com/leashd/leash/engine"
)

// AdminPort is what the admin and key routes need of a store: the AccountStore role's
// reads and writes of single accounts and keys.
type AdminPort interface {
	// CreateAccount is engine.AccountStore's.
	CreateAccount(ctx context.Context, a engine.StoredAccount) (got engine.StoredAccount, created bool, err error)
	// GetAccount is engine.AccountStore's.
	GetAccount(ctx context.Context, id string) (a engine.StoredAccount, ok bool, err error)
	// ListAccounts is engine.AccountStore's.
	ListAccounts(ctx context.Context, after string, limit int) ([]engine.StoredAccount, error)
	// UpdateAccount is engine.AccountStore's.
	UpdateAccount(ctx context.Context, id string, u engine.AccountUpdate) (a engine.StoredAccount, ok bool, err error)
	// DeleteAccount is engine.AccountStore's.
	DeleteAccount(ctx context.Context, id string) (deleted bool, err error)
	// IssueKey is engine.AccountStore's.
	IssueKey(ctx context.Context, k engine.StoredKey) (engine.StoredKey, error)
	// AccountKeys is engine.AccountStore's.
	AccountKeys(ctx context.Context, account string) ([]engine.StoredKey, error)
	// RevokeKey is engine.AccountStore's.
	RevokeKey(ctx context.Context, account, keyID string) (revoked bool, err error)
}

// AdminOptions configures Admin.
type AdminOptions struct {
	// Store keeps the accounts and keys made through the admin API; without one every
	// change is an internal error.
	Store AdminPort
	// Logger receives the changes; default slog.Default().
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

// Admin makes the changes of the admin and key routes (spec §15.3–§15.6) in an
// AdminPort, and has accounts serve each at once.
type Admin struct {
	store    AdminPort // nil: configured accounts only
	accounts *Accounts
	log      *slog.Logger
	onAdmin  func(AdminAction) // OnAdminChange
	audit    Auditor
	webhooks WebhookRemover
	rules    RuleRemover
}

// NewAdmin returns the admin capability; accounts serves what it changes.
func NewAdmin(accounts *Accounts, o AdminOptions) *Admin {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Admin{store: o.Store, accounts: accounts, log: o.Logger, onAdmin: o.OnAdminChange, audit: o.Audit,
		webhooks: o.Webhooks, rules: o.Rules}
}

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

// accountsStore returns the AdminPort, or an error when none was given.
func (ad *Admin) accountsStore() (AdminPort, error) {
	if ad.store == nil {
		return nil, engine.Internal(errors.New("engine: no account store"))
	}
	return ad.store, nil
}

// changed records a change made on this instance: it is logged, counted and served here at once.
func (ad *Admin) changed(ctx context.Context, by engine.Actor, action AdminAction, account string, attrs ...any) {
	args := []any{"action", string(action), "account", account}
	if by.Operator != nil {
		args = append(args, "operator", by.Operator.ID)
	} else {
		args = append(args, "by_account", true)
	}
	if o := engine.OriginOf(ctx); o.RequestID != "" {
		args = append(args, "client", o.Client, "request_id", o.RequestID)
	}
	ad.log.Info("accounts: change", append(args, attrs...)...)
	if ad.onAdmin != nil {
		ad.onAdmin(action)
	}
	if err := ad.accounts.refresh(ctx, true); err != nil {
		ad.log.Warn("accounts: reload after a change failed; the poll will pick it up", "err", err)
	}
}

func infoOf(a *engine.Account) AccountInfo {
	return AccountInfo{ID: a.ID, Plan: a.Plan.Name, Source: a.Source, Suspended: a.Suspended, CreatedMS: a.CreatedMS, Keys: a.ConfigKeys()}
}

func storedInfo(a engine.StoredAccount, keys int) AccountInfo {
	return AccountInfo{ID: a.ID, Plan: a.Plan, Source: engine.SourceAPI, Suspended: a.Suspended, CreatedMS: a.CreatedMS, Keys: keys}
}

// configAccount returns the configuration's account with id.
func (ad *Admin) configAccount(id string) (*engine.Account, bool) {
	a, ok := ad.accounts.Directory().Config().Account(id)
	return a, ok
}

func readOnly(id string) error {
	return engine.NewError(engine.CodeConfigReadOnly, fmt.Sprintf("account %q is defined in the configuration and cannot be changed through the API", id))
}

// checkPlan checks that plan names a plan accounts may use.
func (ad *Admin) checkPlan(plan string) error {
	if !engine.ValidPlanName(plan) {
		return engine.Invalid("plan must match [a-z0-9][a-z0-9_-]{0,63}")
	}
	if _, ok := ad.accounts.Directory().Plans()[plan]; !ok {
		return engine.NewError(engine.CodeUnknownPlan, fmt.Sprintf("no plan %q", plan))
	}
	return nil
}

// CreateAccount creates an API account (POST /v1/admin/accounts).
func (ad *Admin) CreateAccount(ctx context.Context, by engine.Actor, id, plan string) (AccountInfo, error) {
	s, err := ad.accountsStore()
	if err != nil {
		return AccountInfo{}, err
	}
	if err := checkAccountID(id); err != nil {
		return AccountInfo{}, err
	}
	if err := ad.checkPlan(plan); err != nil {
		return AccountInfo{}, err
	}
	if _, ok := ad.configAccount(id); ok {
		return AccountInfo{}, engine.NewError(engine.CodeAccountExists, fmt.Sprintf("account %q exists", id))
	}
	got, created, err := s.CreateAccount(ctx, engine.StoredAccount{ID: id, Plan: plan})
	if err != nil {
		return AccountInfo{}, engine.Unavailable(err)
	}
	if !created {
		return AccountInfo{}, engine.NewError(engine.CodeAccountExists, fmt.Sprintf("account %q exists", id))
	}
	ad.changed(ctx, by, ActionAccountCreated, id, "plan", plan)
	ad.audit.Record(ctx, by, engine.AuditEntry{Action: engine.AuditAccountCreated, Account: id, AccountCreatedMS: got.CreatedMS, Target: id,
		Details: map[string]string{"plan": plan}})
	return storedInfo(got, 0), nil
}

// ListAccounts returns up to limit accounts, configured and stored, by id after cursor, and
// the cursor of the next page ("" on the last) (GET /v1/admin/accounts).
func (ad *Admin) ListAccounts(ctx context.Context, limit int, cursor string) ([]AccountInfo, string, error) {
	s, err := ad.accountsStore()
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
	for _, a := range ad.accounts.Directory().Config().Accounts() {
		if a.ID > cursor {
			out = append(out, infoOf(a))
		}
	}
	for _, a := range page {
		if _, dup := ad.configAccount(a.ID); !dup {
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
func (ad *Admin) GetAccount(ctx context.Context, id string) (AccountInfo, error) {
	s, err := ad.accountsStore()
	if err != nil {
		return AccountInfo{}, err
	}
	if err := checkAccountID(id); err != nil {
		return AccountInfo{}, err
	}
	if a, ok := ad.configAccount(id); ok {
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
func (ad *Admin) UpdateAccount(ctx context.Context, by engine.Actor, id string, u engine.AccountUpdate) (AccountInfo, error) {
	s, err := ad.accountsStore()
	if err != nil {
		return AccountInfo{}, err
	}
	if err := checkAccountID(id); err != nil {
		return AccountInfo{}, err
	}
	if u.Plan != nil {
		if err := ad.checkPlan(*u.Plan); err != nil {
			return AccountInfo{}, err
		}
	}
	if _, ok := ad.configAccount(id); ok {
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
	ad.changed(ctx, by, ActionAccountUpdated, id, what...)
	if u.Plan != nil {
		ad.audit.Record(ctx, by, engine.AuditEntry{Action: engine.AuditAccountPlanChanged, Account: id, AccountCreatedMS: a.CreatedMS, Target: id,
			Details: map[string]string{"plan": *u.Plan}})
	}
	if u.Suspended != nil {
		act := engine.AuditAccountResumed
		if *u.Suspended {
			act = engine.AuditAccountSuspended
		}
		ad.audit.Record(ctx, by, engine.AuditEntry{Action: act, Account: id, AccountCreatedMS: a.CreatedMS, Target: id})
	}
	return storedInfo(a, a.Keys), nil
}

// DeleteAccount deletes an API account with its keys, its webhook and its rules (DELETE
// /v1/admin/accounts/{id}); what stays is spec §15.6's.
func (ad *Admin) DeleteAccount(ctx context.Context, by engine.Actor, id string) error {
	s, err := ad.accountsStore()
	if err != nil {
		return err
	}
	if err := checkAccountID(id); err != nil {
		return err
	}
	if _, ok := ad.configAccount(id); ok {
		return readOnly(id)
	}
	created := ad.createdMS(ctx, id)
	deleted, err := s.DeleteAccount(ctx, id)
	if err != nil {
		return engine.Unavailable(err)
	}
	if !deleted {
		return notFound(id)
	}
	ad.changed(ctx, by, ActionAccountDeleted, id)
	ad.audit.Record(ctx, by, engine.AuditEntry{Action: engine.AuditAccountDeleted, Account: id, AccountCreatedMS: created, Target: id})
	// The account is gone, so its webhook and rules are never used again; they are removed
	// so that an account created with the same id does not inherit them.
	if _, err := ad.webhooks.DeleteWebhook(ctx, id); err != nil {
		ad.log.Warn("accounts: deleted account's webhook not removed", "account", id, "err", err)
	}
	if err := ad.rules.DeleteAll(ctx, id); err != nil {
		ad.log.Warn("accounts: deleted account's rules not all removed", "account", id, "err", err)
	}
	return nil
}

// IssueKey issues a new API key to an API account (POST .../keys): the key is returned
// here only, and the store keeps its SHA-256.
func (ad *Admin) IssueKey(ctx context.Context, by engine.Actor, account, name string) (IssuedKey, error) {
	s, err := ad.accountsStore()
	if err != nil {
		return IssuedKey{}, err
	}
	if err := checkAccountID(account); err != nil {
		return IssuedKey{}, err
	}
	if by.Operator == nil {
		// An account issuing itself a key while suspended could keep it past a resume
		// (spec §15.6); its operator still can.
		if a, ok := ad.accounts.Directory().Account(account); ok {
			if err := engine.Active(a); err != nil {
				return IssuedKey{}, err
			}
		}
	}
	if err := engine.CheckKeyName(name); err != nil {
		return IssuedKey{}, err
	}
	if _, ok := ad.configAccount(account); ok {
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
	ad.changed(ctx, by, ActionKeyIssued, account, "key_id", k.ID)
	ad.audit.Record(ctx, by, engine.AuditEntry{Action: engine.AuditKeyIssued, Account: account, AccountCreatedMS: ad.createdMS(ctx, account), Target: k.ID,
		Details: map[string]string{"name": name}})
	return IssuedKey{KeyInfo: keyInfo(k), Key: key}, nil
}

func keyInfo(k engine.StoredKey) KeyInfo {
	return KeyInfo{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedMS: k.CreatedMS, Source: engine.SourceAPI}
}

// ListKeys lists an account's keys without their secrets (GET .../keys). A configured
// account's keys are listed as config-1, config-2... in configuration order.
func (ad *Admin) ListKeys(ctx context.Context, account string) ([]KeyInfo, error) {
	s, err := ad.accountsStore()
	if err != nil {
		return nil, err
	}
	if err := checkAccountID(account); err != nil {
		return nil, err
	}
	if a, ok := ad.configAccount(account); ok {
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
func (ad *Admin) RevokeKey(ctx context.Context, by engine.Actor, account, keyID string) error {
	s, err := ad.accountsStore()
	if err != nil {
		return err
	}
	if err := checkAccountID(account); err != nil {
		return err
	}
	if _, ok := ad.configAccount(account); ok {
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
	ad.changed(ctx, by, ActionKeyRevoked, account, "key_id", keyID)
	ad.audit.Record(ctx, by, engine.AuditEntry{Action: engine.AuditKeyRevoked, Account: account, AccountCreatedMS: ad.createdMS(ctx, account), Target: keyID})
	return nil
}

// createdMS returns the CreatedMS of the stored account id, from the store itself (a
// directory may lag by a poll); 0 for a configured account or one the store does not have.
func (ad *Admin) createdMS(ctx context.Context, id string) int64 {
	if _, ok := ad.configAccount(id); ok || ad.store == nil {
		return 0
	}
	if a, ok, err := ad.store.GetAccount(ctx, id); err == nil && ok {
		return a.CreatedMS
	}
	return 0
}
