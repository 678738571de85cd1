package httpapi

import (
	"net/http"
	"strconv"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/wire"
)

// The audit routes (spec §15.10): GET /v1/admin/audit for operators (every account, or
// one with ?account=) and GET /v1/audit for an account's own entries.

// DefaultAuditPage is the page size of the audit routes without limit.
const DefaultAuditPage = 100

// audit answers a page of account's entries ("" every account), with the query's limit
// and cursor; own is the account's own log (x.acct's). extra names the other query
// parameter the route takes, if any.
func audit(x *exchange, account string, own bool, extra ...string) {
	a := x.a
	q, err := query(x, append([]string{"limit", "cursor"}, extra...)...)
	if err != nil {
		x.engineError(err)
		return
	}
	if len(extra) > 0 {
		account = q["account"]
		if _, ok := q["account"]; ok && account == "" {
			x.engineError(engine.Invalid("account must match [a-z0-9][a-z0-9_-]{0,63}"))
			return
		}
	}
	limit := DefaultAuditPage
	if s, ok := q["limit"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > engine.MaxAuditPage || strconv.Itoa(n) != s {
			x.engineError(engine.Invalid("limit must be an integer from 1 to 1000"))
			return
		}
		limit = n
	}
	var created int64
	if own {
		created = x.acct.CreatedMS
	}
	page, err := a.eng.Audit.List(x.r.Context(), account, q["cursor"], limit, own, created)
	if err != nil {
		x.engineError(err)
		return
	}
	out := wire.AuditPage{Entries: make([]wire.AuditEntry, len(page.Entries))}
	for i, e := range page.Entries {
		actor := wire.AuditActor{Type: "operator", ID: e.Operator}
		if e.Operator == "" {
			actor = wire.AuditActor{Type: "account", ID: e.ActorAccount, KeyID: e.KeyID}
		}
		details := e.Details
		if details == nil {
			details = map[string]string{}
		}
		out.Entries[i] = wire.AuditEntry{ID: e.ID, Time: instant(e.TimeMS), Actor: actor, Action: string(e.Action),
			Account: e.Account, Target: e.Target, Details: details, Client: e.Client, RequestID: e.RequestID}
	}
	if page.Next != "" {
		out.NextCursor = &page.Next
	}
	x.reply(http.StatusOK, &out)
}

// adminAudit serves GET /v1/admin/audit?account=A&limit=N&cursor=C.
func adminAudit(x *exchange) { audit(x, "", false, "account") }

// ownAudit serves GET /v1/audit?limit=N&cursor=C: the calling account's entries, not
// those of a deleted account that had its id.
func ownAudit(x *exchange) { audit(x, x.acct.ID, true) }
