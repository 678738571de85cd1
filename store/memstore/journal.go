package memstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/leashd/leash/engine"
)

// Journal receives every change of the store's durable state, so a backend can keep it
// (the disk store, spec §11.5). The store calls it under the lock that orders the change,
// after deciding and before answering, with a record key and the record's whole new
// value: replaying the records in any order, through Restore, rebuilds the state. A
// change whose Set or Commit fails is not made, and the method returns the error; a
// failed Delete (state that expired, was evicted or was swept) is ignored, so the record
// comes back at Restore no newer than it was, and Restore drops it if it is dead.
//
// Kept: counters, leases, rules, usage (daily counts, month totals, applied batch ids),
// webhooks, outbox events and once-keys, accounts and keys, and the audit log. RLQS
// demand is not: every stream reports it again within seconds (spec §14.4).
//
// Keys and values are only valid during the call.
type Journal interface {
	// Set records key's new value.
	Set(key, value []byte) error
	// Delete records that key has no value any more.
	Delete(key []byte) error
	// Batch starts a group of changes that are recorded together or not at all.
	Batch() JournalBatch
}

// JournalBatch is a group of Journal changes, recorded at Commit.
type JournalBatch interface {
	// Set adds a record's new value to the batch.
	Set(key, value []byte)
	// Delete adds a record's removal to the batch.
	Delete(key []byte)
	// Commit records the batch's changes together, then releases the batch.
	Commit() error
}

// The first byte of a record key says what it holds.
const (
	recCounter = 'c' // encoded counter key → state and expiry
	recLease   = 'l' // set key (length-prefixed), token → expiry, time-to-live
	recRule    = 'r' // rule key, kind → rule
	recDaily   = 'd' // account, namespace, day → total, blocked
	recMonthly = 'm' // account, month → total
	recBatch   = 'b' // usage batch id → when applied
	recWebhook = 'w' // account → webhook
	recEvent   = 'e' // event id → due instant, event
	recOnce    = 'o' // once-key → when forgotten
	recAccount = 'a' // account id → account
	recKey     = 'k' // account (length-prefixed), key id → key
	recVersion = 'v' // the accounts version
	recAudit   = 't' // audit entry id → entry
)

// errRecord is a record Restore cannot read.
var errRecord = errors.New("memstore: malformed journal record")

// recBufSize is the stack buffer for record keys and small values.
const recBufSize = keyBufSize + 16

func appendVarints(b []byte, vs ...int64) []byte {
	for _, v := range vs {
		b = binary.AppendVarint(b, v)
	}
	return b
}

// readVarints reads len(out) varints from b, and returns what follows.
func readVarints(b []byte, out ...*int64) ([]byte, error) {
	for _, p := range out {
		v, n := binary.Varint(b)
		if n <= 0 {
			return nil, errRecord
		}
		*p, b = v, b[n:]
	}
	return b, nil
}

// readString reads a length-prefixed string from b, and returns what follows.
func readString(b []byte) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return "", nil, errRecord
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}

func counterRec(b []byte, key string) []byte { return append(append(b, recCounter), key...) }

func counterVal(b []byte, st [3]int64, exp int64) []byte {
	return appendVarints(b, st[0], st[1], st[2], exp)
}

func leaseRec(b []byte, set, token string) []byte {
	b = appendString(append(b, recLease), set)
	return append(b, token...)
}

func ruleRec(b []byte, key string, kind engine.RuleKind) []byte {
	b = append(append(b, recRule), key...)
	return append(b, byte(kind))
}

// ruleJSON is a rule as its record holds it.
type ruleJSON struct {
	Algorithm uint8             `json:"a"`
	Limit     int64             `json:"l"`
	WindowMS  int64             `json:"w"`
	Name      *string           `json:"n,omitempty"`
	Overrides []engine.Override `json:"o,omitempty"`
}

func encodeRule(r *engine.Rule) []byte {
	b, _ := json.Marshal(ruleJSON{uint8(r.Algorithm), r.Limit, r.WindowMS, r.Name, r.Overrides.List()})
	return b
}

func decodeRule(v []byte) (*engine.Rule, error) {
	var j ruleJSON
	if err := json.Unmarshal(v, &j); err != nil {
		return nil, fmt.Errorf("%w: rule: %w", errRecord, err)
	}
	return &engine.Rule{Algorithm: engine.Algorithm(j.Algorithm), Limit: j.Limit, WindowMS: j.WindowMS, Name: j.Name, Overrides: engine.NewOverrides(j.Overrides)}, nil
}

func dailyRec(b []byte, k engine.UsageKey) []byte {
	b = appendString(append(b, recDaily), k.Account)
	b = appendString(b, k.Namespace)
	return binary.AppendVarint(b, int64(k.Day))
}

func monthlyRec(b []byte, k accountMonth) []byte {
	b = appendString(append(b, recMonthly), k.account)
	return binary.AppendVarint(b, int64(k.month))
}

func prefixed(b []byte, prefix byte, s string) []byte { return append(append(b, prefix), s...) }

func keyRec(b []byte, account, id string) []byte {
	b = appendString(append(b, recKey), account)
	return append(b, id...)
}

func eventVal(e *outboxEntry) []byte {
	b := binary.AppendVarint(nil, e.dueMS)
	j, _ := json.Marshal(e.ev)
	return append(b, j...)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
