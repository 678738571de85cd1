package metrics

import (
	"context"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/accounts"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// timedAccounts times an engine.AccountStore (the admin API's accounts and keys, spec §15.2)
// under the ops account_* and key_*, as the other roles are timed.
type timedAccounts struct {
	s                                                        engine.AccountStore
	create, get, list, update, del, issue, keys, revoke, ver storeOp
	load                                                     storeOp
}

var _ engine.AccountStore = (*timedAccounts)(nil)

// InstrumentAccounts wraps s so each operation's latency is observed (and traced with tr,
// when not nil).
func (m *Metrics) InstrumentAccounts(s engine.AccountStore, tr trace.Tracer) engine.AccountStore {
	op := func(name string) storeOp { return m.op(name, tr) }
	return &timedAccounts{s: s, create: op("account_create"), get: op("account_get"), list: op("account_list"),
		update: op("account_update"), del: op("account_delete"), issue: op("key_issue"), keys: op("key_list"),
		revoke: op("key_revoke"), ver: op("accounts_version"), load: op("accounts_load")}
}

type accountResult struct {
	a  engine.StoredAccount
	ok bool
}

// CreateAccount times AccountStore.CreateAccount.
func (t *timedAccounts) CreateAccount(ctx context.Context, a engine.StoredAccount) (engine.StoredAccount, bool, error) {
	r, err := timed(ctx, &t.create, func(ctx context.Context) (accountResult, error) {
		got, ok, err := t.s.CreateAccount(ctx, a)
		return accountResult{got, ok}, err
	})
	return r.a, r.ok, err
}

// GetAccount times AccountStore.GetAccount.
func (t *timedAccounts) GetAccount(ctx context.Context, id string) (engine.StoredAccount, bool, error) {
	r, err := timed(ctx, &t.get, func(ctx context.Context) (accountResult, error) {
		got, ok, err := t.s.GetAccount(ctx, id)
		return accountResult{got, ok}, err
	})
	return r.a, r.ok, err
}

// ListAccounts times AccountStore.ListAccounts.
func (t *timedAccounts) ListAccounts(ctx context.Context, after string, limit int) ([]engine.StoredAccount, error) {
	return timed(ctx, &t.list, func(ctx context.Context) ([]engine.StoredAccount, error) { return t.s.ListAccounts(ctx, after, limit) })
}

// UpdateAccount times AccountStore.UpdateAccount.
func (t *timedAccounts) UpdateAccount(ctx context.Context, id string, u engine.AccountUpdate) (engine.StoredAccount, bool, error) {
	r, err := timed(ctx, &t.update, func(ctx context.Context) (accountResult, error) {
		got, ok, err := t.s.UpdateAccount(ctx, id, u)
		return accountResult{got, ok}, err
	})
	return r.a, r.ok, err
}

// DeleteAccount times AccountStore.DeleteAccount.
func (t *timedAccounts) DeleteAccount(ctx context.Context, id string) (bool, error) {
	return timed(ctx, &t.del, func(ctx context.Context) (bool, error) { return t.s.DeleteAccount(ctx, id) })
}

// IssueKey times AccountStore.IssueKey.
func (t *timedAccounts) IssueKey(ctx context.Context, k engine.StoredKey) (engine.StoredKey, error) {
	return timed(ctx, &t.issue, func(ctx context.Context) (engine.StoredKey, error) { return t.s.IssueKey(ctx, k) })
}

// AccountKeys times AccountStore.AccountKeys.
func (t *timedAccounts) AccountKeys(ctx context.Context, account string) ([]engine.StoredKey, error) {
	return timed(ctx, &t.keys, func(ctx context.Context) ([]engine.StoredKey, error) { return t.s.AccountKeys(ctx, account) })
}

// RevokeKey times AccountStore.RevokeKey.
func (t *timedAccounts) RevokeKey(ctx context.Context, account, keyID string) (bool, error) {
	return timed(ctx, &t.revoke, func(ctx context.Context) (bool, error) { return t.s.RevokeKey(ctx, account, keyID) })
}

// AccountsVersion times AccountStore.AccountsVersion.
func (t *timedAccounts) AccountsVersion(ctx context.Context) (int64, error) {
	return timed(ctx, &t.ver, t.s.AccountsVersion)
}

// LoadAccounts times AccountStore.LoadAccounts.
func (t *timedAccounts) LoadAccounts(ctx context.Context) (engine.AccountsSnapshot, error) {
	return timed(ctx, &t.load, t.s.LoadAccounts)
}

// AdminChanges registers leash_admin_changes_total (spec §15.8), every action at 0, and
// returns the function that counts one change of an action.
func (m *Metrics) AdminChanges() func(action string) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leash_admin_changes_total",
		Help: "Changes made through the admin and key routes, by action (spec §15.8).",
	}, []string{"action"})
	m.Registry.MustRegister(c)
	for _, a := range []accounts.AdminAction{accounts.ActionAccountCreated, accounts.ActionAccountUpdated, accounts.ActionAccountDeleted,
		accounts.ActionKeyIssued, accounts.ActionKeyRevoked} {
		c.WithLabelValues(string(a))
	}
	return func(action string) { c.WithLabelValues(action).Inc() }
}

// AuthGuard registers leash_auth_failures_total and leash_auth_throttled_total (spec
// §15.7), read from failures and refused at each scrape.
func (m *Metrics) AuthGuard(failures, refused func() uint64) {
	m.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leash_auth_failures_total",
			Help: "Calls on /v1 refused 401 for a missing or unknown key (spec §15.7).",
		}, func() float64 { return float64(failures()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leash_auth_throttled_total",
			Help: "Calls on /v1 refused 429 too_many_auth_failures: their client address failed authentication too often (spec §15.7).",
		}, func() float64 { return float64(refused()) }),
	)
}
