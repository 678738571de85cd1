package descriptors

import (
	"slices"
	"strconv"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/leashd/leash/engine"
)

// Limit is one configured rate limit of a descriptor.
type Limit struct {
	Name            string           // the rate limit's name, "" when none
	Algorithm       engine.Algorithm // engine.FixedWindow unless configured
	RequestsPerUnit int64            // 0 denies every request
	Unit            rlsv3.RateLimitResponse_RateLimit_Unit
	UnitMultiplier  int64 // ≥ 1
	WindowMS        int64 // UnitMS(Unit) × UnitMultiplier
}

// Rule is one configured descriptor that can match: it has limits or is unlimited.
type Rule struct {
	Domain         string
	File, Path     string           // where it was defined, for logs and errors
	Line           int              // the YAML line of Path; 0 when unknown (an xDS resource)
	Descriptor     []Entry          // configured keys and values from the top level down (patterns as written, "" for a bare key)
	MetricKey      string           // the rule's key path for metrics: each level's key, or key_value, joined by "."
	Limits         []Limit          // from rate_limit or rate_limits; empty when Unlimited
	EngineLimits   []engine.Limit   // Limits as the engine takes them, in the same order
	Unlimited      bool             // matched requests are never limited
	Name           string           // the rate_limit's name when Unlimited; limited rules name their Limits
	ShadowMode     bool             // count, but never deny
	QuotaMode      bool             // the peer's quota_mode: see spec §9.7
	Overdraft      *bool            // Leash's overdraft: count the hits of a denial (spec §9.3); nil: the domain's setting
	Metadata       *structpb.Struct // the descriptor's metadata for the replies' dynamic metadata; nil when none
	DetailedMetric bool             // the peer's detailed_metric flag (accepted; Leash's metrics stay value-free)
	ValueToMetric  bool             // the peer's value_to_metric flag of this descriptor (metrics only)
	Replaces       []string         // names of rate limits this one replaces
}

// EngineLimits returns ls as the engine takes them, in the same order.
func EngineLimits(ls []Limit) []engine.Limit {
	out := make([]engine.Limit, len(ls))
	for i, l := range ls {
		out[i] = engine.Limit{Algorithm: l.Algorithm, Limit: l.RequestsPerUnit, WindowMS: l.WindowMS}
	}
	return out
}

// Entry is one key and value of a descriptor.
type Entry struct{ Key, Value string }

// Match is the result of matching a request descriptor.
type Match struct {
	Rule *Rule
	// Entries identify the counter: the request's own entries, except that a level
	// matched by a wildcard with share_threshold carries the configured pattern as its
	// value, so that all values matching it share one counter. It may share memory
	// with the entries given to Match and must not be modified.
	Entries []Entry
}

// Config is a loaded set of descriptor files. It is immutable and safe for concurrent use.
type Config struct {
	domains map[string]*domain
	names   []string // sorted
	files   []string
	// fingerprint is that of the files Load read (see Watch); zero when not from Load.
	fingerprint [32]byte
}

type domain struct {
	name  string
	file  string
	line  int // of its domain key, 0 when unknown
	top   level
	rules []*Rule
}

// level holds the descriptors of one nesting level, by key.
type level map[string]*keyNodes

// keyNodes are the descriptors of one level that share a key.
type keyNodes struct {
	order int              // the key's position among its level's keys, in file order
	exact map[string]*node // by value
	wild  []*node          // in file order
	bare  *node            // the descriptor without a value
}

type node struct {
	value string   // configured value; "" for the bare key
	glob  []string // value split at '*' when it is a wildcard
	path  string   // where it was defined
	share bool
	rule  *Rule // nil when the descriptor has no limit of its own
	next  level // nil when it has no nested descriptors
}

// find returns the descriptor for value and whether a wildcard chose it.
func (k *keyNodes) find(value string) (*node, bool) {
	if n := k.exact[value]; n != nil {
		return n, false
	}
	for _, n := range k.wild {
		if globMatch(n.glob, value) {
			return n, true
		}
	}
	return k.bare, false
}

// globMatch reports whether s matches the pattern split at its stars.
func globMatch(parts []string, s string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	if !strings.HasSuffix(s, last) {
		return false
	}
	s = s[:len(s)-len(last)]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return true
}

// Match finds the rule for a request descriptor of domain; false means no rule applies.
func (c *Config) Match(domain string, entries []Entry) (Match, bool) {
	if len(entries) == 0 {
		return Match{}, false
	}
	rule, sh, ok := c.walk(domain, len(entries), func(lvl level, i int) (Entry, *keyNodes) {
		return entries[i], lvl[entries[i].Key]
	})
	if !ok {
		return Match{}, false
	}
	return Match{Rule: rule, Entries: withShared(entries, sh, false)}, true
}

// MaxBucketEntries bounds the entries of a bucket id MatchBucket takes; a longer one
// matches nothing.
const MaxBucketEntries = 32

// MatchBucket finds the rule for an RLQS bucket id of domain: an unordered set of
// entries, each key once. The descriptor tree orders it: at each level the walk takes,
// among the bucket's entries not yet used whose key the level lists, one whose
// descriptor (by value, as Match chooses: exact, wildcard, bare key) can go on — it has
// nested descriptors while entries remain, a limit at the last — and among those, or
// when none can, the one whose key the level lists first in the file (spec §14.2). There
// is no backtracking. The bucket matches when every entry is used and the last lands on
// a rule. The match's
// Entries are the bucket's entries in that order, so they name the counter a request
// descriptor with the same entries in the same order spends. Each key of bucket is a
// distinct key; false means no rule applies.
func (c *Config) MatchBucket(domain string, bucket map[string]string) (Match, bool) {
	n := len(bucket)
	if n == 0 || n > MaxBucketEntries {
		return Match{}, false
	}
	var buf [MaxBucketEntries]Entry
	rest := buf[:0]
	for k, v := range bucket {
		rest = append(rest, Entry{Key: k, Value: v})
	}
	path := make([]Entry, 0, n)
	rule, sh, ok := c.walk(domain, n, func(lvl level, i int) (Entry, *keyNodes) {
		last := i == n-1
		best, bestK, bestFits := -1, (*keyNodes)(nil), false
		for j := range rest {
			k := lvl[rest[j].Key]
			if k == nil {
				continue
			}
			nd, _ := k.find(rest[j].Value)
			fits := nd != nil && (last && nd.rule != nil || !last && nd.next != nil)
			if bestK == nil || fits && !bestFits || fits == bestFits && k.order < bestK.order {
				best, bestK, bestFits = j, k, fits
			}
		}
		if best < 0 {
			return Entry{}, nil
		}
		e := rest[best]
		rest[best] = rest[len(rest)-1]
		rest = rest[:len(rest)-1]
		path = append(path, e)
		return e, bestK
	})
	if !ok {
		return Match{}, false
	}
	return Match{Rule: rule, Entries: withShared(path, sh, true)}, true
}

// shared is a level matched by a wildcard with share_threshold: its pattern stands in
// for the entry's value in the counter key.
type shared struct {
	level   int
	pattern string
}

// walk is the one descriptor match (spec §9.4): n entries from the top level down, next
// choosing each level's entry and its key's descriptors (nil: no match). It returns the
// rule the last entry lands on and the levels whose value a shared pattern replaces.
func (c *Config) walk(domain string, n int, next func(lvl level, i int) (Entry, *keyNodes)) (*Rule, []shared, bool) {
	if c == nil {
		return nil, nil, false
	}
	d := c.domains[domain]
	if d == nil {
		return nil, nil, false
	}
	var sh []shared
	lvl := d.top
	for i := range n {
		e, k := next(lvl, i)
		if k == nil {
			return nil, nil, false
		}
		nd, wild := k.find(e.Value)
		if nd == nil {
			return nil, nil, false
		}
		if wild && nd.share {
			sh = append(sh, shared{i, nd.value})
		}
		if i == n-1 {
			return nd.rule, sh, nd.rule != nil
		}
		lvl = nd.next
	}
	return nil, nil, false // not reached
}

// withShared returns entries with the shared patterns in place, copying them if needed.
func withShared(entries []Entry, sh []shared, copied bool) []Entry {
	if len(sh) == 0 {
		return entries
	}
	if !copied {
		entries = slices.Clone(entries)
	}
	for _, s := range sh {
		entries[s.level].Value = s.pattern
	}
	return entries
}

// Domains returns the configured domains, sorted.
func (c *Config) Domains() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.names)
}

// Rules returns every rule of a domain in the order the file defines them.
func (c *Config) Rules(domain string) []*Rule {
	if c == nil || c.domains[domain] == nil {
		return nil
	}
	return slices.Clone(c.domains[domain].rules)
}

// File returns the file that defines domain, or "" when none does.
func (c *Config) File(domain string) string {
	if c == nil || c.domains[domain] == nil {
		return ""
	}
	return c.domains[domain].file
}

// Where returns the file that defines domain and, when known, the line of its domain key:
// "file:line" or "file".
func (c *Config) Where(domain string) string {
	if c == nil || c.domains[domain] == nil {
		return ""
	}
	d := c.domains[domain]
	if d.line > 0 {
		return d.file + ":" + strconv.Itoa(d.line)
	}
	return d.file
}

// Where returns the rule's place for error messages: "file:line: path", without the line
// when unknown.
func (r *Rule) Where() string {
	s := r.File
	if r.Line > 0 {
		s += ":" + strconv.Itoa(r.Line)
	}
	return s + ": " + r.Path
}

// Files returns the files the configuration was loaded from, in load order.
func (c *Config) Files() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.files)
}

// unitMS holds each unit's fixed length in milliseconds.
var unitMS = [...]int64{
	rlsv3.RateLimitResponse_RateLimit_SECOND: 1000,
	rlsv3.RateLimitResponse_RateLimit_MINUTE: 60 * 1000,
	rlsv3.RateLimitResponse_RateLimit_HOUR:   3600 * 1000,
	rlsv3.RateLimitResponse_RateLimit_DAY:    86400 * 1000,
	rlsv3.RateLimitResponse_RateLimit_WEEK:   7 * 86400 * 1000,
	rlsv3.RateLimitResponse_RateLimit_MONTH:  30 * 86400 * 1000,
	rlsv3.RateLimitResponse_RateLimit_YEAR:   365 * 86400 * 1000,
}

// UnitMS returns a unit's fixed length in milliseconds, or 0 for UNKNOWN and undefined units.
func UnitMS(u rlsv3.RateLimitResponse_RateLimit_Unit) int64 {
	if u < 0 || int(u) >= len(unitMS) {
		return 0
	}
	return unitMS[u]
}

var unitNames = []string{"second", "minute", "hour", "day", "week", "month", "year"}

// ParseUnit maps a unit name, in any ASCII letter case, to its Unit; ok is false for anything else.
func ParseUnit(s string) (u rlsv3.RateLimitResponse_RateLimit_Unit, ok bool) {
	for _, name := range unitNames {
		if asciiEqualFold(s, name) {
			v := rlsv3.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(name)]
			return rlsv3.RateLimitResponse_RateLimit_Unit(v), true
		}
	}
	return rlsv3.RateLimitResponse_RateLimit_UNKNOWN, false
}

func asciiEqualFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
