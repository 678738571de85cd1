// Package engine is Leash's domain: every rule of docs/spec.md that is not about a wire
// format lives here, and state is reached only through the roles of a Store (Roles).
//
// One decision, from any edge to the store (spec §1.4):
//
//	POST /v1/limit     httpapi (*API).check ─┐
//	ShouldRateLimit    adapter (*Service).ShouldRateLimit ─┼─> (*Engine).Decide
//	RLQS report        rlqs (*Service).usage (Item.Report) ─┘
//	  Decide: item checks → resolve (rule, plan gate, cost) → hardCap → spend → usage.record
//	  spend:  Store.Spend / Store.SpendAll ─> memstore (algo in Go) or redisstore (lua/spend.lua)
//
// Where each rule lives:
//
//	decide.go    the one decision path: Query, Item, Decide; rule fallback, shadow, zero and
//	             absent limits, the cost rules, the most restrictive limit (spec §4, §9.5)
//	engine.go    resets, leases, rules, stats (spec §4.11, §5, §6, §7.2)
//	usage.go     usage counting off the request path, flushes, month totals, the hard cap (spec §7)
//	webhooks.go  webhook configuration, URL screening hand-off, usage events (spec §8)
//	plans.go     plans, accounts and API keys (spec §2)
//	validate.go  names, keys and the bounds of limits and windows (spec §3.4, §6.3)
//	leaseid.go   lease ids (spec §5.3)
//	errors.go    the error codes the engine produces (spec §3.6)
//	store.go     the Store and its roles: Decider, RuleStore, UsageStore, WebhookStore,
//	             DemandStore (RLQS demand, spec §14.4), Pinger; Roles, those the Engine uses
//	types.go     the values those roles exchange, and their argument checks
//
// The algorithms' arithmetic is package algo; the stores are memstore and redisstore, held
// to the same behaviour by the conformance suite in storetest.
package engine
