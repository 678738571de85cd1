package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/leashd/leash/wire"
)

// The audit log (spec §15.10): AdminAudit with an operator key, Audit with an account's.

// AuditActor is who made a change: Type "operator" (ID the operator's id) or "account"
// (ID the account's, KeyID the key it called with).
type AuditActor = wire.AuditActor

// AuditEntry is one recorded change (wire.AuditEntry, a null time read as "").
type AuditEntry struct {
	ID string `json:"id"`
	// Time is RFC 3339 in UTC, by the service's store clock.
	Time    string     `json:"time"`
	Actor   AuditActor `json:"actor"`
	Action  string     `json:"action"`
	Account string     `json:"account"`
	Target  string     `json:"target"`
	// Details are the change's facts (a plan, a key's name, a rule's values...).
	Details   map[string]string `json:"details"`
	Client    string            `json:"client"`
	RequestID string            `json:"request_id"`
}

// AuditPage is one page of the audit log, newest first (wire.AuditPage); NextCursor is ""
// on the last page.
type AuditPage struct {
	Entries    []AuditEntry `json:"entries"`
	NextCursor string       `json:"next_cursor"`
}

// AuditQuery selects a page: Account (operators only; "" every account), Limit (0 is the
// service's default, 100) and Cursor ("" is the newest page).
type AuditQuery struct {
	Account string
	Limit   int
	Cursor  string
}

func (c *Client) audit(ctx context.Context, path string, q AuditQuery) (*AuditPage, error) {
	v := url.Values{}
	if q.Account != "" {
		v.Set("account", q.Account)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out AuditPage
	if _, err := c.call(ctx, http.MethodGet, path, nil, true, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AdminAudit reads one page of the audit log: GET /v1/admin/audit. Retried when safe.
func (c *Client) AdminAudit(ctx context.Context, q AuditQuery) (*AuditPage, error) {
	return c.audit(ctx, "/v1/admin/audit", q)
}

// Audit reads one page of the calling account's audit log: GET /v1/audit (q.Account is
// not sent). Retried when safe.
func (c *Client) Audit(ctx context.Context, q AuditQuery) (*AuditPage, error) {
	q.Account = ""
	return c.audit(ctx, "/v1/audit", q)
}
