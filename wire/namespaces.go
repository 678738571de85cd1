package wire

// Rules, statistics and usage (spec §6, §7).

// RuleRequest is the body of POST /v1/namespaces/{ns}/rules (spec §6.2, §6.7). A null
// entry of Overrides is refused by the server.
type RuleRequest struct {
	// Namespace is checked, then ignored: the path's namespace wins.
	Namespace string             `json:"namespace,omitzero"`
	Algorithm Optional[string]   `json:"algorithm,omitzero"`
	Limit     Optional[int64]    `json:"limit,omitzero"`
	WindowMS  Optional[int64]    `json:"window_ms,omitzero"`
	Name      Optional[string]   `json:"name,omitzero"`
	Overrides []*OverrideRequest `json:"overrides,omitempty"`
}

// OverrideRequest is one entry of a rule request's overrides (spec §6.3).
type OverrideRequest struct {
	Key      Optional[string] `json:"key,omitzero"`
	Limit    Optional[int64]  `json:"limit,omitzero"`
	WindowMS Optional[int64]  `json:"window_ms,omitzero"`
}

// Rule is a namespace's rule as the rule routes answer it (spec §6.2). For
// concurrent_limit, Limit is the most leases held at once and WindowMS the lease
// time-to-live.
type Rule struct {
	Namespace string     `json:"namespace"`
	Algorithm string     `json:"algorithm"`
	Limit     int64      `json:"limit"`
	WindowMS  int64      `json:"window_ms"`
	Name      *string    `json:"name,omitzero"`       // absent when none was given
	Overrides []Override `json:"overrides,omitempty"` // absent when none (spec §6.7)
}

// Override is one key's own limit (and optionally window) inside a rule.
type Override struct {
	Key      string `json:"key"`
	Limit    int64  `json:"limit"`
	WindowMS *int64 `json:"window_ms,omitzero"` // absent: the rule's window
}

// RuleList is the answer of GET /v1/namespaces/{ns}/rules: the rate rule first.
type RuleList struct {
	Namespace string `json:"namespace"`
	Rules     []Rule `json:"rules"`
}

// DeleteResult is the answer of DELETE /v1/namespaces/{ns}/rules/{kind} (spec §6.5).
type DeleteResult struct {
	Deleted bool `json:"deleted"`
}

// Stats is a namespace's usage (spec §7.2): its last 30 UTC days and the account's month.
type Stats struct {
	Namespace string     `json:"namespace"`
	Total     int64      `json:"total"`
	Blocked   int64      `json:"blocked"`
	Days      []DayStats `json:"days"`
	Month     MonthStats `json:"month"`
}

// DayStats is one UTC day of usage.
type DayStats struct {
	Day     string `json:"day"`
	Total   int64  `json:"total"`
	Blocked int64  `json:"blocked"`
}

// MonthStats is the account's current UTC month over all namespaces.
type MonthStats struct {
	Month     string `json:"month"`
	Total     int64  `json:"total"`
	Quota     int64  `json:"quota"`
	OverQuota bool   `json:"over_quota"`
	// HardCap is nil when the plan has none.
	HardCap *int64 `json:"hard_cap"`
}

// AccountUsage is an account across all its namespaces (GET /v1/usage and GET
// /v1/admin/accounts/{id}/usage): its month, each namespace with usage in the last 30 UTC
// days, and those days summed over namespaces.
type AccountUsage struct {
	Month      MonthStats       `json:"month"`
	Namespaces []NamespaceUsage `json:"namespaces"`
	Days       []DayStats       `json:"days"`
}

// NamespaceUsage is one namespace's totals over the last 30 UTC days.
type NamespaceUsage struct {
	Namespace string `json:"namespace"`
	Total     int64  `json:"total"`
	Blocked   int64  `json:"blocked"`
}

// NamespaceList is the answer of GET /v1/namespaces.
type NamespaceList struct {
	Namespaces []Namespace `json:"namespaces"`
}

// Namespace is one namespace with a rule or recent usage: its rules and its last 30
// days' totals.
type Namespace struct {
	Namespace string `json:"namespace"`
	Rules     int    `json:"rules"`
	Total     int64  `json:"total"`
	Blocked   int64  `json:"blocked"`
}
