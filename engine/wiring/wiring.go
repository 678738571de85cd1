// Package wiring builds the engine's capabilities over the roles of one store and hands
// them to the edges. It decides nothing: each capability owns its rules and the narrow
// port it needs of a store, and Engine only holds them side by side.
package wiring

import (
	"context"
	"log/slog"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/accounts"
	"github.com/leashd/leash/engine/audit"
	"github.com/leashd/leash/engine/leases"
	"github.com/leashd/leash/engine/limits"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/engine/usage"
	"github.com/leashd/leash/engine/webhooks"
)

// Options configures an Engine.
type Options struct {
	// FlushInterval is how often usage is written to the store; default 1s.
	FlushInterval time.Duration
	// Logger receives flush failures, account changes and audit failures; default
	// slog.Default().
	Logger *slog.Logger
	// Webhooks configures webhook URL screening and event hand-off.
	Webhooks webhooks.Options
	// LocalCacheMaxEntries bounds the over-limit cache (spec §9.13); 0 turns it off.
	LocalCacheMaxEntries int
	// Observer, if set, sees every decided item and every hard-cap refusal (metrics,
	// spec §12.2).
	Observer engine.Observer
	// Accounts, if set, keeps the accounts and keys made through the admin API (spec
	// §15.2); they are served with the directory's. Call Accounts.LoadAccounts before
	// serving and run Accounts.WatchAccounts.
	Accounts engine.AccountStore
	// OnAdminChange, if set, sees every change made through the admin and key routes
	// (metrics, spec §15.8).
	OnAdminChange func(accounts.AdminAction)
	// Audit, if set, keeps the audit log of changes (spec §15.10); nil records nothing.
	Audit engine.AuditStore
}

// Engine is the engine's capabilities over one store, side by side.
type Engine struct {
	// Limits decides checks and resets counters (spec §4, §9).
	Limits *limits.Limiter
	// Leases takes, frees, renews and lists concurrency leases (spec §5).
	Leases *leases.Leases
	// Rules keeps namespaces' rules and overrides (spec §6).
	Rules *rules.Rules
	// Usage counts usage, flushes it, enforces the hard cap and reads it back (spec §7).
	Usage *usage.Meter
	// Webhooks configures webhooks and queues their events (spec §8).
	Webhooks *webhooks.Webhooks
	// Accounts serves the directory authentication reads (spec §2, §15.2).
	Accounts *accounts.Accounts
	// Admin makes the changes of the admin and key routes (spec §15).
	Admin *accounts.Admin
	// Audit records changes and pages them back (spec §15.10).
	Audit *audit.Log

	health engine.Pinger
}

// Ports joining store roles: a capability's port may take methods of two roles.
type (
	decisionPort struct {
		engine.Decider
		engine.RuleStore
	}
	usagePort struct {
		engine.UsageStore
		engine.Decider
		engine.RuleStore
	}
	webhookPort struct {
		engine.WebhookStore
		engine.Decider
	}
)

// New returns the capabilities over the store roles serving the accounts of dir; every
// role is required (engine.RolesOf gives them all from one Store).
func New(store engine.Roles, dir *engine.Directory, o Options) *Engine {
	if store.Decider == nil || store.Rules == nil || store.Usage == nil || store.Webhooks == nil || store.Health == nil {
		panic("engine: New needs every store role")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	e := &Engine{health: store.Health, Audit: audit.New(o.Audit, o.Logger)}
	e.Rules = rules.New(store.Rules, e.Audit)
	e.Webhooks = webhooks.New(webhookPort{store.Webhooks, store.Decider}, e.Audit, o.Logger, o.Webhooks)
	e.Accounts = accounts.New(dir, accounts.Options{Store: o.Accounts, Logger: o.Logger})
	e.Admin = accounts.NewAdmin(e.Accounts, accounts.AdminOptions{Store: o.Accounts, Logger: o.Logger,
		OnAdminChange: o.OnAdminChange, Audit: e.Audit, Webhooks: store.Webhooks, Rules: e.Rules})
	var lim *limits.Limiter
	e.Usage = usage.New(usagePort{store.Usage, store.Decider, store.Rules}, e.Accounts, usage.Options{
		FlushInterval: o.FlushInterval, Logger: o.Logger, Observer: o.Observer, Notifier: e.Webhooks,
		OnNow: func(nowMS int64) { lim.ObserveNow(nowMS) }})
	lim = limits.New(decisionPort{store.Decider, store.Rules}, e.Usage, e.Audit,
		limits.Options{LocalCacheMaxEntries: o.LocalCacheMaxEntries, Observer: o.Observer})
	e.Limits = lim
	e.Leases = leases.New(decisionPort{store.Decider, store.Rules}, e.Usage)
	return e
}

// Ping reports whether the store answers.
func (e *Engine) Ping(ctx context.Context) error { return e.health.Ping(ctx) }

// UsageOf reports the account with id across all its namespaces (GET
// /v1/admin/accounts/{id}/usage), an account created on another instance included.
func (e *Engine) UsageOf(ctx context.Context, id string) (usage.AccountUsage, error) {
	a, err := e.Accounts.Resolve(ctx, id)
	if err != nil {
		return usage.AccountUsage{}, err
	}
	return e.Usage.Usage(ctx, a)
}
