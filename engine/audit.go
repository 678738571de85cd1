package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
)

// The audit log (spec §15.10): every change made by an operator or by an account through
// the API is recorded in the store with when (the store's clock), who (an operator, or an
// account and the key it used), what, which account it concerns, the client address and
// the request id; never a secret. The engine records; the store keeps and pages.

// AuditAction names one kind of change the audit log records.
type AuditAction string

// The changes the audit log records (spec §15.10).
const (
	AuditAccountCreated     AuditAction = "account.created"
	AuditAccountPlanChanged AuditAction = "account.plan_changed"
	AuditAccountSuspended   AuditAction = "account.suspended"
	AuditAccountResumed     AuditAction = "account.resumed"
	AuditAccountDeleted     AuditAction = "account.deleted"
	AuditKeyIssued          AuditAction = "key.issued"
	AuditKeyRevoked         AuditAction = "key.revoked"
	AuditRuleSet            AuditAction = "rule.set"
	AuditRuleDeleted        AuditAction = "rule.deleted"
	AuditWebhookSet         AuditAction = "webhook.set"
	AuditWebhookDeleted     AuditAction = "webhook.deleted"
	AuditCounterReset       AuditAction = "counter.reset"
)

// Bounds of the audit log (spec §15.10).
const (
	// AuditRetention is how long an entry is kept.
	AuditRetention = 90 * 24 * time.Hour
	// MaxAuditPerAccount is the most entries kept for one account; past it the oldest go.
	MaxAuditPerAccount = 10_000
	// MaxAuditEntries is the most entries kept in all (the unfiltered log); past it the
	// oldest leave that log, while each account keeps its own.
	MaxAuditEntries = 200_000
	// MaxAuditPage is the largest page the audit routes answer.
	MaxAuditPage = 1000
	// AuditIDLen is the length of an entry id: 13 digits of Unix ms, '-', 16 hex digits
	// (a sequence within the millisecond, then random).
	AuditIDLen = 30
)

// AuditEntry is one recorded change. Entries sort by ID, which starts with the instant.
type AuditEntry struct {
	// ID is unique and sorts as the entries were recorded (set by the store).
	ID string
	// TimeMS is when the change was recorded, by the store's clock (set by the store).
	TimeMS int64
	// Operator is the operator who made the change; "" when an account made it.
	Operator string
	// ActorAccount and KeyID are the account that made the change on its own routes and
	// the id of the key it called with.
	ActorAccount, KeyID string
	// Action is what was done.
	Action AuditAction
	// Account is the account the change concerns.
	Account string
	// AccountCreatedMS is the CreatedMS of that account when the change was made (0 for a
	// configured one): it tells an account apart from a deleted one that had its id.
	AccountCreatedMS int64
	// Target names what was changed within it: the account id, a key id, "<ns>/<kind>"
	// for a rule, "webhook", or a namespace for a counter reset.
	Target string
	// Details are the change's facts people need (a plan, a key's name, a rule's values,
	// the webhook's host, the counter's key); never a secret.
	Details map[string]string
	// Client is the client address (spec §15.7) and RequestID the request's id (§3.9).
	Client, RequestID string
}

// Validate reports an entry a store must refuse (ErrInvalidArgument): no action or
// account, or an id that is not of the form the store makes.
func (e *AuditEntry) Validate() error {
	switch {
	case e.Action == "":
		return fmt.Errorf("%w: audit entry without an action", ErrInvalidArgument)
	case !ValidAccountID(e.Account):
		return fmt.Errorf("%w: audit entry account %q", ErrInvalidArgument, e.Account)
	}
	return nil
}

// NextAuditID returns the id of an entry recorded at nowMS after the entry whose id is
// last ("" none): the instant in 13 digits, '-', an 8-hex-digit sequence and 8 random hex
// digits. Ids only grow: an entry in the same millisecond as last (or, should the clock go
// back, before it) takes last's instant and the next sequence number.
func NextAuditID(last string, nowMS int64) string {
	var seq uint64
	if ValidAuditCursor(last) {
		if lastMS, _ := strconv.ParseInt(last[:13], 10, 64); lastMS >= nowMS {
			prev, _ := strconv.ParseUint(last[14:22], 16, 32)
			nowMS, seq = lastMS, prev+1
		}
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%013d-%08x%s", nowMS, seq, hex.EncodeToString(b))
}

// ValidAuditCursor reports whether c has the form of an entry id.
func ValidAuditCursor(c string) bool {
	if len(c) != AuditIDLen || c[13] != '-' {
		return false
	}
	for i := 0; i < len(c); i++ {
		ch := c[i]
		switch {
		case i == 13:
		case i < 13 && ch >= '0' && ch <= '9':
		case i > 13 && (ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f'):
		default:
			return false
		}
	}
	return true
}

// AuditCutoff returns the smallest id an unexpired entry can have at nowMS: an entry is
// kept while it is younger than AuditRetention.
func AuditCutoff(nowMS int64) string {
	return fmt.Sprintf("%013d-", max(0, nowMS-AuditRetention.Milliseconds()+1))
}

// AuditStore keeps the audit log. Both methods are atomic and bounded: entries older
// than AuditRetention are never returned and are dropped, an account keeps at most
// MaxAuditPerAccount entries and the whole log MaxAuditEntries (the oldest go first).
type AuditStore interface {
	// AppendAudit sets e's ID and TimeMS from the store's clock and records it.
	AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error)
	// ListAudit returns up to limit entries, newest first, whose ids sort before before
	// ("" is after every id): of account, or of every account when account is "".
	ListAudit(ctx context.Context, account, before string, limit int) ([]AuditEntry, error)
}

// Origin is where a request came from, put in its context by the edge that served it.
type Origin struct {
	// Client is the client address (spec §15.7).
	Client string
	// RequestID is the request's id (spec §3.9).
	RequestID string
	// KeyID is the id of the account key the request was made with ("" for an operator).
	KeyID string
}

type originKey struct{}

// WithOrigin returns ctx carrying o, which the audit log records with every change.
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// OriginOf returns the Origin ctx carries (zero when none).
func OriginOf(ctx context.Context) Origin {
	o, _ := ctx.Value(originKey{}).(Origin)
	return o
}

// Actor is who asks for a change: an operator, or (Operator nil) the account itself on its
// own routes.
type Actor struct {
	Operator *Operator
	// Account is the account acting on its own routes (Operator nil).
	Account string
}
