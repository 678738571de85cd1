// Package record encodes the memory store's journal records (spec §11.5): the kind byte
// that starts every record key, the key builders, and the varint, string and rule
// encodings of their values.
package record

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/leashd/leash/engine"
)

// The first byte of a record key says what it holds.
const (
	Counter = 'c' // encoded counter key → state and expiry
	Lease   = 'l' // set key (length-prefixed), token → expiry, time-to-live
	Rule    = 'r' // rule key, kind → rule
	Daily   = 'd' // account, namespace, day → total, blocked
	Monthly = 'm' // account, month → total
	Batch   = 'b' // usage batch id → when applied
	Webhook = 'w' // account → webhook
	Event   = 'e' // event id → due instant, event
	Once    = 'o' // once-key → when forgotten
	Account = 'a' // account id → account
	Key     = 'k' // account (length-prefixed), key id → key
	Version = 'v' // the accounts version
	Audit   = 't' // audit entry id → entry
)

// ErrMalformed is a record that cannot be read.
var ErrMalformed = errors.New("memstore: malformed journal record")

// AppendString appends s length-prefixed (uvarint), so that the encoding is injective.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendVarints appends each of vs as a varint.
func AppendVarints(b []byte, vs ...int64) []byte {
	for _, v := range vs {
		b = binary.AppendVarint(b, v)
	}
	return b
}

// ReadVarints reads len(out) varints from b, and returns what follows.
func ReadVarints(b []byte, out ...*int64) ([]byte, error) {
	for _, p := range out {
		v, n := binary.Varint(b)
		if n <= 0 {
			return nil, ErrMalformed
		}
		*p, b = v, b[n:]
	}
	return b, nil
}

// ReadString reads a length-prefixed string from b, and returns what follows.
func ReadString(b []byte) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return "", nil, ErrMalformed
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}

// CounterKey appends the record key of the counter whose encoded key is key.
func CounterKey[S string | []byte](b []byte, key S) []byte {
	return append(append(b, Counter), key...)
}

// CounterValue appends a counter record's value: its state and expiry.
func CounterValue(b []byte, st [3]int64, exp int64) []byte {
	return AppendVarints(b, st[0], st[1], st[2], exp)
}

// LeaseKey appends the record key of the lease token holds in the set whose encoded key
// is set.
func LeaseKey(b []byte, set, token string) []byte {
	b = AppendString(append(b, Lease), set)
	return append(b, token...)
}

// RuleKey appends the record key of the rule of kind at the encoded rule key.
func RuleKey(b []byte, key string, kind engine.RuleKind) []byte {
	b = append(append(b, Rule), key...)
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

// EncodeRule returns a rule record's value.
func EncodeRule(r *engine.Rule) []byte {
	b, _ := json.Marshal(ruleJSON{uint8(r.Algorithm), r.Limit, r.WindowMS, r.Name, r.Overrides.List()})
	return b
}

// DecodeRule reads a rule record's value.
func DecodeRule(v []byte) (*engine.Rule, error) {
	var j ruleJSON
	if err := json.Unmarshal(v, &j); err != nil {
		return nil, fmt.Errorf("%w: rule: %w", ErrMalformed, err)
	}
	return &engine.Rule{Algorithm: engine.Algorithm(j.Algorithm), Limit: j.Limit, WindowMS: j.WindowMS, Name: j.Name, Overrides: engine.NewOverrides(j.Overrides)}, nil
}

// DailyKey appends the record key of a daily usage count.
func DailyKey(b []byte, k engine.UsageKey) []byte {
	b = AppendString(append(b, Daily), k.Account)
	b = AppendString(b, k.Namespace)
	return binary.AppendVarint(b, int64(k.Day))
}

// MonthlyKey appends the record key of an account's total for a month.
func MonthlyKey(b []byte, account string, month int64) []byte {
	b = AppendString(append(b, Monthly), account)
	return binary.AppendVarint(b, month)
}

// Prefixed appends the record key of kind whose only part is s.
func Prefixed(b []byte, kind byte, s string) []byte { return append(append(b, kind), s...) }

// APIKey appends the record key of an account's API key.
func APIKey(b []byte, account, id string) []byte {
	b = AppendString(append(b, Key), account)
	return append(b, id...)
}

// EventValue appends an outbox event record's value: its due instant and the event.
func EventValue(b []byte, dueMS int64, ev any) []byte {
	b = binary.AppendVarint(b, dueMS)
	return append(b, JSON(ev)...)
}

// JSON returns v as JSON; v is a value that always encodes.
func JSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
