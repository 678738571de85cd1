package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/leashd/leash/engine"
)

// The admin API and the account's own routes (spec §15): operator routes under
// /v1/admin authenticate an operator key; /v1/account and /v1/keys an account's key.
// Every decision (ids, plans, bounds, config read-only) is the engine's.

// DefaultAccountsPage is the page size of GET /v1/admin/accounts without limit.
const DefaultAccountsPage = 100

func accountRoutes() []route {
	return []route{
		{Route: Route{http.MethodPost, "/v1/admin/accounts"}, operator: true, body: requiredBody, audited: true, serve: (*API).createAccount},
		{Route: Route{http.MethodGet, "/v1/admin/accounts"}, operator: true, serve: (*API).listAccounts},
		{Route: Route{http.MethodGet, "/v1/admin/accounts/{id}"}, operator: true, serve: (*API).getAccount},
		{Route: Route{http.MethodPatch, "/v1/admin/accounts/{id}"}, operator: true, body: requiredBody, audited: true, serve: (*API).patchAccount},
		{Route: Route{http.MethodDelete, "/v1/admin/accounts/{id}"}, operator: true, audited: true, serve: (*API).deleteAccount},
		{Route: Route{http.MethodPost, "/v1/admin/accounts/{id}/keys"}, operator: true, body: optionalBody, audited: true, serve: (*API).adminIssueKey},
		{Route: Route{http.MethodGet, "/v1/admin/accounts/{id}/keys"}, operator: true, serve: (*API).adminListKeys},
		{Route: Route{http.MethodDelete, "/v1/admin/accounts/{id}/keys/{key_id}"}, operator: true, audited: true, serve: (*API).adminRevokeKey},
		{Route: Route{http.MethodGet, "/v1/account"}, serve: (*API).ownAccount},
		{Route: Route{http.MethodGet, "/v1/keys"}, serve: (*API).ownKeys},
		{Route: Route{http.MethodPost, "/v1/keys"}, body: optionalBody, audited: true, serve: (*API).ownIssueKey},
		{Route: Route{http.MethodDelete, "/v1/keys/{key_id}"}, audited: true, serve: (*API).ownRevokeKey},
		{Route: Route{http.MethodGet, "/v1/usage"}, serve: (*API).ownUsage},
		{Route: Route{http.MethodGet, "/v1/admin/accounts/{id}/usage"}, operator: true, serve: (*API).adminUsage},
		{Route: Route{http.MethodGet, "/v1/namespaces"}, serve: (*API).listNamespaces},
		{Route: Route{http.MethodGet, "/v1/namespaces/{ns}/leases"}, serve: (*API).listLeases},
		{Route: Route{http.MethodGet, "/v1/admin/audit"}, operator: true, serve: (*API).adminAudit},
		{Route: Route{http.MethodGet, "/v1/audit"}, serve: (*API).ownAudit},
	}
}

// optionalBool is a boolean member whose absence is kept apart from false.
type optionalBool struct {
	b   bool
	set bool
}

// UnmarshalJSONFrom reads the member's value: true, false or null.
func (o *optionalBool) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	switch v.Kind() {
	case 'n':
		return nil
	case 't', 'f':
		o.b, o.set = v.Kind() == 't', true
		return nil
	}
	return errNotBoolean
}

func (o *optionalBool) ptr() *bool {
	if !o.set {
		return nil
	}
	return &o.b
}

// createAccountRequest is the body of POST /v1/admin/accounts.
type createAccountRequest struct {
	ID   optionalText `json:"id"`
	Plan optionalText `json:"plan"`
}

// patchAccountRequest is the body of PATCH /v1/admin/accounts/{id}.
type patchAccountRequest struct {
	Plan      optionalText `json:"plan"`
	Suspended optionalBool `json:"suspended"`
}

// issueKeyRequest is the optional body of POST .../keys.
type issueKeyRequest struct {
	Name optionalText `json:"name"`
}

// accountReply is an account as the admin routes show it.
type accountReply struct {
	ID        string  `json:"id"`
	Plan      string  `json:"plan"`
	Source    string  `json:"source"`
	Suspended bool    `json:"suspended"`
	CreatedAt *string `json:"created_at"`
	Keys      int     `json:"keys"`
}

// keyReply is an API key without its secret; Key is set only when it was just issued.
type keyReply struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Key       string  `json:"key,omitzero"`
	Prefix    string  `json:"prefix"`
	CreatedAt *string `json:"created_at"`
	Source    string  `json:"source,omitzero"`
}

// instant formats a store instant as RFC 3339 in UTC with milliseconds; nil for 0 (none).
func instant(ms int64) *string {
	if ms == 0 {
		return nil
	}
	s := time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	return &s
}

func accountOf(i engine.AccountInfo) accountReply {
	return accountReply{ID: i.ID, Plan: i.Plan, Source: string(i.Source), Suspended: i.Suspended, CreatedAt: instant(i.CreatedMS), Keys: i.Keys}
}

func keyOf(k engine.KeyInfo) keyReply {
	return keyReply{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: instant(k.CreatedMS), Source: string(k.Source)}
}

// actor is who makes a change: the operator of an operator route, else the account itself.
func (x *exchange) actor() engine.Actor {
	if x.acct != nil {
		return engine.Actor{Account: x.acct.ID}
	}
	return engine.Actor{Operator: x.op}
}

// noContent answers 204 with the request id.
func (a *API) noContent(x *exchange) {
	x.w.Header()[RequestIDHeader] = []string{a.requestID(x)}
	x.WriteHeader(http.StatusNoContent)
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
func (a *API) createAccount(x *exchange) {
	var req createAccountRequest
	if err := decodeBody(x.body.Bytes(), &req); err != nil {
		a.engineError(x, err)
		return
	}
	if !req.ID.set {
		a.engineError(x, engine.Invalid("id is required"))
		return
	}
	if !req.Plan.set {
		a.engineError(x, engine.Invalid("plan is required"))
		return
	}
	info, err := a.eng.CreateAccount(x.r.Context(), x.actor(), req.ID.s, req.Plan.s)
	if err != nil {
		a.engineError(x, err)
		return
	}
	r := accountOf(info)
	a.reply(x, http.StatusCreated, &r)
}

// accountsPage is the reply of GET /v1/admin/accounts.
type accountsPage struct {
	Accounts   []accountReply `json:"accounts"`
	NextCursor *string        `json:"next_cursor"`
}

// listAccounts serves GET /v1/admin/accounts?limit=N&cursor=C.
func (a *API) listAccounts(x *exchange) {
	q, err := query(x, "limit", "cursor")
	if err != nil {
		a.engineError(x, err)
		return
	}
	limit := DefaultAccountsPage
	if s, ok := q["limit"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > engine.MaxAccountsPage || strconv.Itoa(n) != s {
			a.engineError(x, engine.Invalid("limit must be an integer from 1 to 1000"))
			return
		}
		limit = n
	}
	list, next, err := a.eng.ListAccounts(x.r.Context(), limit, q["cursor"])
	if err != nil {
		a.engineError(x, err)
		return
	}
	page := accountsPage{Accounts: make([]accountReply, len(list))}
	for i, info := range list {
		page.Accounts[i] = accountOf(info)
	}
	if next != "" {
		page.NextCursor = &next
	}
	a.reply(x, http.StatusOK, &page)
}

// getAccount serves GET /v1/admin/accounts/{id}.
func (a *API) getAccount(x *exchange) {
	info, err := a.eng.GetAccount(x.r.Context(), x.r.PathValue("id"))
	if err != nil {
		a.engineError(x, err)
		return
	}
	r := accountOf(info)
	a.reply(x, http.StatusOK, &r)
}

// patchAccount serves PATCH /v1/admin/accounts/{id} {plan?, suspended?}.
func (a *API) patchAccount(x *exchange) {
	var req patchAccountRequest
	if err := decodeBody(x.body.Bytes(), &req); err != nil {
		a.engineError(x, err)
		return
	}
	info, err := a.eng.UpdateAccount(x.r.Context(), x.actor(), x.r.PathValue("id"),
		engine.AccountUpdate{Plan: req.Plan.ptr(), Suspended: req.Suspended.ptr()})
	if err != nil {
		a.engineError(x, err)
		return
	}
	r := accountOf(info)
	a.reply(x, http.StatusOK, &r)
}

// deleteAccount serves DELETE /v1/admin/accounts/{id}: 204.
func (a *API) deleteAccount(x *exchange) {
	if err := a.eng.DeleteAccount(x.r.Context(), x.actor(), x.r.PathValue("id")); err != nil {
		a.engineError(x, err)
		return
	}
	a.noContent(x)
}

// issueKey issues a key to account: 201 {id, name, key, prefix, created_at}.
func (a *API) issueKey(x *exchange, account string) {
	var req issueKeyRequest
	if !emptyBody(x.body.Bytes()) {
		if err := decodeBody(x.body.Bytes(), &req); err != nil {
			a.engineError(x, err)
			return
		}
	}
	k, err := a.eng.IssueKey(x.r.Context(), x.actor(), account, req.Name.s)
	if err != nil {
		a.engineError(x, err)
		return
	}
	r := keyOf(k.KeyInfo)
	r.Key, r.Source = k.Key, ""
	a.reply(x, http.StatusCreated, &r)
}

// keysReply is the reply of the key lists.
type keysReply struct {
	Keys []keyReply `json:"keys"`
}

// listKeys answers the keys of account.
func (a *API) listKeys(x *exchange, account string) {
	keys, err := a.eng.ListKeys(x.r.Context(), account)
	if err != nil {
		a.engineError(x, err)
		return
	}
	r := keysReply{Keys: make([]keyReply, len(keys))}
	for i, k := range keys {
		r.Keys[i] = keyOf(k)
	}
	a.reply(x, http.StatusOK, &r)
}

// revokeKey revokes one key of account: 204.
func (a *API) revokeKey(x *exchange, account string) {
	if err := a.eng.RevokeKey(x.r.Context(), x.actor(), account, x.r.PathValue("key_id")); err != nil {
		a.engineError(x, err)
		return
	}
	a.noContent(x)
}

func (a *API) adminIssueKey(x *exchange)  { a.issueKey(x, x.r.PathValue("id")) }
func (a *API) adminListKeys(x *exchange)  { a.listKeys(x, x.r.PathValue("id")) }
func (a *API) adminRevokeKey(x *exchange) { a.revokeKey(x, x.r.PathValue("id")) }
func (a *API) ownIssueKey(x *exchange)    { a.issueKey(x, x.acct.ID) }
func (a *API) ownKeys(x *exchange)        { a.listKeys(x, x.acct.ID) }
func (a *API) ownRevokeKey(x *exchange)   { a.revokeKey(x, x.acct.ID) }

// planLimits is a plan as GET /v1/account shows it.
type planLimits struct {
	Algorithms      []string `json:"algorithms"`
	ConcurrentLimit bool     `json:"concurrent_limit"`
	Webhooks        bool     `json:"webhooks"`
	MonthlyQuota    int64    `json:"monthly_quota"`
	HardCap         *int64   `json:"hard_cap"`
}

// ownAccount serves GET /v1/account: {id, plan, suspended, plan_limits}.
func (a *API) ownAccount(x *exchange) {
	p := &x.acct.Plan
	lim := planLimits{Algorithms: []string{}, ConcurrentLimit: p.ConcurrentLimit, Webhooks: p.Webhooks,
		MonthlyQuota: p.MonthlyQuota, HardCap: p.HardCap}
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
		if p.Algorithms.Has(alg) {
			lim.Algorithms = append(lim.Algorithms, alg.String())
		}
	}
	a.reply(x, http.StatusOK, &struct {
		ID         string     `json:"id"`
		Plan       string     `json:"plan"`
		Suspended  bool       `json:"suspended"`
		PlanLimits planLimits `json:"plan_limits"`
	}{x.acct.ID, p.Name, x.acct.Suspended, lim})
}

// usageJSON is the body of GET /v1/usage and GET /v1/admin/accounts/{id}/usage.
type usageJSON struct {
	Month      monthJSON    `json:"month"`
	Namespaces []totalsJSON `json:"namespaces"`
	Days       []dayJSON    `json:"days"`
}

type totalsJSON struct {
	Namespace string `json:"namespace"`
	Total     int64  `json:"total"`
	Blocked   int64  `json:"blocked"`
}

func (a *API) writeUsage(x *exchange, u engine.AccountUsage) {
	out := usageJSON{
		Month: monthJSON{Month: u.Month.Month.String(), Total: u.Month.Total, Quota: u.Month.Quota,
			OverQuota: u.Month.OverQuota, HardCap: u.Month.HardCap},
		Namespaces: make([]totalsJSON, len(u.Namespaces)),
		Days:       make([]dayJSON, len(u.Days)),
	}
	for i, n := range u.Namespaces {
		out.Namespaces[i] = totalsJSON{Namespace: n.Namespace, Total: n.Total, Blocked: n.Blocked}
	}
	for i, d := range u.Days {
		out.Days[i] = dayJSON{Day: d.Day.String(), Total: d.Total, Blocked: d.Blocked}
	}
	a.reply(x, http.StatusOK, &out)
}

// ownUsage serves GET /v1/usage: the account across all its namespaces.
func (a *API) ownUsage(x *exchange) {
	u, err := a.eng.Usage(x.r.Context(), x.acct)
	if err != nil {
		a.engineError(x, err)
		return
	}
	a.writeUsage(x, u)
}

// adminUsage serves GET /v1/admin/accounts/{id}/usage: the same body for any account.
func (a *API) adminUsage(x *exchange) {
	u, err := a.eng.UsageOf(x.r.Context(), x.r.PathValue("id"))
	if err != nil {
		a.engineError(x, err)
		return
	}
	a.writeUsage(x, u)
}

// listNamespaces serves GET /v1/namespaces.
func (a *API) listNamespaces(x *exchange) {
	list, err := a.eng.Namespaces(x.r.Context(), x.acct)
	if err != nil {
		a.engineError(x, err)
		return
	}
	type nsJSON struct {
		Namespace string `json:"namespace"`
		Rules     int    `json:"rules"`
		Total     int64  `json:"total"`
		Blocked   int64  `json:"blocked"`
	}
	out := struct {
		Namespaces []nsJSON `json:"namespaces"`
	}{make([]nsJSON, len(list))}
	for i, n := range list {
		out.Namespaces[i] = nsJSON{n.Namespace, n.Rules, n.Total, n.Blocked}
	}
	a.reply(x, http.StatusOK, &out)
}

// listLeases serves GET /v1/namespaces/{ns}/leases?key=K.
func (a *API) listLeases(x *exchange) {
	q, err := query(x, "key")
	if err != nil {
		a.engineError(x, err)
		return
	}
	key, ok := q["key"]
	if !ok {
		a.engineError(x, engine.Invalid("key is required: ?key=K"))
		return
	}
	l, err := a.eng.Leases(x.r.Context(), x.acct, x.r.PathValue("ns"), key)
	if err != nil {
		a.engineError(x, err)
		return
	}
	type leaseJSON struct {
		LeaseID     string `json:"lease_id"`
		ExpiresInMS int64  `json:"expires_in_ms"`
	}
	out := struct {
		Namespace string      `json:"namespace"`
		Key       string      `json:"key"`
		Active    int64       `json:"active"`
		Limit     *int64      `json:"limit"`
		Leases    []leaseJSON `json:"leases"`
	}{l.Namespace, l.Key, l.Active, l.Limit, make([]leaseJSON, len(l.Leases))}
	for i, v := range l.Leases {
		out.Leases[i] = leaseJSON{v.LeaseID, v.ExpiresInMS}
	}
	a.reply(x, http.StatusOK, &out)
}
