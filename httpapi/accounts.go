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
	var req createAccountRequest
	if err := decodeBody(x.body.Bytes(), &req); err != nil {
		x.engineError(err)
		return
	}
	if !req.ID.set {
		x.engineError(engine.Invalid("id is required"))
		return
	}
	if !req.Plan.set {
		x.engineError(engine.Invalid("plan is required"))
		return
	}
	info, err := a.eng.CreateAccount(x.r.Context(), x.actor(), req.ID.s, req.Plan.s)
	if err != nil {
		x.engineError(err)
		return
	}
	r := accountOf(info)
	x.reply(http.StatusCreated, &r)
}

// accountsPage is the reply of GET /v1/admin/accounts.
type accountsPage struct {
	Accounts   []accountReply `json:"accounts"`
	NextCursor *string        `json:"next_cursor"`
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
	list, next, err := a.eng.ListAccounts(x.r.Context(), limit, q["cursor"])
	if err != nil {
		x.engineError(err)
		return
	}
	page := accountsPage{Accounts: make([]accountReply, len(list))}
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
	info, err := a.eng.GetAccount(x.r.Context(), x.r.PathValue("id"))
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
	var req patchAccountRequest
	if err := decodeBody(x.body.Bytes(), &req); err != nil {
		x.engineError(err)
		return
	}
	info, err := a.eng.UpdateAccount(x.r.Context(), x.actor(), x.r.PathValue("id"),
		engine.AccountUpdate{Plan: req.Plan.ptr(), Suspended: req.Suspended.ptr()})
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
	if err := a.eng.DeleteAccount(x.r.Context(), x.actor(), x.r.PathValue("id")); err != nil {
		x.engineError(err)
		return
	}
	x.noContent()
}

// issueKey issues a key to account: 201 {id, name, key, prefix, created_at}.
func issueKey(x *exchange, account string) {
	a := x.a
	var req issueKeyRequest
	if !emptyBody(x.body.Bytes()) {
		if err := decodeBody(x.body.Bytes(), &req); err != nil {
			x.engineError(err)
			return
		}
	}
	k, err := a.eng.IssueKey(x.r.Context(), x.actor(), account, req.Name.s)
	if err != nil {
		x.engineError(err)
		return
	}
	r := keyOf(k.KeyInfo)
	r.Key, r.Source = k.Key, ""
	x.reply(http.StatusCreated, &r)
}

// keysReply is the reply of the key lists.
type keysReply struct {
	Keys []keyReply `json:"keys"`
}

// listKeys answers the keys of account.
func listKeys(x *exchange, account string) {
	a := x.a
	keys, err := a.eng.ListKeys(x.r.Context(), account)
	if err != nil {
		x.engineError(err)
		return
	}
	r := keysReply{Keys: make([]keyReply, len(keys))}
	for i, k := range keys {
		r.Keys[i] = keyOf(k)
	}
	x.reply(http.StatusOK, &r)
}

// revokeKey revokes one key of account: 204.
func revokeKey(x *exchange, account string) {
	a := x.a
	if err := a.eng.RevokeKey(x.r.Context(), x.actor(), account, x.r.PathValue("key_id")); err != nil {
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

// planLimits is a plan as GET /v1/account shows it.
type planLimits struct {
	Algorithms      []string `json:"algorithms"`
	ConcurrentLimit bool     `json:"concurrent_limit"`
	Webhooks        bool     `json:"webhooks"`
	MonthlyQuota    int64    `json:"monthly_quota"`
	HardCap         *int64   `json:"hard_cap"`
}

// ownAccount serves GET /v1/account: {id, plan, suspended, plan_limits}.
func ownAccount(x *exchange) {
	p := &x.acct.Plan
	lim := planLimits{Algorithms: []string{}, ConcurrentLimit: p.ConcurrentLimit, Webhooks: p.Webhooks,
		MonthlyQuota: p.MonthlyQuota, HardCap: p.HardCap}
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
		if p.Algorithms.Has(alg) {
			lim.Algorithms = append(lim.Algorithms, alg.String())
		}
	}
	x.reply(http.StatusOK, &struct {
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

func (x *exchange) writeUsage(u engine.AccountUsage) {
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
	x.reply(http.StatusOK, &out)
}

// ownUsage serves GET /v1/usage: the account across all its namespaces.
func ownUsage(x *exchange) {
	a := x.a
	u, err := a.eng.Usage(x.r.Context(), x.acct)
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
	list, err := a.eng.Namespaces(x.r.Context(), x.acct)
	if err != nil {
		x.engineError(err)
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
	l, err := a.eng.Leases(x.r.Context(), x.acct, x.r.PathValue("ns"), key)
	if err != nil {
		x.engineError(err)
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
	x.reply(http.StatusOK, &out)
}
