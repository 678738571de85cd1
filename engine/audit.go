package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
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

func originOf(ctx context.Context) Origin {
	o, _ := ctx.Value(originKey{}).(Origin)
	return o
}

// AuditLog records changes in an AuditStore and reads them back.
type AuditLog struct {
	store AuditStore
	log   *slog.Logger
}

// AuditPage is one page of the audit log, newest first; Next is the cursor of the next
// page, "" on the last.
type AuditPage struct {
	Entries []AuditEntry
	Next    string
}

// Audit returns the engine's audit log (nil store: changes are not recorded and reads
// fail as internal).
func (e *Engine) Audit() *AuditLog { return &e.audit }

// createdMS returns the CreatedMS of the stored account id, from the store itself (a
// directory may lag by a poll); 0 for a configured account or one the store does not have.
func (e *Engine) createdMS(ctx context.Context, id string) int64 {
	if _, ok := e.configAccount(id); ok || e.accounts == nil {
		return 0
	}
	if a, ok, err := e.accounts.GetAccount(ctx, id); err == nil && ok {
		return a.CreatedMS
	}
	return 0
}

// record adds a change to the log: who made it comes from by (an operator) or, without an
// operator, from the account that made it and the key in ctx's Origin. A store that fails
// loses nothing silently: the entry is logged at error instead.
func (l *AuditLog) record(ctx context.Context, by Actor, ent AuditEntry) {
	if l.store == nil {
		return
	}
	o := originOf(ctx)
	ent.Client, ent.RequestID = o.Client, o.RequestID
	if by.Operator != nil {
		ent.Operator = by.Operator.ID
	} else {
		ent.ActorAccount, ent.KeyID = by.Account, o.KeyID
	}
	if _, err := l.store.AppendAudit(context.WithoutCancel(ctx), ent); err != nil {
		l.log.Error("audit: change not recorded in the store", "action", string(ent.Action), "account", ent.Account,
			"target", ent.Target, "operator", ent.Operator, "by_account", ent.ActorAccount, "key_id", ent.KeyID,
			"client", ent.Client, "request_id", ent.RequestID, "err", err)
	}
}

// List returns a page of up to limit entries, newest first, after cursor ("" for the
// newest): those of account, or of every account when account is "". With own, only the
// entries of the account created at createdMS are listed: an account created again with
// a deleted one's id does not read the deleted one's entries.
func (l *AuditLog) List(ctx context.Context, account, cursor string, limit int, own bool, createdMS int64) (AuditPage, error) {
	if l.store == nil {
		return AuditPage{}, &Error{Code: CodeInternal, Message: "internal error", cause: errors.New("engine: no audit store")}
	}
	if limit < 1 || limit > MaxAuditPage {
		return AuditPage{}, Invalid(fmt.Sprintf("limit must be an integer from 1 to %d", MaxAuditPage))
	}
	if cursor != "" && !ValidAuditCursor(cursor) {
		return AuditPage{}, Invalid("cursor is not one this API returned")
	}
	if account != "" && !ValidAccountID(account) {
		return AuditPage{}, Invalid("account must match [a-z0-9][a-z0-9_-]{0,63}")
	}
	list, err := l.store.ListAudit(ctx, account, cursor, limit+1)
	if err != nil {
		return AuditPage{}, unavailable(err)
	}
	for i, e := range list {
		if own && e.AccountCreatedMS != createdMS {
			list = list[:i] // newest first: every later one is of the older account too
			break
		}
	}
	if len(list) <= limit {
		return AuditPage{Entries: list}, nil
	}
	list = list[:limit]
	return AuditPage{Entries: list, Next: list[limit-1].ID}, nil
}
