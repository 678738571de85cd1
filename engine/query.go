package engine

// The one decision path (spec §1.4). Every edge asks the engine the same question: a
// Query of items in one namespace, each a key spent under its limits. POST /v1/limit is a
// query of one item whose limit the caller sent or the namespace's rule supplies; an Envoy
// ShouldRateLimit request is a query of one item per descriptor, each with the limits its
// descriptor matched, the namespace's rule, or none. Decide validates, resolves, applies the
// plan gates and the hard cap, spends through the store (which decides with its own clock),
// and counts usage, in that order (spec §3.7).

// Edge names the interface a query came in through; metrics and traces label by it.
type Edge string

// The edges that ask the engine for decisions.
const (
	EdgeLimit  Edge = "limit"  // POST /v1/limit
	EdgeLeases Edge = "leases" // POST /v1/leases (leases.Acquire)
	EdgeEnvoy  Edge = "envoy"  // Envoy's RateLimitService
	EdgeRLQS   Edge = "rlqs"   // Envoy's Rate Limit Quota Service
)

// Observer sees every item the engine decides, and every call the hard cap refuses
// (metrics). It runs on the request path, so it must be quick and must not block.
type Observer interface {
	Decided(a *Account, q *Query, it *Item, r *ItemResult)
	// HardCapRefused sees one call of edge refused because a's month usage reached its
	// plan's hard cap (spec §12.2).
	HardCapRefused(a *Account, edge Edge)
}

// Query is one decision: the items of one namespace.
type Query struct {
	Edge      Edge
	Namespace string
	Items     []Item
	// StrictCost makes a cost above a limit an invalid_request error (POST /v1/limit,
	// spec §4.3); without it such an item is denied and spends nothing (Envoy, spec §9.6).
	StrictCost bool
	// Shadow answers a denied query as allowed (Envoy's global shadow mode, spec §9.7):
	// its items keep their verdicts, and their denials are not counted as blocked.
	Shadow bool
}

// Source says where an item's limits come from.
type Source uint8

// The sources of an item's limits.
const (
	// Given: Item.Limits are the limits. A limit of 0 denies every request without a
	// counter (spec §9.5).
	Given Source = iota
	// FromRule: Item.Inline, with the namespace's rate rule supplying what it leaves out
	// (spec §4.2); a limit or window still missing is missing_limit.
	FromRule
	// RuleIfAny: the namespace's rate rule; with none the item has no limit (spec §9.5).
	RuleIfAny
	// NoLimit: allowed and counted, with no counter (spec §9.5: unlimited, replaced, or a
	// descriptor without entries).
	NoLimit
)

// Limit is one rate limit: an algorithm, a limit and a window.
type Limit struct {
	Algorithm Algorithm
	Limit     int64
	WindowMS  int64
}

// Inline is what a request sent of its limit; nil fields (and AlgorithmUnknown) are absent.
type Inline struct {
	Algorithm Algorithm // AlgorithmUnrecognized for a name that is not an algorithm
	Limit     *int64
	WindowMS  *int64
}

// DefaultCost is the cost of a check that sends none (spec §4.3).
const DefaultCost = 1

// CheckItem is the item of a POST /v1/limit check: its limit from the request's own
// fields, the namespace's rule filling the rest (spec §4.2); a nil cost is DefaultCost.
func CheckItem(key string, in Inline, cost *int64) Item {
	it := Item{Key: key, Cost: DefaultCost, Source: FromRule, Inline: in}
	if cost != nil {
		it.Cost = *cost
	}
	return it
}

// Item is one key of a query, the units it spends and where its limits come from.
type Item struct {
	Key    string
	Cost   int64 // 0 looks without spending
	Source Source
	// Limits (Source Given) are 1 to MaxSpendAll limits with distinct (algorithm, window),
	// decided in one atomic step: all spend or none (spec §9.3).
	Limits []Limit
	// Inline (Source FromRule) is the request's own part of the limit.
	Inline Inline
	// Shadow answers a denial as allowed and counts it as a shadow denial, not as
	// blocked (spec §9.5).
	Shadow bool
	// Quota puts the item in quota mode (spec §9.7): its denial makes the query denied
	// only when every quota item of the query is denied.
	Quota bool
	// Overdraft counts the cost even when a limit denies it (spec §4.12), as
	// envoyproxy/ratelimit counts the hits of an over-limit request: a charge made after
	// the fact exhausts the budget. The verdict is unchanged; the cost may exceed the
	// limit (a larger one than MaxOverdraftCost is spent as MaxOverdraftCost).
	Overdraft bool
	// Tag is the edge's own mark for the item (e.g. the descriptor rule's metrics); the
	// engine only hands it to the Observer.
	Tag any
	// Report makes the item a report of requests a proxy has already decided (RLQS, spec
	// §14.3): Cost (its allowed requests) is spent as far as it fits — when all of it
	// does not, what remains of the most restrictive limit is spent instead, so the
	// counter ends full — and usage counts the report's requests, not one decision.
	Report *Report
}

// Report is what a proxy reported for one bucket: requests it allowed and denied.
type Report struct {
	Allowed, Denied int64
}

// ItemResult is the verdict on one item.
type ItemResult struct {
	// Allowed is false when a limit denied the item and it is not Shadow.
	Allowed bool
	// Limited reports that a limit applied; when false the item had none and the fields
	// below are zero.
	Limited bool
	// ShadowDenied reports a Shadow item that a limit denied (Allowed is still true).
	ShadowDenied bool
	// Limit is the item's most restrictive limit (a denying one, else the fewest
	// remaining, else the longest reset), resolved; Index is its position in Item.Limits,
	// -1 when it came from the namespace's rule.
	Limit Limit
	Index int
	// Remaining and ResetMS are that limit's (spec §4.9). A cost that can never fit a
	// limit (Envoy) reports the counter as it stands.
	Remaining int64
	ResetMS   int64
	// Cached reports a denial answered from the over-limit cache, with no store
	// operation (spec §9.13).
	Cached bool
}

// Outcome is a query's overall verdict.
type Outcome struct {
	// Allowed reports that no item is denied, except quota items when another quota item
	// is allowed (spec §9.7), or that the query is Shadow.
	Allowed bool
	// ShadowDenied reports a Shadow query that would have been denied.
	ShadowDenied bool
	// NowMS is the store's clock at the decision, in Unix milliseconds.
	NowMS int64
}
