// Package audit is the capability that records changes in the audit log and pages it
// back (spec §15.10). Its port is engine.AuditStore: append and list.
package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/leashd/leash/engine"
)

// Log records changes in an engine.AuditStore and reads them back.
type Log struct {
	store engine.AuditStore
	log   *slog.Logger
}

// Page is one page of the audit log, newest first; Next is the cursor of the next
// page, "" on the last.
type Page struct {
	Entries []engine.AuditEntry
	Next    string
}

// New returns the audit log over store; with a nil store changes are not recorded and
// reads fail as internal. Failures are logged to log.
func New(store engine.AuditStore, log *slog.Logger) *Log {
	if log == nil {
		log = slog.Default()
	}
	return &Log{store: store, log: log}
}

// Record adds a change to the log: who made it comes from by (an operator) or, without an
// operator, from the account that made it and the key in ctx's Origin. A store that fails
// loses nothing silently: the entry is logged at error instead.
func (l *Log) Record(ctx context.Context, by engine.Actor, ent engine.AuditEntry) {
	if l.store == nil {
		return
	}
	o := engine.OriginOf(ctx)
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
func (l *Log) List(ctx context.Context, account, cursor string, limit int, own bool, createdMS int64) (Page, error) {
	if l.store == nil {
		return Page{}, engine.Internal(errors.New("engine: no audit store"))
	}
	if limit < 1 || limit > engine.MaxAuditPage {
		return Page{}, engine.Invalid(fmt.Sprintf("limit must be an integer from 1 to %d", engine.MaxAuditPage))
	}
	if cursor != "" && !engine.ValidAuditCursor(cursor) {
		return Page{}, engine.Invalid("cursor is not one this API returned")
	}
	if account != "" && !engine.ValidAccountID(account) {
		return Page{}, engine.Invalid("account must match [a-z0-9][a-z0-9_-]{0,63}")
	}
	list, err := l.store.ListAudit(ctx, account, cursor, limit+1)
	if err != nil {
		return Page{}, engine.Unavailable(err)
	}
	for i, e := range list {
		if own && e.AccountCreatedMS != createdMS {
			list = list[:i] // newest first: every later one is of the older account too
			break
		}
	}
	if len(list) <= limit {
		return Page{Entries: list}, nil
	}
	list = list[:limit]
	return Page{Entries: list, Next: list[limit-1].ID}, nil
}
