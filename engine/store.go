package engine

import "context"

// Store holds Leash's state: a backend implements every role below. Every method is one
// atomic operation (on Redis, one Lua script or one pipeline), decides with the store's
// own clock, and returns an error only when the store cannot answer; the engine turns
// those into "unavailable". The conformance suite (testkit/storetest) holds every backend
// to the same behaviour.
type Store interface {
	Decider
	RuleStore
	UsageStore
	WebhookStore
	DemandStore
	Pinger
	// Close stops the store's background work and releases its resources.
	Close() error
}

// Roles are the store roles an Engine uses; RolesOf takes them all from one Store, and a
// decorator (metrics) may wrap each on its own.
type Roles struct {
	Decider  Decider
	Rules    RuleStore
	Usage    UsageStore
	Webhooks WebhookStore
	Health   Pinger
}

// RolesOf returns the roles of s that an Engine uses.
func RolesOf(s Store) Roles {
	return Roles{Decider: s, Rules: s, Usage: s, Webhooks: s, Health: s}
}

// Pinger is the health role: whether the store answers at all.
type Pinger interface {
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}

// Decider is the decision role: rate counters and leases, decided with the store's clock.
type Decider interface {
	// Spend spends s.Cost units of s.Counter if they fit under s.Limit, by the counter's
	// algorithm (spec §4.6–§4.9). A denied spend changes nothing.
	Spend(ctx context.Context, s Spend) (Decision, error)
	// SpendAll decides 1 to MaxSpendAll spends of one account, namespace and key (distinct
	// algorithm or window) in one atomic step: out[i] is spends[i]'s own verdict, and the
	// costs are spent only if every one is allowed, else nothing changes (spec §9.3).
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
	// NowMS returns the store's clock in Unix milliseconds.
	NowMS(ctx context.Context) (int64, error)
	// HeldLeases returns the unexpired leases of set (spec §15.5); it changes nothing.
	HeldLeases(ctx context.Context, set LeaseSet) (HeldLeases, error)
}

// RuleStore keeps each namespace's rules.
type RuleStore interface {
	// Rules returns a namespace's rules.
	Rules(ctx context.Context, account, namespace string) (Rules, error)
	// PutRule stores r in the slot of its kind; created is false when it replaced one.
	PutRule(ctx context.Context, account, namespace string, r Rule) (created bool, err error)
	// DeleteRule removes the rule of one kind; deleted reports whether one existed.
	DeleteRule(ctx context.Context, account, namespace string, kind RuleKind) (deleted bool, err error)
	// RuleNamespaces returns the account's namespaces that have a rule, by namespace
	// (bytewise), with how many rules each has.
	RuleNamespaces(ctx context.Context, account string) ([]NamespaceRules, error)
}

// UsageStore keeps usage counts per namespace and day.
type UsageStore interface {
	// AddUsage applies a batch of usage increments once; a batch whose ID was already
	// applied is ignored, so a retried batch is never counted twice.
	AddUsage(ctx context.Context, b UsageBatch) error
	// ReadUsage returns a namespace's daily usage and its account's month total.
	ReadUsage(ctx context.Context, q UsageQuery) (UsageReport, error)
	// MonthTotals returns each account's usage total in month, in the order given.
	MonthTotals(ctx context.Context, month Month, accounts []string) ([]int64, error)
	// ReadAccountUsage returns every namespace's daily usage of an account, and its month
	// total (spec §15.5).
	ReadAccountUsage(ctx context.Context, q AccountUsageQuery) (AccountUsageReport, error)
}

// WebhookStore keeps each account's webhook and the outbox of events to deliver.
type WebhookStore interface {
	// Webhooks and the outbox (spec §8.1, §8.5). These methods reject out-of-range arguments
	// (an empty account, URL or event id, see ValidateWebhook, OutboxEvent.Validate and
	// ValidateOutboxDelay; a Claim max below 1) with an error wrapping ErrInvalidArgument,
	// changing nothing.

	// Webhook returns the account's webhook; ok is false when none is set.
	Webhook(ctx context.Context, account string) (w Webhook, ok bool, err error)
	// PutWebhook sets the account's webhook, replacing any.
	PutWebhook(ctx context.Context, account string, w Webhook) error
	// DeleteWebhook removes the account's webhook; deleted reports whether one was set.
	DeleteWebhook(ctx context.Context, account string) (deleted bool, err error)

	// Enqueue adds ev to the outbox, due at once, with Attempts 0. With a non-empty
	// onceKey the event is added only the first time that key is used (keys are kept
	// OnceKeyTTL): added is false, and nothing is added, after that. An event whose ID is
	// already in the outbox is not added again either (added false; its once-key, if any,
	// is not used up).
	Enqueue(ctx context.Context, ev OutboxEvent, onceKey string) (added bool, err error)
	// Claim returns up to max due events, oldest due first (ties by ID, bytewise), and
	// hides each from other claims for visibilityMS; one neither acked nor retried by then
	// is due again. An event is due when its due instant is at or before the store's now.
	Claim(ctx context.Context, max int, visibilityMS int64) ([]OutboxEvent, error)
	// Ack removes an event from the outbox (delivered, or given up); an unknown id is no error.
	Ack(ctx context.Context, id string) error
	// Retry counts a failed delivery (Attempts+1) and makes the event due after delayMS;
	// an unknown id (already acked) is no error and changes nothing.
	Retry(ctx context.Context, id string, delayMS int64) error
	// OutboxLen is the number of events in the outbox, due or not.
	OutboxLen(ctx context.Context) (int64, error)
}

// DemandStore keeps what every RLQS stream, on every instance, recently demanded of each
// bucket, so each instance divides a limit knowing all of them (spec §14.4). An entry
// lives the time-to-live it was reported with, by the store's clock. Its methods reject
// out-of-range arguments (see DemandReport.Validate) with an error wrapping
// ErrInvalidArgument, changing nothing.
type DemandStore interface {
	// ReportDemand sets the stream's entry of the bucket to d (expiring ttlMS from now),
	// drops expired entries, and returns every entry of the bucket, sorted by stream. A
	// bucket holds at most MaxDemandStreams entries: a new stream beyond them is not
	// recorded (and is not in the list returned).
	ReportDemand(ctx context.Context, d DemandReport) ([]StreamDemand, error)
	// DropDemand removes the stream's entry of the bucket; a missing one is no error.
	DropDemand(ctx context.Context, b DemandBucket, stream string) error
}
