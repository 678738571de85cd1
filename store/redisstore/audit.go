package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/redisstore/lua"
)

// The audit log (spec §15.10): one slot, {P:audit}, with a sorted set of every entry and
// one per account, each entry '<id><json>' ordered bytewise, so pages are ranges of ids.
// Each append is one script that also drops entries older than engine.AuditRetention and
// the oldest beyond the caps, and sets the sets to expire a retention after the last
// append.

// auditJSON is an entry as stored after its id (which carries its instant).
type auditJSON struct {
	Operator  string            `json:"op,omitempty"`
	Account   string            `json:"acct"`
	Created   int64             `json:"gen,omitempty"`
	ByAccount string            `json:"by,omitempty"`
	KeyID     string            `json:"kid,omitempty"`
	Action    string            `json:"act"`
	Target    string            `json:"tgt,omitempty"`
	Details   map[string]string `json:"det,omitempty"`
	Client    string            `json:"ip,omitempty"`
	RequestID string            `json:"rid,omitempty"`
}

func retentionArg() string { return strconv.FormatInt(engine.AuditRetention.Milliseconds(), 10) }

// AppendAudit records e with its id and instant from the store's clock.
func (s *AuditStore) AppendAudit(ctx context.Context, e engine.AuditEntry) (engine.AuditEntry, error) {
	if err := e.Validate(); err != nil {
		return engine.AuditEntry{}, err
	}
	rec, err := json.Marshal(auditJSON{Operator: e.Operator, Account: e.Account, Created: e.AccountCreatedMS, ByAccount: e.ActorAccount, KeyID: e.KeyID,
		Action: string(e.Action), Target: e.Target, Details: e.Details, Client: e.Client, RequestID: e.RequestID})
	if err != nil {
		return engine.AuditEntry{}, fmt.Errorf("redisstore: encode audit entry: %w", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	cmd, err := s.eval(s.opCtx(ctx), lua.Audit, []string{s.keys.AuditAll(), s.keys.AuditAccount(e.Account)},
		s.nowArg(), "append", retentionArg(), hex.EncodeToString(b), rec, engine.MaxAuditEntries, engine.MaxAuditPerAccount)
	if err != nil {
		return engine.AuditEntry{}, err
	}
	id, ok := cmd.Val().(string)
	if !ok || !engine.ValidAuditCursor(id) {
		return engine.AuditEntry{}, fmt.Errorf("redisstore: append audit: unexpected reply %v", cmd.Val())
	}
	e.ID, e.TimeMS = id, auditTime(id)
	return e, nil
}

// auditTime reads the instant at the start of an entry id.
func auditTime(id string) int64 {
	ms, _ := strconv.ParseInt(id[:13], 10, 64)
	return ms
}

// ListAudit returns up to limit unexpired entries of account ("" every account) with ids
// before before ("" none), newest first.
func (s *AuditStore) ListAudit(ctx context.Context, account, before string, limit int) ([]engine.AuditEntry, error) {
	key := s.keys.AuditAll()
	if account != "" {
		if !engine.ValidAccountID(account) {
			return nil, nil
		}
		key = s.keys.AuditAccount(account)
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: audit page of %d", engine.ErrInvalidArgument, limit)
	}
	cmd, err := s.eval(s.opCtx(ctx), lua.Audit, []string{key}, s.nowArg(), "list", retentionArg(), before, limit)
	if err != nil {
		return nil, err
	}
	l, err := replyList(cmd.Val())
	if err != nil {
		return nil, err
	}
	out := make([]engine.AuditEntry, 0, len(l))
	for _, v := range l {
		m, _ := v.(string)
		if len(m) <= engine.AuditIDLen || !engine.ValidAuditCursor(m[:engine.AuditIDLen]) {
			return nil, fmt.Errorf("redisstore: audit entry %q: bad record", m)
		}
		var j auditJSON
		if err := json.Unmarshal([]byte(m[engine.AuditIDLen:]), &j); err != nil {
			return nil, fmt.Errorf("redisstore: audit entry %s: %w", m[:engine.AuditIDLen], err)
		}
		id := m[:engine.AuditIDLen]
		out = append(out, engine.AuditEntry{ID: id, TimeMS: auditTime(id), Operator: j.Operator, ActorAccount: j.ByAccount,
			KeyID: j.KeyID, Action: engine.AuditAction(j.Action), Account: j.Account, AccountCreatedMS: j.Created, Target: j.Target, Details: j.Details,
			Client: j.Client, RequestID: j.RequestID})
	}
	return out, nil
}
