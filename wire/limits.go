package wire

// Checks and leases: POST /v1/limit, /v1/limit/reset (spec §4) and /v1/leases (spec §5).

// LimitRequest is the body of POST /v1/limit and POST /v1/limit/reset (spec §4.1,
// §4.11). Unset members come from the namespace's rule (spec §4.2).
type LimitRequest struct {
	Namespace string           `json:"namespace"`
	Key       string           `json:"key"`
	Algorithm Optional[string] `json:"algorithm,omitzero"`
	Limit     Optional[int64]  `json:"limit,omitzero"`
	WindowMS  Optional[int64]  `json:"window_ms,omitzero"`
	Cost      Optional[int64]  `json:"cost,omitzero"`
	Overdraft bool             `json:"overdraft,omitzero"` // count the cost even when denied (spec §4.12)
}

// LimitResult is the answer of POST /v1/limit (spec §4.1).
type LimitResult struct {
	Allowed   bool  `json:"allowed"`
	Limit     int64 `json:"limit"`
	Remaining int64 `json:"remaining"`
	ResetMS   int64 `json:"reset_ms"`
}

// ResetResult is the answer of POST /v1/limit/reset (spec §4.11).
type ResetResult struct {
	Reset bool `json:"reset"`
}

// LeaseRequest is the body of POST /v1/leases (spec §5.1).
type LeaseRequest struct {
	Namespace string          `json:"namespace"`
	Key       string          `json:"key"`
	Limit     Optional[int64] `json:"limit,omitzero"`
	WindowMS  Optional[int64] `json:"window_ms,omitzero"`
}

// LeaseDecision is the answer of POST /v1/leases; LeaseID only when allowed.
type LeaseDecision struct {
	Allowed bool   `json:"allowed"`
	LeaseID string `json:"lease_id,omitzero"`
	Active  int64  `json:"active"`
	Limit   int64  `json:"limit"`
	ResetMS int64  `json:"reset_ms"`
}

// ReleaseResult is the answer of DELETE /v1/leases/{lease_id} (spec §5.4).
type ReleaseResult struct {
	// Released is false when the lease was no longer held (expired, already released).
	Released bool `json:"released"`
	// Active is the leases the account still holds on the namespace and key.
	Active int64 `json:"active"`
}

// RenewRequest is the optional body of POST /v1/leases/{lease_id}/renew (spec §5.5).
type RenewRequest struct {
	WindowMS Optional[int64] `json:"window_ms,omitzero"`
}

// RenewResult is the answer of a renewal (spec §5.5).
type RenewResult struct {
	// Renewed is false when the lease was no longer held.
	Renewed bool  `json:"renewed"`
	Active  int64 `json:"active"`
	// ResetMS is the time-to-live applied (0 when not renewed).
	ResetMS int64 `json:"reset_ms"`
}

// HeldLease is one lease of a LeaseList.
type HeldLease struct {
	LeaseID     string `json:"lease_id"`
	ExpiresInMS int64  `json:"expires_in_ms"`
}

// LeaseList is who holds one key's leases (GET /v1/namespaces/{ns}/leases). Limit is what
// an acquisition without inline values would resolve now; nil without a concurrent rule.
type LeaseList struct {
	Namespace string      `json:"namespace"`
	Key       string      `json:"key"`
	Active    int64       `json:"active"`
	Limit     *int64      `json:"limit"`
	Leases    []HeldLease `json:"leases"`
}

// Error is the body of every error answer (spec §3.6): a message for people and a
// stable code.
type Error struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}
