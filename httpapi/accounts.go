package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/accounts"
	"github.com/leashd/leash/engine/usage"
	"github.com/leashd/leash/wire"
)

// The admin API and the account's own routes (spec §15): operator routes under
// /v1/admin authenticate an operator key; /v1/account and /v1/keys an account's key.
// Every decision (ids, plans, bounds, config read-only) is the engine's.

// DefaultAccountsPage is the page size of GET /v1/admin/accounts without limit.
const DefaultAccountsPage = 100

func accountRoutes() []route {
	return []route{
		{Route: Route{http.MethodPost, "/v1/admin/accounts"}, operator: true, body: requiredBody, audited: true, serve: createAccount},
		{Route: Route{http.MethodGet, "/v1/admin/accounts"}, operator: true, serve: listAccounts},
		{Route: Route{http.MethodGet, "/v1/admin/accounts/{id}"}, operator: true, serve: getAccount},
		{Route: Route{http.MethodPatch, "/v1/admin/accounts/{id}"}, operator: true, body: requiredBody, audited: true, serve: patchAccount},
		{Route: Route{http.MethodDelete, "/v1/admin/accounts/{id}"}, operator: true, audited: true, serve: deleteAccount},
		{Route: Route{http.MethodPost, "/v1/admin/accounts/{id}/keys"}, operator: true, body: optionalBody, audited: true, serve: adminIssueKey},
		{Route: Route{http.MethodGet, "/v1/admin/accounts/{id}/keys"}, operator: true, serve: adminListKeys},
		{Route: Route{http.MethodDelete, "/v1/admin/accounts/{id}/keys/{key_id}"}, operator: true, audited: true, serve: adminRevokeKey},
		{Route: Route{http.MethodGet, "/v1/account"}, serve: ownAccount},
		{Route: Route{http.MethodGet, "/v1/keys"}, serve: ownKeys},
		{Route: Route{http.MethodPost, "/v1/keys"}, body: optionalBody, audited: true, serve: ownIssueKey},
		{Route: Route{http.MethodDelete, "/v1/keys/{key_id}"}, audited: true, serve: ownRevokeKey},
		{Route: Route{http.MethodGet, "/v1/usage"}, serve: ownUsage},
		{Route: Route{http.MethodGet, "/v1/admin/accounts/{id}/usage"}, operator: true, serve: adminUsage},
		{Route: Route{http.MethodGet, "/v1/namespaces"}, serve: listNamespaces},
		{Route: Route{http.MethodGet, "/v1/namespaces/{ns}/leases"}, serve: listLeases},
		{Route: Route{http.MethodGet, "/v1/admin/audit"}, operator: true, serve: adminAudit},
		{Route: Route{http.MethodGet, "/v1/audit"}, serve: ownAudit},
		{Route: Route{http.MethodPost, "/v1/admin/backup"}, operator: true, serve: backup},
	}
}

// instant formats a store instant as RFC 3339 in UTC with milliseconds; nil for 0 (none).
func instant(ms int64) *string {
	if ms == 0 {
		return nil
	}
	s := time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	return &s
}

func accountOf(i accounts.AccountInfo) wire.Account {
	return wire.Account{ID: i.ID, Plan: i.Plan, Source: string(i.Source), Suspended: i.Suspended, CreatedAt: instant(i.CreatedMS), Keys: i.Keys}
}

func keyOf(k accounts.KeyInfo) wire.APIKey {
	return wire.APIKey{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: instant(k.CreatedMS), Source: string(k.Source)}
}

// actor is who makes a change: the operator of an operator route, else the account itself.
func (x *exchange) actor() engine.Actor {
	if x.acct != nil {
		return engine.Actor{Account: x.acct.ID}
	}
	return engine.Actor{Operator: x.op}
}

// noContent answers 204 with the request id.
func (x *exchange) noContent() {
	x.rw.Header()[RequestIDHeader] = []string{x.requestID()}
	x.rw.WriteHeader(http.StatusNoContent)
}

// query returns the request's query parameters, refusing one this route does not define
// or one given twice, as body members are refused (spec §3.3).
func query(x *exchange, allowed ...string) (map[string]string, error) {
	vals, err := url.ParseQuery(x.r.URL.RawQuery)
	if err != nil {
		return nil, engine.Invalid("the query string is malformed")
	}
	out := make(map[string]string, len(vals))
	for k, v := range vals {
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		if !known {
			return nil, engine.Invalid("unknown query parameter " + strconv.Quote(k))
		}
		if len(v) > 1 {
			return nil, engine.Invalid("duplicate query parameter " + strconv.Quote(k))
		}
		out[k] = v[0]
	}
	return out, nil
}

// createAccount serves POST /v1/admin/accounts {id, plan}: 201 with the account.
func createAccount(x *exchange) {
	a := x.a
	var req wire.CreateAccountRequest
	if err := decodeBody(x.body.Bytes(), &req); err != nil {
		x.engineError(err)
		return
	}
	if !req.ID.Set {
		x.engineError(engine.Invalid("id is required"))
		return
	}
	if !req.Plan.Set {
		x.engineError(engine.Invalid("plan is required"))
		return
	}
	info, err := a.eng.Admin.CreateAccount(x.r.Context(), x.actor(), req.ID.Value, req.Plan.Value)
	if err != nil {
		x.engineError(err)
		return
	}
	r := accountOf(info)
	x.reply(http.StatusCreated, &r)
}

// listAccounts serves GET /v1/admin/accounts?limit=N&cursor=C.
func listAccounts(x *exchange) {
	a := x.a
	q, err := query(x, "limit", "cursor")
	if err != nil {
		x.engineError(err)
		return
	}
	limit := DefaultAccountsPage
	if s, ok := q["limit"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > engine.MaxAccountsPage || strconv.Itoa(n) != s {
			x.engineError(engine.Invalid("limit must be an integer from 1 to 1000"))
			return
		}
		limit = n
	}
	list, next, err := a.eng.Admin.ListAccounts(x.r.Context(), limit, q["cursor"])
	if err != nil {
		x.engineError(err)
		return
	}
	page := wire.AccountPage{Accounts: make([]wire.Account, len(list))}
	for i, info := range list {
		page.Accounts[i] = accountOf(info)
	}
	if next != "" {
		page.NextCursor = &next
	}
	x.reply(http.StatusOK, &page)
}

// getAccount serves GET /v1/admin/accounts/{id}.
func getAccount(x *exchange) {
	a := x.a
	info, err := a.eng.Admin.GetAccount(x.r.Context(), x.r.PathValue("id"))
	if err != nil {
		x.engineError(err)
		return
	}
	r := accountOf(info)
	x.reply(http.StatusOK, &r)
}

// patchAccount serves PATCH /v1/admin/accounts/{id} {plan?, suspended?}.
func patchAccount(x *exchange) {
	a := x.a
	var req wire.UpdateAccountRequest
	if err := decodeBody(x.body.Bytes(), &req); err != nil {
		x.engineError(err)
		return
	}
	info, err := a.eng.Admin.UpdateAccount(x.r.Context(), x.actor(), x.r.PathValue("id"),
		engine.AccountUpdate{Plan: req.Plan.Ptr(), Suspended: req.Suspended.Ptr()})
	if err != nil {
		x.engineError(err)
		return
	}
	r := accountOf(info)
	x.reply(http.StatusOK, &r)
}

// deleteAccount serves DELETE /v1/admin/accounts/{id}: 204.
func deleteAccount(x *exchange) {
	a := x.a
	if err := a.eng.Admin.DeleteAccount(x.r.Context(), x.actor(), x.r.PathValue("id")); err != nil {
		x.engineError(err)
		return
	}
	x.noContent()
}

// issueKey issues a key to account: 201 {id, name, key, prefix, created_at}.
func issueKey(x *exchange, account string) {
	a := x.a
	var req wire.IssueKeyRequest
	if !emptyBody(x.body.Bytes()) {
		if err := decodeBody(x.body.Bytes(), &req); err != nil {
			x.engineError(err)
			return
		}
	}
	k, err := a.eng.Admin.IssueKey(x.r.Context(), x.actor(), account, req.Name.Value)
	if err != nil {
		x.engineError(err)
		return
	}
	r := keyOf(k.KeyInfo)
	r.Key, r.Source = k.Key, ""
	x.reply(http.StatusCreated, &r)
}

// listKeys answers the keys of account.
func listKeys(x *exchange, account string) {
	a := x.a
	keys, err := a.eng.Admin.ListKeys(x.r.Context(), account)
	if err != nil {
		x.engineError(err)
		return
	}
	r := wire.KeyList{Keys: make([]wire.APIKey, len(keys))}
	for i, k := range keys {
		r.Keys[i] = keyOf(k)
	}
	x.reply(http.StatusOK, &r)
}

// revokeKey revokes one key of account: 204.
func revokeKey(x *exchange, account string) {
	a := x.a
	if err := a.eng.Admin.RevokeKey(x.r.Context(), x.actor(), account, x.r.PathValue("key_id")); err != nil {
		x.engineError(err)
		return
	}
	x.noContent()
}

func adminIssueKey(x *exchange)  { issueKey(x, x.r.PathValue("id")) }
func adminListKeys(x *exchange)  { listKeys(x, x.r.PathValue("id")) }
func adminRevokeKey(x *exchange) { revokeKey(x, x.r.PathValue("id")) }
func ownIssueKey(x *exchange)    { issueKey(x, x.acct.ID) }
func ownKeys(x *exchange)        { listKeys(x, x.acct.ID) }
func ownRevokeKey(x *exchange)   { revokeKey(x, x.acct.ID) }

// ownAccount serves GET /v1/account: {id, plan, suspended, plan_limits}.
func ownAccount(x *exchange) {
	p := &x.acct.Plan
	lim := wire.PlanLimits{Algorithms: []string{}, ConcurrentLimit: p.ConcurrentLimit, Webhooks: p.Webhooks,
		MonthlyQuota: p.MonthlyQuota, HardCap: p.HardCap}
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
		if p.Algorithms.Has(alg) {
			lim.Algorithms = append(lim.Algorithms, alg.String())
		}
	}
	x.reply(http.StatusOK, &wire.OwnAccount{ID: x.acct.ID, Plan: p.Name, Suspended: x.acct.Suspended, PlanLimits: lim})
}

// writeUsage answers GET /v1/usage and GET /v1/admin/accounts/{id}/usage.
func (x *exchange) writeUsage(u usage.AccountUsage) {
	out := wire.AccountUsage{Month: monthOf(u.Month), Namespaces: make([]wire.NamespaceUsage, len(u.Namespaces)), Days: daysOf(u.Days)}
	for i, n := range u.Namespaces {
		out.Namespaces[i] = wire.NamespaceUsage{Namespace: n.Namespace, Total: n.Total, Blocked: n.Blocked}
	}
	x.reply(http.StatusOK, &out)
}

// ownUsage serves GET /v1/usage: the account across all its namespaces.
func ownUsage(x *exchange) {
	a := x.a
	u, err := a.eng.Usage.Usage(x.r.Context(), x.acct)
	if err != nil {
		x.engineError(err)
		return
	}
	x.writeUsage(u)
}

// adminUsage serves GET /v1/admin/accounts/{id}/usage: the same body for any account.
func adminUsage(x *exchange) {
	a := x.a
	u, err := a.eng.UsageOf(x.r.Context(), x.r.PathValue("id"))
	if err != nil {
		x.engineError(err)
		return
	}
	x.writeUsage(u)
}

// listNamespaces serves GET /v1/namespaces.
func listNamespaces(x *exchange) {
	a := x.a
	list, err := a.eng.Usage.Namespaces(x.r.Context(), x.acct)
	if err != nil {
		x.engineError(err)
		return
	}
	out := wire.NamespaceList{Namespaces: make([]wire.Namespace, len(list))}
	for i, n := range list {
		out.Namespaces[i] = wire.Namespace{Namespace: n.Namespace, Rules: n.Rules, Total: n.Total, Blocked: n.Blocked}
	}
	x.reply(http.StatusOK, &out)
}

// listLeases serves GET /v1/namespaces/{ns}/leases?key=K.
func listLeases(x *exchange) {
	a := x.a
	q, err := query(x, "key")
	if err != nil {
		x.engineError(err)
		return
	}
	key, ok := q["key"]
	if !ok {
		x.engineError(engine.Invalid("key is required: ?key=K"))
		return
	}
	l, err := a.eng.Leases.List(x.r.Context(), x.acct, x.r.PathValue("ns"), key)
	if err != nil {
		x.engineError(err)
		return
	}
	out := wire.LeaseList{Namespace: l.Namespace, Key: l.Key, Active: l.Active, Limit: l.Limit, Leases: make([]wire.HeldLease, len(l.Leases))}
	for i, v := range l.Leases {
		out.Leases[i] = wire.HeldLease{LeaseID: v.LeaseID, ExpiresInMS: v.ExpiresInMS}
	}
	x.reply(http.StatusOK, &out)
}
