package engine

import "context"

// Store holds Leash's state. Every method is one atomic operation (on Redis, one Lua
// script or one pipeline), decides with the store's own clock, and returns an error only
// when the store cannot answer; the engine turns those into "unavailable".
type Store interface {
	// Spend spends s.Cost units of s.Counter if they fit under s.Limit, by the counter's
	// algorithm (CONTRACT §4). A denied spend changes nothing.
	Spend(ctx context.Context, s Spend) (Decision, error)
	// SpendAll decides 1 to MaxSpendAll spends of one account, namespace and key (distinct
	// algorithm or window) in one atomic step: out[i] is spends[i]'s own verdict, and the
	// costs are spent only if every one is allowed, else nothing changes (CONTRACT §12.11).
	SpendAll(ctx context.Context, spends []Spend, out []Decision) error
	// Reset clears a counter; existed reports whether it held unexpired state.
	Reset(ctx context.Context, c Counter) (existed bool, err error)

	// Acquire adds the lease token to set when fewer than limit unexpired leases are held;
	// the lease lives ttlMS. LeaseID of the result is left empty.
	Acquire(ctx context.Context, set LeaseSet, token string, limit, ttlMS int64) (LeaseDecision, error)
	// Release removes the lease token from set if it is held.
	Release(ctx context.Context, set LeaseSet, token string) (ReleaseResult, error)
	// Renew sets a held lease's expiry to now + ttlMS; ttlMS 0 means the lease's original
	// time-to-live.
	Renew(ctx context.Context, set LeaseSet, token string, ttlMS int64) (RenewResult, error)

	// Rules returns a namespace's rules.
	Rules(ctx context.Context, account, namespace string) (Rules, error)
	// PutRule stores r in the slot of its kind; created is false when it replaced one.
	PutRule(ctx context.Context, account, namespace string, r Rule) (created bool, err error)
	// DeleteRule removes the rule of one kind; deleted reports whether one existed.
	DeleteRule(ctx context.Context, account, namespace string, kind RuleKind) (deleted bool, err error)

	// AddUsage applies a batch of usage increments once; a batch whose ID was already
	// applied is ignored, so a retried batch is never counted twice.
	AddUsage(ctx context.Context, b UsageBatch) error
	// ReadUsage returns a namespace's daily usage and its account's month total.
	ReadUsage(ctx context.Context, q UsageQuery) (UsageReport, error)
	// MonthTotals returns each account's usage total in month, in the order given.
	MonthTotals(ctx context.Context, month Month, accounts []string) ([]int64, error)

	// NowMS returns the store's clock in Unix milliseconds.
	NowMS(ctx context.Context) (int64, error)
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
	// Close stops the store's background work and releases its resources.
	Close() error
}
