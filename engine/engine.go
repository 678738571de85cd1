package engine

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leashd/leash/engine/hotpath/overlimit"
)

// ResetRequest clears one counter (POST /v1/limit/reset), resolved like a check.
type ResetRequest struct {
	Namespace string
	Key       string
	Algorithm Algorithm // AlgorithmUnknown when absent
	WindowMS  *int64
}

// AcquireRequest asks for a lease (POST /v1/leases).
type AcquireRequest struct {
	Namespace string
	Key       string
	Limit     *int64
	WindowMS  *int64
}

// RuleRequest is the body of POST /v1/namespaces/{ns}/rules. A limit or window beyond
// int64 is passed as math.MaxInt64 (out of range: invalid_rule).
type RuleRequest struct {
	Algorithm *string
	Limit     *int64
	WindowMS  *int64
	Name      *string
	// Overrides are the rule's per-key overrides (spec §6.7), in the order sent; none
	// (nil or empty) clears them, as the rule is replaced whole.
	Overrides []OverrideRequest
}

// OverrideRequest is one entry of a rule's overrides as sent; nil fields are absent. A
// limit or window beyond int64 is passed as math.MaxInt64, as in RuleRequest.
type OverrideRequest struct {
	Key      *string
	Limit    *int64
	WindowMS *int64
}

// NamespaceRule is a rule together with the namespace it belongs to.
type NamespaceRule struct {
	Namespace string
	Rule
}

// DayStats is one day of a namespace's usage.
type DayStats struct {
	Day Day
	UsageCount
}

// MonthStats is an account's usage this month against its plan.
type MonthStats struct {
	Month     Month
	Total     int64
	Quota     int64
	OverQuota bool
	HardCap   *int64
}

// Stats is GET /v1/namespaces/{ns}/stats.
type Stats struct {
	Namespace string
	Total     int64
	Blocked   int64
	Days      []DayStats
	Month     MonthStats
}

// StatsDays is how many UTC days Stats reports.
const StatsDays = 30

// Options configures an Engine.
type Options struct {
	// FlushInterval is how often usage is written to the store; default 1s.
	FlushInterval time.Duration
	// Logger receives flush failures; default slog.Default().
	Logger *slog.Logger
	// Webhooks configures webhook URL screening and event hand-off.
	Webhooks WebhookOptions
	// LocalCacheMaxEntries bounds the over-limit cache (spec §9.13); 0 turns it off.
	LocalCacheMaxEntries int
	// Observer, if set, sees every decided item and every hard-cap refusal (metrics,
	// spec §12.2).
	Observer Observer
	// Accounts, if set, keeps the accounts and keys made through the admin API (spec
	// §15.2); the engine serves them with the directory's. Call LoadAccounts before serving
	// and run WatchAccounts.
	Accounts AccountStore
	// OnAdminChange, if set, sees every change made through the admin and key routes
	// (metrics, spec §15.8).
	OnAdminChange func(AdminAction)
	// Audit, if set, keeps the audit log of changes (spec §15.10); nil records nothing.
	Audit AuditStore
}

// Engine decides checks and leases for accounts over the roles of one store.
type Engine struct {
	store         Roles
	directory     atomic.Pointer[Directory]
	tally         *usageTally // usage counted here, not yet in the store
	flushInterval time.Duration
	log           *slog.Logger
	webhooks      WebhookOptions
	audit         AuditLog
	observer      Observer
	cache         *overlimit.Cache[Counter] // the hot path's denials (spec §9.13); nil when off
	clock         storeClock                // the store's clock between operations, for cached answers
	accounts      AccountStore              // nil: configured accounts only
	acct          accountState              // the accounts last loaded from it
	onAdmin       func(AdminAction)         // OnAdminChange
}

// New returns an engine over the store roles serving the accounts of dir; every role is
// required (RolesOf gives them all from one Store).
func New(store Roles, dir *Directory, opts Options) *Engine {
	if store.Decider == nil || store.Rules == nil || store.Usage == nil || store.Webhooks == nil || store.Health == nil {
		panic("engine: New needs every store role")
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := &Engine{store: store, tally: newUsageTally(), flushInterval: opts.FlushInterval, log: opts.Logger, webhooks: opts.Webhooks,
		cache: overlimit.New[Counter](opts.LocalCacheMaxEntries), clock: storeClock{start: time.Now()}, observer: opts.Observer,
		accounts: opts.Accounts, onAdmin: opts.OnAdminChange}
	e.directory.Store(dir)
	e.audit = AuditLog{store: opts.Audit, log: opts.Logger}
	return e
}

// SetDirectory replaces the configured accounts the engine serves (config reload); the
// accounts of the AccountStore are served with them (see CheckDirectory).
func (e *Engine) SetDirectory(d *Directory) { e.setConfigDirectory(d) }

// Authenticate returns the account that owns apiKey.
func (e *Engine) Authenticate(apiKey string) (*Account, bool) {
	return e.directory.Load().Lookup(apiKey)
}

// Account returns the account with the given id from the current directory.
func (e *Engine) Account(id string) (*Account, bool) { return e.directory.Load().Account(id) }

// Directory returns the accounts the engine serves now.
func (e *Engine) Directory() *Directory { return e.directory.Load() }

// Ping reports whether the store answers.
func (e *Engine) Ping(ctx context.Context) error { return e.store.Health.Ping(ctx) }

// Reset clears one counter; a counter with no unexpired state is key_not_found.
func (e *Engine) Reset(ctx context.Context, a *Account, r *ResetRequest) error {
	if err := Active(a); err != nil {
		return err
	}
	if err := checkTarget(r.Namespace, r.Key); err != nil {
		return err
	}
	if err := checkInline("window_ms", r.WindowMS, MaxWindowMS); err != nil {
		return err
	}
	rules := ruleLookup{e: e, a: a, ns: r.Namespace}
	l, err := resolveRate(ctx, a, r.Key, Inline{Algorithm: r.Algorithm, WindowMS: r.WindowMS}, false, &rules)
	if err != nil {
		return err
	}
	c := Counter{Account: a.ID, Namespace: r.Namespace, Key: r.Key, Algorithm: l.Algorithm, WindowMS: l.WindowMS}
	if e.cache != nil {
		e.cache.Forget(c) // before the store: a denial cached meanwhile would outlive the reset
	}
	existed, err := e.store.Decider.Reset(ctx, c)
	if e.cache != nil {
		e.cache.Forget(c) // and after: a denial decided before the reset may land meanwhile
	}
	if err != nil {
		return unavailable(err)
	}
	if !existed {
		return newError(CodeKeyNotFound, "no counter state for this key")
	}
	e.audit.record(ctx, Actor{Account: a.ID}, AuditEntry{Action: AuditCounterReset, Account: a.ID, AccountCreatedMS: a.CreatedMS, Target: r.Namespace,
		Details: map[string]string{"key": r.Key, "algorithm": l.Algorithm.String()}})
	return nil
}

// hardCap refuses work once the account's month usage reached its plan's hard cap, and
// tells the Observer of each refusal at edge.
func (e *Engine) hardCap(a *Account, edge Edge) error {
	if a.Plan.HardCap == nil {
		return nil
	}
	total, nowMS := e.tally.monthTotal(a.ID)
	if total < *a.Plan.HardCap {
		return nil
	}
	if e.observer != nil {
		e.observer.HardCapRefused(a, edge)
	}
	end := MonthOf(time.UnixMilli(nowMS)).End().UnixMilli()
	return &Error{
		Code:          CodeHardCapExceeded,
		Message:       "monthly hard cap reached; requests are refused until the month ends (UTC)",
		RetryAfterSec: max(1, (end-nowMS+999)/1000),
	}
}

// LeasesAllowed reports concurrent_not_on_plan for plans without leases; the HTTP edge
// calls it before reading the body (spec §3.7).
func LeasesAllowed(a *Account) error {
	if !a.Plan.ConcurrentLimit {
		return newError(CodeConcurrentNotOnPlan, "concurrency leases are not available on plan "+a.Plan.Name)
	}
	return nil
}

// Acquire takes a lease if fewer than limit are held (spec §5.2).
func (e *Engine) Acquire(ctx context.Context, a *Account, r *AcquireRequest) (LeaseDecision, error) {
	if err := Active(a); err != nil {
		return LeaseDecision{}, err
	}
	if err := LeasesAllowed(a); err != nil {
		return LeaseDecision{}, err
	}
	if err := checkTarget(r.Namespace, r.Key); err != nil {
		return LeaseDecision{}, err
	}
	if err := checkInline("limit", r.Limit, MaxLimit); err != nil {
		return LeaseDecision{}, err
	}
	if err := checkInline("window_ms", r.WindowMS, MaxWindowMS); err != nil {
		return LeaseDecision{}, err
	}
	var limit, ttl int64
	if r.Limit != nil {
		limit = *r.Limit
	}
	if r.WindowMS != nil {
		ttl = *r.WindowMS
	}
	if r.Limit == nil || r.WindowMS == nil {
		rules, err := e.store.Rules.Rules(ctx, a.ID, r.Namespace)
		if err != nil {
			return LeaseDecision{}, unavailable(err)
		}
		if rule := rules.Concurrent; rule != nil {
			ruleLimit, ruleTTL := rule.For(r.Key)
			if r.Limit == nil {
				limit = ruleLimit
			}
			if r.WindowMS == nil {
				ttl = ruleTTL
			}
		}
	}
	if limit == 0 || ttl == 0 {
		return LeaseDecision{}, newError(CodeMissingLimit, "limit and window_ms are required: send them or set a concurrent_limit rule on the namespace")
	}
	if err := e.hardCap(a, EdgeLeases); err != nil {
		return LeaseDecision{}, err
	}
	token := newLeaseToken()
	d, err := e.store.Decider.Acquire(ctx, LeaseSet{Account: a.ID, Namespace: r.Namespace, Key: r.Key}, token, limit, ttl)
	if err != nil {
		return LeaseDecision{}, unavailable(err)
	}
	if d.Allowed {
		d.LeaseID = FormatLeaseID(r.Namespace, r.Key, token)
	}
	e.tally.record(a, r.Namespace, d.NowMS, !d.Allowed)
	return d, nil
}

func parseLease(a *Account, id string) (LeaseSet, string, error) {
	ns, key, token, ok := ParseLeaseID(id)
	if !ok {
		return LeaseSet{}, "", newError(CodeInvalidLeaseID, "lease id is not one Leash issued")
	}
	return LeaseSet{Account: a.ID, Namespace: ns, Key: key}, token, nil
}

// Release frees a lease; it is idempotent and never touches another account's leases.
func (e *Engine) Release(ctx context.Context, a *Account, leaseID string) (ReleaseResult, error) {
	set, token, err := parseLease(a, leaseID)
	if err != nil {
		return ReleaseResult{}, err
	}
	res, err := e.store.Decider.Release(ctx, set, token)
	if err != nil {
		return ReleaseResult{}, unavailable(err)
	}
	return res, nil
}

// Renew extends a held lease to now + window (default: its original time-to-live).
func (e *Engine) Renew(ctx context.Context, a *Account, leaseID string, windowMS *int64) (RenewResult, error) {
	if err := Active(a); err != nil {
		return RenewResult{}, err
	}
	set, token, err := parseLease(a, leaseID)
	if err != nil {
		return RenewResult{}, err
	}
	if err := checkInline("window_ms", windowMS, MaxWindowMS); err != nil {
		return RenewResult{}, err
	}
	var ttl int64
	if windowMS != nil {
		ttl = *windowMS
	}
	res, err := e.store.Decider.Renew(ctx, set, token, ttl)
	if err != nil {
		return RenewResult{}, unavailable(err)
	}
	return res, nil
}

// PutRule creates or replaces the namespace's rule of the algorithm's kind (spec §6.2).
func (e *Engine) PutRule(ctx context.Context, a *Account, ns string, r *RuleRequest) (NamespaceRule, bool, error) {
	if err := Active(a); err != nil {
		return NamespaceRule{}, false, err
	}
	if err := CheckNamespace(ns); err != nil {
		return NamespaceRule{}, false, err
	}
	if r.Algorithm == nil {
		return NamespaceRule{}, false, Invalid("algorithm is required")
	}
	if r.Limit == nil {
		return NamespaceRule{}, false, Invalid("limit is required")
	}
	if r.WindowMS == nil {
		return NamespaceRule{}, false, Invalid("window_ms is required")
	}
	if *r.Limit < 0 {
		return NamespaceRule{}, false, Invalid(RangeMessage("limit", 1, MaxLimit))
	}
	if *r.WindowMS < 0 {
		return NamespaceRule{}, false, Invalid(RangeMessage("window_ms", 1, MaxWindowMS))
	}
	if r.Name != nil && len(*r.Name) > MaxRuleName {
		return NamespaceRule{}, false, Invalid("name must be at most 256 bytes")
	}
	if r.Name != nil && HasBidiControl(*r.Name) {
		return NamespaceRule{}, false, Invalid(msgBidi)
	}
	if err := checkOverrideFields(r.Overrides); err != nil {
		return NamespaceRule{}, false, err
	}
	if *r.Limit < 1 || *r.Limit > MaxLimit {
		return NamespaceRule{}, false, newError(CodeInvalidRule, RangeMessage("limit", 1, MaxLimit))
	}
	if *r.WindowMS < 1 || *r.WindowMS > MaxWindowMS {
		return NamespaceRule{}, false, newError(CodeInvalidRule, RangeMessage("window_ms", 1, MaxWindowMS))
	}
	overrides, err := checkOverrideRanges(r.Overrides)
	if err != nil {
		return NamespaceRule{}, false, err
	}
	alg, ok := ParseAlgorithm(*r.Algorithm)
	if !ok {
		return NamespaceRule{}, false, newError(CodeUnknownAlgorithm, "algorithm must be one of fixed_window, sliding_window, token_bucket, concurrent_limit")
	}
	if !a.Plan.AllowsAlgorithm(alg) {
		return NamespaceRule{}, false, newError(CodeAlgorithmNotOnPlan, "algorithm "+alg.String()+" is not available on plan "+a.Plan.Name)
	}
	rule := Rule{Algorithm: alg, Limit: *r.Limit, WindowMS: *r.WindowMS, Name: r.Name, Overrides: overrides}
	created, err := e.store.Rules.PutRule(ctx, a.ID, ns, rule)
	if err != nil {
		return NamespaceRule{}, false, unavailable(err)
	}
	details := map[string]string{"algorithm": alg.String(), "limit": strconv.FormatInt(rule.Limit, 10),
		"window_ms": strconv.FormatInt(rule.WindowMS, 10), "overrides": strconv.Itoa(overrides.Len())}
	if rule.Name != nil {
		details["name"] = *rule.Name
	}
	e.audit.record(ctx, Actor{Account: a.ID}, AuditEntry{Action: AuditRuleSet, Account: a.ID, AccountCreatedMS: a.CreatedMS, Target: ns + "/" + alg.Kind().String(), Details: details})
	return NamespaceRule{Namespace: ns, Rule: rule}, created, nil
}

// Rules lists the namespace's rules: the rate rule first, then the concurrent rule.
func (e *Engine) Rules(ctx context.Context, a *Account, ns string) ([]Rule, error) {
	if err := CheckNamespace(ns); err != nil {
		return nil, err
	}
	rules, err := e.store.Rules.Rules(ctx, a.ID, ns)
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]Rule, 0, 2)
	for _, r := range []*Rule{rules.Rate, rules.Concurrent} {
		if r != nil {
			out = append(out, *r)
		}
	}
	return out, nil
}

// DeleteRule removes the namespace's rule of one kind; deleting none is not an error.
func (e *Engine) DeleteRule(ctx context.Context, a *Account, ns string, kind RuleKind) (bool, error) {
	if err := Active(a); err != nil {
		return false, err
	}
	if err := CheckNamespace(ns); err != nil {
		return false, err
	}
	deleted, err := e.store.Rules.DeleteRule(ctx, a.ID, ns, kind)
	if err != nil {
		return false, unavailable(err)
	}
	if deleted {
		e.audit.record(ctx, Actor{Account: a.ID}, AuditEntry{Action: AuditRuleDeleted, Account: a.ID, AccountCreatedMS: a.CreatedMS, Target: ns + "/" + kind.String()})
	}
	return deleted, nil
}

// Stats reports a namespace's last 30 UTC days and its account's month (spec §7.2).
func (e *Engine) Stats(ctx context.Context, a *Account, ns string) (Stats, error) {
	if err := CheckNamespace(ns); err != nil {
		return Stats{}, err
	}
	nowMS, err := e.store.Decider.NowMS(ctx)
	if err != nil {
		return Stats{}, unavailable(err)
	}
	today := DayOf(nowMS)
	q := UsageQuery{Account: a.ID, Namespace: ns, FirstDay: today - StatsDays + 1, LastDay: today, Month: today.Month()}
	rep, err := e.store.Usage.ReadUsage(ctx, q)
	if err != nil {
		return Stats{}, unavailable(err)
	}
	if len(rep.Days) != StatsDays {
		return Stats{}, errors.New("engine: store returned a usage report of the wrong length")
	}
	st := Stats{Namespace: ns, Days: make([]DayStats, StatsDays)}
	for i, c := range rep.Days {
		st.Days[i] = DayStats{Day: q.FirstDay + Day(i), UsageCount: c}
		st.Total += c.Total
		st.Blocked += c.Blocked
	}
	st.Month = MonthStats{
		Month:     q.Month,
		Total:     rep.MonthTotal,
		Quota:     a.Plan.MonthlyQuota,
		OverQuota: rep.MonthTotal > a.Plan.MonthlyQuota,
		HardCap:   a.Plan.HardCap,
	}
	return st, nil
}

// LocalCacheHits is the number of denials answered from the over-limit cache.
func (e *Engine) LocalCacheHits() int64 {
	if e.cache == nil {
		return 0
	}
	return e.cache.Hits()
}
