package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Algorithm names a rate-limit algorithm, or the lease kind concurrent_limit.
type Algorithm uint8

// The algorithms of spec §4.6–§4.8 and the lease kind of spec §5.1.
const (
	AlgorithmUnknown Algorithm = iota
	FixedWindow
	SlidingWindow
	TokenBucket
	ConcurrentLimit
	// AlgorithmUnrecognized stands for a name that is none of the above (unknown_algorithm
	// once resolution reaches it, spec §3.7).
	AlgorithmUnrecognized Algorithm = 255
)

var algorithmNames = [...]string{"", "fixed_window", "sliding_window", "token_bucket", "concurrent_limit"}

// String returns the algorithm's wire name.
func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return ""
}

// ParseAlgorithm maps a wire name to an Algorithm; ok is false for an unknown name.
func ParseAlgorithm(s string) (a Algorithm, ok bool) {
	for i := FixedWindow; i <= ConcurrentLimit; i++ {
		if algorithmNames[i] == s {
			return i, true
		}
	}
	return AlgorithmUnknown, false
}

// AlgorithmOf maps a wire name to an Algorithm, AlgorithmUnrecognized for an unknown name.
func AlgorithmOf(name string) Algorithm {
	if a, ok := ParseAlgorithm(name); ok {
		return a
	}
	return AlgorithmUnrecognized
}

// Kind is the rule kind the algorithm belongs to: rate or concurrent.
func (a Algorithm) Kind() RuleKind {
	if a == ConcurrentLimit {
		return ConcurrentRule
	}
	return RateRule
}

// Counter identifies one rate counter: two windows on one key are two counters.
type Counter struct {
	Account   string
	Namespace string
	Key       string
	Algorithm Algorithm
	WindowMS  int64
}

// Spend asks a store to spend Cost units of Counter under Limit, atomically.
type Spend struct {
	Counter Counter
	Limit   int64
	Cost    int64
	// Overdraft counts a denied cost all the same (spec §4.12): the window counts grow
	// past the limit, a token bucket goes into debt. Cost may then exceed Limit, up to
	// MaxOverdraftCost. The verdict is unchanged.
	Overdraft bool
}

// MaxSpendAll is the most counters one Store.SpendAll decides together.
const MaxSpendAll = 8

// Validate checks a counter for the stores: a rate algorithm and a window of 1 to
// MaxWindowMS ms. The error wraps ErrInvalidArgument.
func (c *Counter) Validate() error {
	switch c.Algorithm {
	case FixedWindow, SlidingWindow, TokenBucket:
	default:
		return invalidArg("%q is not a rate algorithm", c.Algorithm.String())
	}
	if c.WindowMS < 1 || c.WindowMS > MaxWindowMS {
		return invalidArg("window %d ms is outside 1..%d", c.WindowMS, MaxWindowMS)
	}
	return nil
}

// Validate checks a spend for the stores: a valid counter, a limit of 1 to MaxLimit and a
// cost of 0 to the limit (to MaxOverdraftCost with Overdraft), the ranges the algorithms' integer arithmetic is exact in
// (spec §4.10). The error wraps ErrInvalidArgument.
func (s *Spend) Validate() error {
	if err := s.Counter.Validate(); err != nil {
		return err
	}
	if s.Limit < 1 || s.Limit > MaxLimit {
		return invalidArg("limit %d is outside 1..%d", s.Limit, MaxLimit)
	}
	maxCost := s.Limit
	if s.Overdraft {
		maxCost = MaxOverdraftCost
	}
	if s.Cost < 0 || s.Cost > maxCost {
		return invalidArg("cost %d is outside 0..%d", s.Cost, maxCost)
	}
	return nil
}

// ValidateSpendAll checks Store.SpendAll's arguments: 1 to MaxSpendAll valid spends of one
// account, namespace and key with distinct (algorithm, window), and room for every
// verdict in out. The error wraps ErrInvalidArgument.
func ValidateSpendAll(spends []Spend, out []Decision) error {
	if len(spends) == 0 || len(spends) > MaxSpendAll || len(out) < len(spends) {
		return invalidArg("SpendAll takes 1 to %d spends and as many verdicts", MaxSpendAll)
	}
	c0 := &spends[0].Counter
	for i := range spends {
		sp := &spends[i]
		if err := sp.Validate(); err != nil {
			return err
		}
		c := &sp.Counter
		if c.Account != c0.Account || c.Namespace != c0.Namespace || c.Key != c0.Key {
			return invalidArg("SpendAll's counters must share account, namespace and key")
		}
		for _, p := range spends[:i] {
			if p.Counter.Algorithm == c.Algorithm && p.Counter.WindowMS == c.WindowMS {
				return invalidArg("SpendAll's counters must differ in algorithm or window")
			}
		}
	}
	return nil
}

// Decision is a store's verdict on a Spend (spec §4.9).
type Decision struct {
	Allowed   bool
	Limit     int64
	Remaining int64
	// ResetMS: if allowed, ms until Remaining is back to Limit with no further traffic;
	// if denied, ms until the same request would be allowed.
	ResetMS int64
	// NowMS is the store's clock (Unix ms) at the decision; usage days follow it.
	NowMS int64
}

// LeaseSet identifies the leases held on one (account, namespace, key).
type LeaseSet struct {
	Account   string
	Namespace string
	Key       string
}

// LeaseDecision is the verdict on acquiring a lease (spec §5.1).
type LeaseDecision struct {
	Allowed bool
	// LeaseID is set by the engine when Allowed; stores leave it empty.
	LeaseID string
	Active  int64
	Limit   int64
	// ResetMS: the lease's time-to-live when allowed; when denied, ms until the
	// soonest-expiring lease frees a slot.
	ResetMS int64
	// NowMS is the store's clock (Unix ms) at the decision.
	NowMS int64
}

// ReleaseResult is the outcome of releasing a lease.
type ReleaseResult struct {
	Released bool
	Active   int64
}

// RenewResult is the outcome of renewing a lease.
type RenewResult struct {
	Renewed bool
	Active  int64
	ResetMS int64
}

// RuleKind separates a namespace's two rule slots.
type RuleKind uint8

// The two kinds of rule a namespace holds at most one each of.
const (
	RateRule RuleKind = iota
	ConcurrentRule
)

// String returns the kind's path name: "rate" or "concurrent".
func (k RuleKind) String() string {
	if k == ConcurrentRule {
		return "concurrent"
	}
	return "rate"
}

// ParseRuleKind maps "rate" or "concurrent" to a RuleKind.
func ParseRuleKind(s string) (RuleKind, bool) {
	switch s {
	case "rate":
		return RateRule, true
	case "concurrent":
		return ConcurrentRule, true
	}
	return RateRule, false
}

// Rule is a namespace's default for one kind (spec §6.1).
type Rule struct {
	Algorithm Algorithm
	Limit     int64
	WindowMS  int64
	Name      *string
	// Overrides give some keys their own limit and window (spec §6.7).
	Overrides Overrides
}

// Rules holds a namespace's rate rule and concurrent rule; either may be nil.
type Rules struct {
	Rate       *Rule
	Concurrent *Rule
}

// Day is a UTC day as days since the Unix epoch.
type Day int64

// Month is a UTC month as year*12 + (month-1).
type Month int64

const msPerDay = 24 * 60 * 60 * 1000

// DayOf returns the UTC day of a Unix-ms instant.
func DayOf(ms int64) Day {
	if ms < 0 {
		return Day((ms - msPerDay + 1) / msPerDay)
	}
	return Day(ms / msPerDay)
}

// Time returns the day's first instant.
func (d Day) Time() time.Time { return time.UnixMilli(int64(d) * msPerDay).UTC() }

// String formats the day as 2006-01-02.
func (d Day) String() string { return d.Time().Format(time.DateOnly) }

// Month returns the month the day is in.
func (d Day) Month() Month { return MonthOf(d.Time()) }

// MonthOf returns the UTC month of t.
func MonthOf(t time.Time) Month {
	t = t.UTC()
	return Month(t.Year()*12 + int(t.Month()) - 1)
}

// Start returns the month's first instant.
func (m Month) Start() time.Time {
	return time.Date(int(m)/12, time.Month(int(m)%12+1), 1, 0, 0, 0, 0, time.UTC)
}

// End returns the first instant of the next month.
func (m Month) End() time.Time { return (m + 1).Start() }

// String formats the month as 2006-01.
func (m Month) String() string { return m.Start().Format("2006-01") }

// UsageKey identifies one namespace's usage on one day.
type UsageKey struct {
	Account   string
	Namespace string
	Day       Day
}

// UsageCount is a number of decisions and how many of them were denied.
type UsageCount struct {
	Total   int64
	Blocked int64
}

// UsageBatch is a set of usage increments applied at most once, identified by ID.
type UsageBatch struct {
	// ID is unique per batch; a store that already applied a batch with this ID ignores it.
	ID     string
	Counts map[UsageKey]UsageCount
}

// UsageQuery asks for one namespace's days and its account's month total.
type UsageQuery struct {
	Account   string
	Namespace string
	FirstDay  Day // inclusive
	LastDay   Day // inclusive
	Month     Month
}

// UsageReport answers a UsageQuery.
type UsageReport struct {
	// Days has one entry per day from FirstDay to LastDay, oldest first, zero-filled.
	Days []UsageCount
	// MonthTotal is the account's total over all namespaces in the queried month.
	MonthTotal int64
}

// Webhook is an account's webhook endpoint and signing secret (spec §8.1).
type Webhook struct {
	URL    string
	Secret string
}

// OutboxEvent is a webhook event waiting in the outbox (spec §8.5).
type OutboxEvent struct {
	ID        string // unique per event
	Account   string
	Type      string // e.g. "usage.quota_exceeded"
	CreatedMS int64  // Unix ms, set by the caller
	Data      []byte // a JSON object; stores keep it compacted (json.Compact)
	Attempts  int    // failed deliveries so far (set by the store)
}

// OnceKeyTTL is how long a store remembers an Enqueue once-key, by its own clock: longer
// than a month, so a key naming an account-month is used at most once.
const OnceKeyTTL = 45 * 24 * time.Hour

// MaxOutboxDelayMS is the longest visibility timeout or retry delay a store accepts
// (366 days).
const MaxOutboxDelayMS int64 = 366 * msPerDay

// ErrInvalidArgument is wrapped by the error a Store returns for a webhook or outbox call
// whose arguments are out of range; such a call changes nothing. It is the caller's bug,
// not an outage.
var ErrInvalidArgument = errors.New("invalid argument")

func invalidArg(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, a...)...)
}

// ValidateWebhook checks Store.PutWebhook's arguments: the account and the URL must not
// be empty. The error wraps ErrInvalidArgument.
func ValidateWebhook(account string, w Webhook) error {
	switch {
	case account == "":
		return invalidArg("empty account")
	case w.URL == "":
		return invalidArg("empty webhook URL")
	}
	return nil
}

// Validate checks an event for Store.Enqueue: ID, Account and Type must not be empty
// (Account and Type valid UTF-8), and Data must be a JSON object. The error wraps
// ErrInvalidArgument.
func (ev OutboxEvent) Validate() error {
	switch {
	case ev.ID == "":
		return invalidArg("event has an empty id")
	case ev.Account == "" || !utf8.ValidString(ev.Account):
		return invalidArg("event %q has an empty or invalid account", ev.ID)
	case ev.Type == "" || !utf8.ValidString(ev.Type):
		return invalidArg("event %q has an empty or invalid type", ev.ID)
	}
	d := bytes.TrimLeft(ev.Data, " \t\r\n")
	if len(d) == 0 || d[0] != '{' || !json.Valid(d) {
		return invalidArg("event %q: data is not a JSON object", ev.ID)
	}
	return nil
}

// ValidateOutboxDelay checks a visibility timeout or retry delay: 0 to MaxOutboxDelayMS.
// The error wraps ErrInvalidArgument.
func ValidateOutboxDelay(ms int64) error {
	if ms < 0 || ms > MaxOutboxDelayMS {
		return invalidArg("delay %d ms is outside 0..%d", ms, MaxOutboxDelayMS)
	}
	return nil
}

// Clock tells the time; stores take one so tests can control it.
type Clock interface {
	Now() time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Bounds of the demand entries (spec §14.4).
const (
	// MaxDemandStreams is the most streams one bucket's demand entries hold.
	MaxDemandStreams = 1024
	// MaxDemandTTLMS is the longest time-to-live of a demand entry: 10 minutes.
	MaxDemandTTLMS = 600_000
	// MaxStreamID is the longest stream id, in bytes.
	MaxStreamID = 64
	// MaxDemandMilliRPS is the largest demand an entry records (1e12: a billion requests
	// per second, in thousandths).
	MaxDemandMilliRPS = 1_000_000_000_000
)

// DemandBucket names the counter an RLQS bucket spends: one account, namespace and key.
type DemandBucket struct {
	Account   string
	Namespace string
	Key       string
}

// DemandReport is one stream's recent demand on one bucket.
type DemandReport struct {
	Bucket DemandBucket
	// Stream identifies the RLQS stream, unique across instances: 1 to MaxStreamID bytes.
	Stream string
	// MilliRPS is the demand in thousandths of a request per second: 0 to
	// MaxDemandMilliRPS.
	MilliRPS int64
	// TTLMS is how long the entry lives: 1 to MaxDemandTTLMS ms.
	TTLMS int64
}

// StreamDemand is one stream's entry of a bucket.
type StreamDemand struct {
	Stream    string
	MilliRPS  int64
	ExpiresMS int64 // the store's Unix ms at which the entry expires
}

// Validate checks a demand report for the stores; the error wraps ErrInvalidArgument.
func (d *DemandReport) Validate() error {
	if err := ValidateDemandBucket(d.Bucket, d.Stream); err != nil {
		return err
	}
	if d.MilliRPS < 0 || d.MilliRPS > MaxDemandMilliRPS {
		return invalidArg("demand %d is outside 0..%d", d.MilliRPS, int64(MaxDemandMilliRPS))
	}
	if d.TTLMS < 1 || d.TTLMS > MaxDemandTTLMS {
		return invalidArg("time-to-live %d ms is outside 1..%d", d.TTLMS, MaxDemandTTLMS)
	}
	return nil
}

// ValidateDemandBucket checks a bucket and stream id for the stores: an account, a
// namespace and a key, and a stream id of 1 to MaxStreamID bytes. The error wraps
// ErrInvalidArgument.
func ValidateDemandBucket(b DemandBucket, stream string) error {
	if b.Account == "" || b.Namespace == "" || b.Key == "" {
		return invalidArg("a demand bucket needs an account, a namespace and a key")
	}
	if stream == "" || len(stream) > MaxStreamID {
		return invalidArg("stream id must be 1 to %d bytes", MaxStreamID)
	}
	return nil
}
