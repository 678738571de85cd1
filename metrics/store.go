package metrics

import (
	"context"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/tracing"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// The store decorator: one wrapper per store role, each holding only its role and timing
// every method through timed. No wrapper embeds the interface it wraps, so a method added
// to a role fails to compile here (the assertions below) until it is timed too; a role
// added to engine.Store fails InstrumentedStore's. TestEveryStoreMethodIsTimed checks that
// each method times its own operation.

// storeOp is one store operation: its pre-resolved histograms by result, and its span.
type storeOp struct {
	ok, err prometheus.Observer
	span    string       // "store.<op>"
	tracer  trace.Tracer // nil: no spans
}

func (m *Metrics) op(name string, tr trace.Tracer) storeOp {
	return storeOp{ok: m.storeDuration.WithLabelValues(name, "ok"), err: m.storeDuration.WithLabelValues(name, "error"),
		span: "store." + name, tracer: tr}
}

// timed runs the operation f, observes its latency by result and, with a tracer, gives it
// a child span of the request's when that one is recording (spec §12.8). It allocates
// nothing of its own: f does not escape.
func timed[T any](ctx context.Context, o *storeOp, f func(context.Context) (T, error)) (T, error) {
	start := time.Now()
	var span trace.Span
	if o.tracer != nil {
		ctx, span = tracing.StartChild(ctx, o.tracer, o.span)
	}
	v, err := f(ctx)
	if span != nil {
		tracing.EndChild(span, err)
	}
	if err != nil {
		o.err.Observe(time.Since(start).Seconds())
	} else {
		o.ok.Observe(time.Since(start).Seconds())
	}
	return v, err
}

// timedErr is timed for an operation that returns only an error.
func timedErr(ctx context.Context, o *storeOp, f func(context.Context) error) error {
	_, err := timed(ctx, o, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}

// InstrumentedStore is an engine.Store whose every operation but Close is timed, and with a
// tracer traced, role by role.
type InstrumentedStore struct {
	*timedDecider
	*timedRules
	*timedUsage
	*timedWebhooks
	*timedDemand
	*timedPinger
	inner engine.Store
}

var _ engine.Store = (*InstrumentedStore)(nil)

// Instrument wraps s so each operation's latency is observed.
func (m *Metrics) Instrument(s engine.Store) *InstrumentedStore { return m.InstrumentTraced(s, nil) }

// InstrumentTraced is Instrument that also traces each operation with tr (nil: no spans).
func (m *Metrics) InstrumentTraced(s engine.Store, tr trace.Tracer) *InstrumentedStore {
	op := func(name string) storeOp { return m.op(name, tr) }
	return &InstrumentedStore{
		timedDecider: &timedDecider{s: s, spend: op("spend"), spendAll: op("spend_all"), reset: op("reset"),
			acquire: op("acquire"), release: op("release"), renew: op("renew"), nowMS: op("now"), heldLeases: op("held_leases")},
		timedRules: &timedRules{s: s, rules: op("rules"), putRule: op("put_rule"), deleteRule: op("delete_rule"), ruleNamespaces: op("rule_namespaces")},
		timedUsage: &timedUsage{s: s, addUsage: op("add_usage"), readUsage: op("read_usage"), monthTotals: op("month_totals"), readAccountUsage: op("read_account_usage")},
		timedWebhooks: &timedWebhooks{s: s, webhook: op("webhook"), putWebhook: op("put_webhook"), deleteWebhook: op("delete_webhook"),
			enqueue: op("enqueue"), claim: op("claim"), ack: op("ack"), retry: op("retry"), outboxLen: op("outbox_len")},
		timedDemand: &timedDemand{s: s, reportDemand: op("report_demand"), dropDemand: op("drop_demand")},
		timedPinger: &timedPinger{s: s, ping: op("ping")},
		inner:       s,
	}
}

// Close closes the store; it is not timed.
func (s *InstrumentedStore) Close() error { return s.inner.Close() }

// timedDecider times an engine.Decider.
type timedDecider struct {
	s                                                      engine.Decider
	spend, spendAll, reset, acquire, release, renew, nowMS storeOp
	heldLeases                                             storeOp
}

var _ engine.Decider = (*timedDecider)(nil)

// Spend times Decider.Spend.
func (d *timedDecider) Spend(ctx context.Context, sp engine.Spend) (engine.Decision, error) {
	return timed(ctx, &d.spend, func(ctx context.Context) (engine.Decision, error) { return d.s.Spend(ctx, sp) })
}

// SpendAll times Decider.SpendAll.
func (d *timedDecider) SpendAll(ctx context.Context, spends []engine.Spend, out []engine.Decision) error {
	return timedErr(ctx, &d.spendAll, func(ctx context.Context) error { return d.s.SpendAll(ctx, spends, out) })
}

// Reset times Decider.Reset.
func (d *timedDecider) Reset(ctx context.Context, c engine.Counter) (bool, error) {
	return timed(ctx, &d.reset, func(ctx context.Context) (bool, error) { return d.s.Reset(ctx, c) })
}

// Acquire times Decider.Acquire.
func (d *timedDecider) Acquire(ctx context.Context, set engine.LeaseSet, token string, limit, ttlMS int64) (engine.LeaseDecision, error) {
	return timed(ctx, &d.acquire, func(ctx context.Context) (engine.LeaseDecision, error) {
		return d.s.Acquire(ctx, set, token, limit, ttlMS)
	})
}

// Release times Decider.Release.
func (d *timedDecider) Release(ctx context.Context, set engine.LeaseSet, token string) (engine.ReleaseResult, error) {
	return timed(ctx, &d.release, func(ctx context.Context) (engine.ReleaseResult, error) { return d.s.Release(ctx, set, token) })
}

// Renew times Decider.Renew.
func (d *timedDecider) Renew(ctx context.Context, set engine.LeaseSet, token string, ttlMS int64) (engine.RenewResult, error) {
	return timed(ctx, &d.renew, func(ctx context.Context) (engine.RenewResult, error) { return d.s.Renew(ctx, set, token, ttlMS) })
}

// NowMS times Decider.NowMS.
func (d *timedDecider) NowMS(ctx context.Context) (int64, error) {
	return timed(ctx, &d.nowMS, d.s.NowMS)
}

// timedRules times an engine.RuleStore.
type timedRules struct {
	s                          engine.RuleStore
	rules, putRule, deleteRule storeOp
	ruleNamespaces             storeOp
}

var _ engine.RuleStore = (*timedRules)(nil)

// Rules times RuleStore.Rules.
func (r *timedRules) Rules(ctx context.Context, account, namespace string) (engine.Rules, error) {
	return timed(ctx, &r.rules, func(ctx context.Context) (engine.Rules, error) { return r.s.Rules(ctx, account, namespace) })
}

// PutRule times RuleStore.PutRule.
func (r *timedRules) PutRule(ctx context.Context, account, namespace string, rule engine.Rule) (bool, error) {
	return timed(ctx, &r.putRule, func(ctx context.Context) (bool, error) { return r.s.PutRule(ctx, account, namespace, rule) })
}

// DeleteRule times RuleStore.DeleteRule.
func (r *timedRules) DeleteRule(ctx context.Context, account, namespace string, kind engine.RuleKind) (bool, error) {
	return timed(ctx, &r.deleteRule, func(ctx context.Context) (bool, error) { return r.s.DeleteRule(ctx, account, namespace, kind) })
}

// timedUsage times an engine.UsageStore.
type timedUsage struct {
	s                                engine.UsageStore
	addUsage, readUsage, monthTotals storeOp
	readAccountUsage                 storeOp
}

var _ engine.UsageStore = (*timedUsage)(nil)

// AddUsage times UsageStore.AddUsage.
func (u *timedUsage) AddUsage(ctx context.Context, b engine.UsageBatch) error {
	return timedErr(ctx, &u.addUsage, func(ctx context.Context) error { return u.s.AddUsage(ctx, b) })
}

// ReadUsage times UsageStore.ReadUsage.
func (u *timedUsage) ReadUsage(ctx context.Context, q engine.UsageQuery) (engine.UsageReport, error) {
	return timed(ctx, &u.readUsage, func(ctx context.Context) (engine.UsageReport, error) { return u.s.ReadUsage(ctx, q) })
}

// MonthTotals times UsageStore.MonthTotals.
func (u *timedUsage) MonthTotals(ctx context.Context, month engine.Month, accounts []string) ([]int64, error) {
	return timed(ctx, &u.monthTotals, func(ctx context.Context) ([]int64, error) { return u.s.MonthTotals(ctx, month, accounts) })
}

// timedWebhooks times an engine.WebhookStore.
type timedWebhooks struct {
	s                                                                         engine.WebhookStore
	webhook, putWebhook, deleteWebhook, enqueue, claim, ack, retry, outboxLen storeOp
}

var _ engine.WebhookStore = (*timedWebhooks)(nil)

// webhookFound is what WebhookStore.Webhook returns besides its error.
type webhookFound struct {
	w  engine.Webhook
	ok bool
}

// Webhook times WebhookStore.Webhook.
func (h *timedWebhooks) Webhook(ctx context.Context, account string) (engine.Webhook, bool, error) {
	r, err := timed(ctx, &h.webhook, func(ctx context.Context) (webhookFound, error) {
		w, ok, err := h.s.Webhook(ctx, account)
		return webhookFound{w, ok}, err
	})
	return r.w, r.ok, err
}

// PutWebhook times WebhookStore.PutWebhook.
func (h *timedWebhooks) PutWebhook(ctx context.Context, account string, w engine.Webhook) error {
	return timedErr(ctx, &h.putWebhook, func(ctx context.Context) error { return h.s.PutWebhook(ctx, account, w) })
}

// DeleteWebhook times WebhookStore.DeleteWebhook.
func (h *timedWebhooks) DeleteWebhook(ctx context.Context, account string) (bool, error) {
	return timed(ctx, &h.deleteWebhook, func(ctx context.Context) (bool, error) { return h.s.DeleteWebhook(ctx, account) })
}

// Enqueue times WebhookStore.Enqueue.
func (h *timedWebhooks) Enqueue(ctx context.Context, ev engine.OutboxEvent, onceKey string) (bool, error) {
	return timed(ctx, &h.enqueue, func(ctx context.Context) (bool, error) { return h.s.Enqueue(ctx, ev, onceKey) })
}

// Claim times WebhookStore.Claim.
func (h *timedWebhooks) Claim(ctx context.Context, max int, visibilityMS int64) ([]engine.OutboxEvent, error) {
	return timed(ctx, &h.claim, func(ctx context.Context) ([]engine.OutboxEvent, error) { return h.s.Claim(ctx, max, visibilityMS) })
}

// Ack times WebhookStore.Ack.
func (h *timedWebhooks) Ack(ctx context.Context, id string) error {
	return timedErr(ctx, &h.ack, func(ctx context.Context) error { return h.s.Ack(ctx, id) })
}

// Retry times WebhookStore.Retry.
func (h *timedWebhooks) Retry(ctx context.Context, id string, delayMS int64) error {
	return timedErr(ctx, &h.retry, func(ctx context.Context) error { return h.s.Retry(ctx, id, delayMS) })
}

// OutboxLen times WebhookStore.OutboxLen.
func (h *timedWebhooks) OutboxLen(ctx context.Context) (int64, error) {
	return timed(ctx, &h.outboxLen, h.s.OutboxLen)
}

// timedDemand times an engine.DemandStore.
type timedDemand struct {
	s                        engine.DemandStore
	reportDemand, dropDemand storeOp
}

var _ engine.DemandStore = (*timedDemand)(nil)

// ReportDemand times DemandStore.ReportDemand.
func (d *timedDemand) ReportDemand(ctx context.Context, r engine.DemandReport) ([]engine.StreamDemand, error) {
	return timed(ctx, &d.reportDemand, func(ctx context.Context) ([]engine.StreamDemand, error) { return d.s.ReportDemand(ctx, r) })
}

// DropDemand times DemandStore.DropDemand.
func (d *timedDemand) DropDemand(ctx context.Context, b engine.DemandBucket, stream string) error {
	return timedErr(ctx, &d.dropDemand, func(ctx context.Context) error { return d.s.DropDemand(ctx, b, stream) })
}

// timedPinger times an engine.Pinger.
type timedPinger struct {
	s    engine.Pinger
	ping storeOp
}

var _ engine.Pinger = (*timedPinger)(nil)

// Ping times Pinger.Ping.
func (p *timedPinger) Ping(ctx context.Context) error { return timedErr(ctx, &p.ping, p.s.Ping) }

// HeldLeases times Decider.HeldLeases.
func (d *timedDecider) HeldLeases(ctx context.Context, set engine.LeaseSet) (engine.HeldLeases, error) {
	return timed(ctx, &d.heldLeases, func(ctx context.Context) (engine.HeldLeases, error) { return d.s.HeldLeases(ctx, set) })
}

// RuleNamespaces times RuleStore.RuleNamespaces.
func (r *timedRules) RuleNamespaces(ctx context.Context, account string) ([]engine.NamespaceRules, error) {
	return timed(ctx, &r.ruleNamespaces, func(ctx context.Context) ([]engine.NamespaceRules, error) { return r.s.RuleNamespaces(ctx, account) })
}

// ReadAccountUsage times UsageStore.ReadAccountUsage.
func (u *timedUsage) ReadAccountUsage(ctx context.Context, q engine.AccountUsageQuery) (engine.AccountUsageReport, error) {
	return timed(ctx, &u.readAccountUsage, func(ctx context.Context) (engine.AccountUsageReport, error) { return u.s.ReadAccountUsage(ctx, q) })
}
