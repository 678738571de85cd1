package wire

// Accounts, keys, the audit log (spec §15) and the webhook (spec §8.1). An instant is
// RFC 3339 in UTC with milliseconds, null where there is none (a configured account's or
// key's creation).

// CreateAccountRequest is the body of POST /v1/admin/accounts; both members are
// required.
type CreateAccountRequest struct {
	ID   Optional[string] `json:"id,omitzero"`
	Plan Optional[string] `json:"plan,omitzero"`
}

// UpdateAccountRequest is the body of PATCH /v1/admin/accounts/{id}; unset members are
// left as they are.
type UpdateAccountRequest struct {
	Plan      Optional[string] `json:"plan,omitzero"`
	Suspended Optional[bool]   `json:"suspended,omitzero"`
}

// Account is an account as the admin routes show it.
type Account struct {
	ID        string  `json:"id"`
	Plan      string  `json:"plan"`
	Source    string  `json:"source"` // "config" or "api"
	Suspended bool    `json:"suspended"`
	CreatedAt *string `json:"created_at"`
	Keys      int     `json:"keys"` // how many API keys the account has
}

// AccountPage is one page of GET /v1/admin/accounts; NextCursor is null on the last.
type AccountPage struct {
	Accounts   []Account `json:"accounts"`
	NextCursor *string   `json:"next_cursor"`
}

// IssueKeyRequest is the optional body of POST /v1/keys and POST
// /v1/admin/accounts/{id}/keys.
type IssueKeyRequest struct {
	Name Optional[string] `json:"name,omitzero"`
}

// APIKey is an API key without its secret. Key, the secret, is set only in the answer
// that issued it, which has no Source.
type APIKey struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Key       string  `json:"key,omitzero"`
	Prefix    string  `json:"prefix"`
	CreatedAt *string `json:"created_at"`
	Source    string  `json:"source,omitzero"`
}

// KeyList is the answer of the key lists.
type KeyList struct {
	Keys []APIKey `json:"keys"`
}

// PlanLimits are what an account's plan allows.
type PlanLimits struct {
	Algorithms      []string `json:"algorithms"`
	ConcurrentLimit bool     `json:"concurrent_limit"`
	Webhooks        bool     `json:"webhooks"`
	MonthlyQuota    int64    `json:"monthly_quota"`
	// HardCap is nil when the plan has none.
	HardCap *int64 `json:"hard_cap"`
}

// OwnAccount is the calling account (GET /v1/account).
type OwnAccount struct {
	ID   string `json:"id"`
	Plan string `json:"plan"`
	// Suspended is true while an operator has the account suspended (spec §15.6).
	Suspended  bool       `json:"suspended"`
	PlanLimits PlanLimits `json:"plan_limits"`
}

// AuditActor is who made a change: Type "operator" (ID the operator's id) or "account"
// (ID the account's, KeyID the key it called with).
type AuditActor struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	KeyID string `json:"key_id,omitzero"`
}

// AuditEntry is one recorded change (spec §15.10).
type AuditEntry struct {
	ID     string     `json:"id"`
	Time   *string    `json:"time"` // by the service's store clock
	Actor  AuditActor `json:"actor"`
	Action string     `json:"action"`
	// Account is the account changed; Target what in it.
	Account string `json:"account"`
	Target  string `json:"target"`
	// Details are the change's facts (a plan, a key's name, a rule's values...).
	Details   map[string]string `json:"details"`
	Client    string            `json:"client"`
	RequestID string            `json:"request_id"`
}

// AuditPage is one page of the audit log, newest first; NextCursor is null on the last.
type AuditPage struct {
	Entries    []AuditEntry `json:"entries"`
	NextCursor *string      `json:"next_cursor"`
}

// WebhookRequest is the body of PUT /v1/webhook; URL is required.
type WebhookRequest struct {
	URL Optional[string] `json:"url,omitzero"`
}

// Webhook is the account's webhook (spec §8.1); Secret is set only in PUT's answer.
type Webhook struct {
	URL    string `json:"url"`
	Secret string `json:"secret,omitzero"`
}

// WebhookTestResult is the answer of POST /v1/webhook/test.
type WebhookTestResult struct {
	EventID string `json:"event_id"`
}
