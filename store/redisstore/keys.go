package redisstore

import (
	"strconv"
	"strings"

	"github.com/leashd/leash/engine"
)

// Key layout (docs/redis.md has the full table). P is Options.Prefix; every name part is
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
//	{P:a}:keys:<id>                             the admin API's accounts and keys (accounts.go)
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

// keys builds key names for one prefix.
type keys struct {
	prefix string // escaped
}

func newKeys(prefix string) keys {
	var b strings.Builder
	writeEscaped(&b, prefix, false)
	return keys{prefix: b.String()}
}

// tag returns "{P:k:<account>:<namespace>:<key>}", the hash tag of one key's counters and
// leases.
func (k keys) tag(account, namespace, key string) string {
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

// algCode is the one-letter algorithm code of keys and scripts.
func algCode(a engine.Algorithm) string {
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

// counter returns a rate counter's key.
func (k keys) counter(c engine.Counter) string {
	return k.tag(c.Account, c.Namespace, c.Key) + ":" + algCode(c.Algorithm) + ":" + strconv.FormatInt(c.WindowMS, 10)
}

// leases returns a lease set's two keys: the expiry sorted set and the ttl hash.
func (k keys) leases(s engine.LeaseSet) [2]string {
	t := k.tag(s.Account, s.Namespace, s.Key)
	return [2]string{t + ":lz", t + ":lt"}
}

// demand returns the two keys of a bucket's RLQS demand entries.
func (k keys) demand(b engine.DemandBucket) [2]string {
	t := k.tag(b.Account, b.Namespace, b.Key)
	return [2]string{t + ":qz", t + ":qr"}
}

// usageTag returns "{P:u:<account>}".
func (k keys) usageTag(account string) string {
	var b strings.Builder
	b.WriteByte('{')
	b.WriteString(k.prefix)
	b.WriteString(":u:")
	writeEscaped(&b, account, true)
	b.WriteByte('}')
	return b.String()
}

func (k keys) usageDay(account string, d engine.Day) string {
	return k.usageTag(account) + ":d:" + strconv.FormatInt(int64(d), 10)
}

func (k keys) usageMonth(account string, m engine.Month) string {
	return k.usageTag(account) + ":m:" + strconv.FormatInt(int64(m), 10)
}

// usageSeen returns the key of the batch ids applied for account from the instance that
// made batch id (the part of the id before its last '-').
func (k keys) usageSeen(account, batchID string) string {
	inst := batchID
	if i := strings.LastIndexByte(batchID, '-'); i >= 0 {
		inst = batchID[:i]
	}
	var b strings.Builder
	b.WriteString(k.usageTag(account))
	b.WriteString(":seen:")
	writeEscaped(&b, inst, true)
	return b.String()
}

// rulesTag is "{P:r}": all rules share one slot with the version key, so a rule write and
// the version bump are one atomic script.
func (k keys) rulesTag() string { return "{" + k.prefix + ":r}" }

// fenceLog returns "{P:x}:fences", the last 4,096 fences on counters (sorted set, member
// "seq:counter key", score the seq): instances holding a slice of one stop deciding from it
// (reserve.go).
func (k keys) fenceLog() string { return "{" + k.prefix + ":x}:fences" }

// fenceSeq returns "{P:x}:fences:n", the fence log's last seq.
func (k keys) fenceSeq() string { return "{" + k.prefix + ":x}:fences:n" }

func (k keys) rules(account, namespace string) string {
	var b strings.Builder
	b.WriteString(k.rulesTag())
	b.WriteByte(':')
	writeEscaped(&b, account, false)
	b.WriteByte(':')
	writeEscaped(&b, namespace, true)
	return b.String()
}

func (k keys) rulesVersion() string { return k.rulesTag() + ":version" }

// ruleIndex returns "{P:r}:idx/<account>", the set of the account's namespaces with rules
// ('/' is in no account id, so no rules key and no account's index can be named alike).
func (k keys) ruleIndex(account string) string {
	var b strings.Builder
	b.WriteString(k.rulesTag())
	b.WriteString(":idx/")
	writeEscaped(&b, account, true)
	return b.String()
}

// webhook returns "{P:w:<account>}:hook", the key of an account's webhook.
func (k keys) webhook(account string) string {
	var b strings.Builder
	b.WriteByte('{')
	b.WriteString(k.prefix)
	b.WriteString(":w:")
	writeEscaped(&b, account, true)
	b.WriteString("}:hook")
	return b.String()
}

// outboxTag is "{P:ob}": the whole outbox, its once-keys included, is one slot, so every
// outbox script is atomic over it.
func (k keys) outboxTag() string { return "{" + k.prefix + ":ob}" }

func (k keys) outboxDue() string    { return k.outboxTag() + ":due" }
func (k keys) outboxEvents() string { return k.outboxTag() + ":ev" }

// outboxOnce returns the key of an Enqueue once-key.
func (k keys) outboxOnce(onceKey string) string {
	var b strings.Builder
	b.WriteString(k.outboxTag())
	b.WriteString(":once:")
	writeEscaped(&b, onceKey, true)
	return b.String()
}
