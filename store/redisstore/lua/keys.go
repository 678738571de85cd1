package lua

import (
	"strconv"
	"strings"

	"github.com/leashd/leash/engine"
)

// Key layout (docs/redis.md has the full table). P is the store's prefix; every name part is
// escaped by esc, so no part can end a hash tag early or run into the next part:
//
//	{P:k:<account>:<namespace>:<key>}:f:<W>     fixed_window counter of window W ms
//	{P:k:<account>:<namespace>:<key>}:s:<W>     sliding_window counter
//	{P:k:<account>:<namespace>:<key>}:t:<W>     token_bucket counter
//	{P:k:<account>:<namespace>:<key>}:lz        lease set: token -> expiry (sorted set)
//	{P:k:<account>:<namespace>:<key>}:lt        lease set: token -> ttl it was taken with (hash)
//	{P:k:<account>:<namespace>:<key>}:qz        RLQS demand: stream -> expiry (sorted set)
//	{P:k:<account>:<namespace>:<key>}:qr        RLQS demand: stream -> demand (hash)
//	{P:u:<account>}:d:<day>                     usage of one UTC day (hash t:<ns>, b:<ns>)
//	{P:u:<account>}:m:<month>                   usage total of one UTC month
//	{P:u:<account>}:seen:<instance>             last batch ids applied from one instance
//	{P:r}:<account>:<namespace>                 a namespace's rules (hash rate, concurrent)
//	{P:r}:version                               bumped by every rule write
//	{P:r}:idx/<account>                         the account's namespaces with rules (set)
//	{P:w:<account>}:hook                        the account's webhook (JSON url, secret)
//	{P:a}:ids, {P:a}:version, {P:a}:acct:<id>,
//	{P:a}:keys:<id>                             the admin API's accounts and keys (redisstore's accounts.go)
//	{P:ob}:due                                  outbox: event id -> due instant (sorted set)
//	{P:ob}:ev                                   outbox: event id -> event record (hash)
//	{P:ob}:once:<once-key>                      an Enqueue once-key: until when it is used
//
// All keys one script touches share one hash tag (the part in braces), so every script
// runs on one Redis Cluster slot.

// writeEscaped writes s to b with '%', '{', '}' and, unless last, ':' escaped as %XX.
// Account ids and namespaces never contain any of them (spec §2.1, §3.4), so they read as
// written; keys may, and ':' is left as it is in the last part of a tag, where it cannot
// be confused with a separator.
func writeEscaped(b *strings.Builder, s string, last bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' || c == '{' || c == '}' || (c == ':' && !last):
			b.WriteByte('%')
			b.WriteByte("0123456789ABCDEF"[c>>4])
			b.WriteByte("0123456789ABCDEF"[c&15])
		default:
			b.WriteByte(c)
		}
	}
}

// Keys builds key names for one prefix.
type Keys struct {
	prefix string // escaped
}

// NewKeys returns the key names of prefix (escaped as every name part is).
func NewKeys(prefix string) Keys {
	var b strings.Builder
	writeEscaped(&b, prefix, false)
	return Keys{prefix: b.String()}
}

// Prefix is the escaped prefix every key holds.
func (k Keys) Prefix() string { return k.prefix }

// Tag returns "{P:k:<account>:<namespace>:<key>}", the hash tag of one key's counters and
// leases.
func (k Keys) Tag(account, namespace, key string) string {
	var b strings.Builder
	b.Grow(len(k.prefix) + len(account) + len(namespace) + len(key) + 24)
	b.WriteByte('{')
	b.WriteString(k.prefix)
	b.WriteString(":k:")
	writeEscaped(&b, account, false)
	b.WriteByte(':')
	writeEscaped(&b, namespace, false)
	b.WriteByte(':')
	writeEscaped(&b, key, true)
	b.WriteByte('}')
	return b.String()
}

// AlgCode is the one-letter algorithm code of keys and scripts.
func AlgCode(a engine.Algorithm) string {
	switch a {
	case engine.FixedWindow:
		return "f"
	case engine.SlidingWindow:
		return "s"
	case engine.TokenBucket:
		return "t"
	}
	return ""
}

// Counter returns a rate counter's key.
func (k Keys) Counter(c engine.Counter) string {
	return k.Tag(c.Account, c.Namespace, c.Key) + ":" + AlgCode(c.Algorithm) + ":" + strconv.FormatInt(c.WindowMS, 10)
}

// Leases returns a lease set's two keys: the expiry sorted set and the ttl hash.
func (k Keys) Leases(s engine.LeaseSet) [2]string {
	t := k.Tag(s.Account, s.Namespace, s.Key)
	return [2]string{t + ":lz", t + ":lt"}
}

// Demand returns the two keys of a bucket's RLQS demand entries.
func (k Keys) Demand(b engine.DemandBucket) [2]string {
	t := k.Tag(b.Account, b.Namespace, b.Key)
	return [2]string{t + ":qz", t + ":qr"}
}

// UsageTag returns "{P:u:<account>}".
func (k Keys) UsageTag(account string) string {
	var b strings.Builder
	b.WriteByte('{')
	b.WriteString(k.prefix)
	b.WriteString(":u:")
	writeEscaped(&b, account, true)
	b.WriteByte('}')
	return b.String()
}

// UsageDay returns the key of the account's usage of day d.
func (k Keys) UsageDay(account string, d engine.Day) string {
	return k.UsageTag(account) + ":d:" + strconv.FormatInt(int64(d), 10)
}

// UsageMonth returns the key of the account's usage total of month m.
func (k Keys) UsageMonth(account string, m engine.Month) string {
	return k.UsageTag(account) + ":m:" + strconv.FormatInt(int64(m), 10)
}

// UsageSeen returns the key of the batch ids applied for account from the instance that
// made batch id (the part of the id before its last '-').
func (k Keys) UsageSeen(account, batchID string) string {
	inst := batchID
	if i := strings.LastIndexByte(batchID, '-'); i >= 0 {
		inst = batchID[:i]
	}
	var b strings.Builder
	b.WriteString(k.UsageTag(account))
	b.WriteString(":seen:")
	writeEscaped(&b, inst, true)
	return b.String()
}

// RulesTag is "{P:r}": all rules share one slot with the version key, so a rule write and
// the version bump are one atomic script.
func (k Keys) RulesTag() string { return "{" + k.prefix + ":r}" }

// FenceLog returns "{P:x}:fences", the last 4,096 fences on counters (sorted set, member
// "seq:counter key", score the seq): instances holding a slice of one stop deciding from it
// (reserve.go).
func (k Keys) FenceLog() string { return "{" + k.prefix + ":x}:fences" }

// FenceSeq returns "{P:x}:fences:n", the fence log's last seq.
func (k Keys) FenceSeq() string { return "{" + k.prefix + ":x}:fences:n" }

// Rules returns the key of a namespace's rules.
func (k Keys) Rules(account, namespace string) string {
	var b strings.Builder
	b.WriteString(k.RulesTag())
	b.WriteByte(':')
	writeEscaped(&b, account, false)
	b.WriteByte(':')
	writeEscaped(&b, namespace, true)
	return b.String()
}

// RulesVersion returns the key every rule write bumps.
func (k Keys) RulesVersion() string { return k.RulesTag() + ":version" }

// RuleIndex returns "{P:r}:idx/<account>", the set of the account's namespaces with rules
// ('/' is in no account id, so no rules key and no account's index can be named alike).
func (k Keys) RuleIndex(account string) string {
	var b strings.Builder
	b.WriteString(k.RulesTag())
	b.WriteString(":idx/")
	writeEscaped(&b, account, true)
	return b.String()
}

// Webhook returns "{P:w:<account>}:hook", the key of an account's webhook.
func (k Keys) Webhook(account string) string {
	var b strings.Builder
	b.WriteByte('{')
	b.WriteString(k.prefix)
	b.WriteString(":w:")
	writeEscaped(&b, account, true)
	b.WriteString("}:hook")
	return b.String()
}

// slotTag is "{P:<name>}", the hash tag of a slot that holds a whole part: the outbox
// ("ob": its once-keys included, so every outbox script is atomic over it) or the audit
// log ("audit").
func slotTag(prefix, name string) string { return "{" + prefix + ":" + name + "}" }

// OutboxDue returns the outbox's sorted set of due instants.
func (k Keys) OutboxDue() string { return slotTag(k.prefix, "ob") + ":due" }

// OutboxEvents returns the outbox's hash of event records.
func (k Keys) OutboxEvents() string { return slotTag(k.prefix, "ob") + ":ev" }

// OutboxOnce returns the key of an Enqueue once-key.
func (k Keys) OutboxOnce(onceKey string) string {
	var b strings.Builder
	b.WriteString(slotTag(k.prefix, "ob"))
	b.WriteString(":once:")
	writeEscaped(&b, onceKey, true)
	return b.String()
}

// AccountsTag is "{P:a}", the slot of the admin API's accounts and keys.
func (k Keys) AccountsTag() string { return "{" + k.prefix + ":a}" }

// AccountKeys returns the accounts script's KEYS for one account (or none: id "").
func (k Keys) AccountKeys(id string) []string {
	t := k.AccountsTag()
	if id == "" {
		return []string{t + ":ids", t + ":version"}
	}
	return []string{t + ":ids", t + ":version", t + ":acct:" + id, t + ":keys:" + id}
}

// AuditAll is the audit log's set of every entry.
func (k Keys) AuditAll() string { return slotTag(k.prefix, "audit") + ":all" }

// AuditAccount is the audit log's set of one account's entries.
func (k Keys) AuditAccount(id string) string { return slotTag(k.prefix, "audit") + ":acct:" + id }

// Slot is the Redis Cluster slot of key: CRC16 (XMODEM) of its hash tag, mod 16384.
func Slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc & 16383
}
