// Package engine is Leash's domain: every rule of docs/spec.md that is not about a wire
// format lives here or in the capabilities below it, and state is reached only through
// the roles of a Store (Roles).
//
// This package is the vocabulary every capability and every store shares; each capability
// is its own package under engine/, owns the narrow port it needs of a store, and is built
// over the roles of one store by package wiring:
//
//	engine/limits    Limiter: the one decision path, resets, the over-limit cache (spec §4, §9)
//	engine/leases    Leases: acquire, release, renew, list (spec §5, §15.5)
//	engine/rules     Rules: rules and per-key overrides, their checks (spec §6)
//	engine/usage     Meter: usage counting and flushes, month totals, the hard cap, the
//	                 usage reads (spec §7, §15.5)
//	engine/webhooks  Webhooks: configuration, URL screening hand-off, usage events (spec §8)
//	engine/accounts  Accounts: the directory authentication reads, reloaded from the store;
//	                 Admin: the admin and key routes' changes (spec §2, §15)
//	engine/audit     Log: the audit log (spec §15.10)
//	engine/wiring    Engine: the capabilities over one store's roles, side by side
//
// One decision, from any edge to the store (spec §1.4):
//
//	POST /v1/limit     httpapi (*API).check ─┐
//	ShouldRateLimit    adapter (*Service).ShouldRateLimit ─┼─> (*limits.Limiter).Decide
//	RLQS report        rlqs (*Service).usage (Item.Report) ─┘
//	  Decide: item checks → resolve (rule, plan gate, cost) → Meter.HardCap → spend → Meter.Record
//	  spend:  Port.Spend / Port.SpendAll ─> memstore (algo in Go) or redisstore (lua/spend.lua)
//
// Where each rule of this package lives:
//
//	query.go         the decision's values: Query, Item, ItemResult, Outcome, Observer, the
//	                 sources of an item's limits (spec §4, §9.5)
//	plans.go         plans, accounts, operators and the Directory; the plan gates and
//	                 account_suspended (spec §2, §3.7, §15.6)
//	accountstore.go  the AccountStore role and its records; key names (spec §15.2, §15.3)
//	audit.go         audit entries and ids, the AuditStore role, a request's Origin (spec §15.10)
//	overrides.go     a rule's per-key overrides and how a rule applies to a key (spec §6.7)
//	validate.go      names, keys and the bounds of limits and windows (spec §3.4, §6.3)
//	leaseid.go       lease ids (spec §5.3)
//	errors.go        the error codes the engine produces (spec §3.6)
//	authguard.go     failed-authentication slowing per client address (spec §15.7)
//	store.go         the Store and its roles: Decider, RuleStore, UsageStore, WebhookStore,
//	                 DemandStore (RLQS demand, spec §14.4), Pinger; Roles, those wiring uses
//	types.go         the values those roles exchange, and their argument checks
//	accountviews.go  the values of the account-wide reads (spec §15.5)
//
// The algorithms' arithmetic is package algo; the stores are store/memstore and
// store/redisstore, held to the same behaviour by the conformance suite in
// testkit/storetest.
package engine
