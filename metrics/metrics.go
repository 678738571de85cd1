// Package metrics holds Leash's Prometheus collectors. Every label is bounded (spec §12.2):
// endpoints, routes, outcomes, status codes and store operations; accounts and Envoy
// domains and rules (bounded by the config); namespaces only when metrics.namespaces lists
// them; never keys or request values (except a detailed_metric rule's, bounded).
package metrics

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/tracing"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"
)

// Metrics is one process's collectors, registered on their own Registry.
type Metrics struct {
	Registry *prometheus.Registry

	decisions     *prometheus.CounterVec
	httpDuration  *prometheus.HistogramVec
	storeDuration *prometheus.HistogramVec
	shadow        prometheus.Counter
	globalShadow  prometheus.Counter
	nsDecisions   *prometheus.CounterVec
	rules         *Rules
	deliveries    *prometheus.CounterVec
	outboxDepth   prometheus.Gauge
	hardCap       *prometheus.CounterVec
	grpcDuration  *prometheus.HistogramVec
	rlqs          *RLQS
}

// New creates the collectors and registers them, with the Go and process collectors.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leash_decisions_total",
			Help: "Rate-limit and lease decisions by endpoint (limit, leases, envoy) and outcome (allowed, denied).",
		}, []string{"endpoint", "outcome"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leash_http_request_duration_seconds",
			Help:    "HTTP /v1 request latency by route pattern and status code.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "code"}),
		storeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leash_store_operation_duration_seconds",
			Help:    "Store operation latency by operation and result (ok, error).",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"op", "result"}),
	}
	m.shadow = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "leash_envoy_shadow_denials_total",
		Help: "Envoy descriptors in shadow_mode that were over their limit and answered OK.",
	})
	m.nsDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leash_namespace_decisions_total",
		Help: "Decided items by edge (limit, envoy, rlqs), account, namespace (those listed in metrics.namespaces, else other) and outcome (allowed, denied).",
	}, []string{"edge", "account", "namespace", "outcome"})
	m.rules = newRules()
	m.globalShadow = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "leash_envoy_global_shadow_total",
		Help: "Envoy requests over the limit answered OK because envoy.shadow_mode is on.",
	})
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leash_webhook_deliveries_total",
		Help: "Webhook delivery attempts by outcome (delivered, retried, failed: given up, dropped: no webhook).",
	}, []string{"outcome"})
	m.outboxDepth = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "leash_webhook_outbox_depth",
		Help: "Webhook events waiting in the store's outbox (all instances'), as last read by this one.",
	})
	m.rlqs = newRLQS()
	m.Registry.MustRegister(m.rlqs.collectors()...)
	m.hardCap = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leash_hard_cap_denials_total",
		Help: "Calls refused because the account's month usage reached its plan's hard cap, by endpoint (limit, leases, envoy, rlqs) and account; counted by the engine.",
	}, []string{"endpoint", "account"})
	m.grpcDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "leash_grpc_request_duration_seconds",
		Help:    "Unary gRPC call latency (the Envoy rate-limit service, health) by full method and status code.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"method", "code"})
	m.Registry.MustRegister(m.decisions, m.httpDuration, m.storeDuration, m.shadow, m.globalShadow, m.nsDecisions, m.rules, m.deliveries, m.outboxDepth, m.hardCap, m.grpcDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ShadowDenial counts one shadow_mode descriptor answered OK although over its limit.
func (m *Metrics) ShadowDenial() { m.shadow.Inc() }

// GlobalShadow counts one Envoy request answered OK by envoy.shadow_mode.
func (m *Metrics) GlobalShadow() { m.globalShadow.Inc() }

// LocalCache reports the denials the engine answered from its over-limit cache.
func (m *Metrics) LocalCache(hits func() int64) {
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "leash_local_cache_denials_total",
		Help: "Denials answered from the over-limit cache without a store operation (the peer's over_limit_with_local_cache).",
	}, func() float64 { return float64(hits()) }))
}

// Readiness reports whether the instance is ready (as /readyz would answer) as
// leash_ready, evaluated at each scrape.
func (m *Metrics) Readiness(ready func() bool) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "leash_ready",
		Help: "1 while the instance is ready (the store answers a ping within 500 ms and it is not shutting down), else 0; evaluated at each scrape.",
	}, func() float64 {
		if ready() {
			return 1
		}
		return 0
	}))
}

// WebhookDelivery counts one webhook delivery attempt by its outcome.
func (m *Metrics) WebhookDelivery(outcome string) { m.deliveries.WithLabelValues(outcome).Inc() }

// InitWebhookOutcome makes an outcome's counter visible at 0 before any delivery.
func (m *Metrics) InitWebhookOutcome(outcome string) { m.deliveries.WithLabelValues(outcome) }

// WebhookOutboxDepth records the outbox's length.
func (m *Metrics) WebhookOutboxDepth(n int64) { m.outboxDepth.Set(float64(n)) }

// DecisionCounter counts one endpoint's decisions; its counters are resolved once.
type DecisionCounter struct{ allowed, denied prometheus.Counter }

// Decisions returns the decision counter of endpoint (limit, leases, envoy).
func (m *Metrics) Decisions(endpoint string) DecisionCounter {
	return DecisionCounter{allowed: m.decisions.WithLabelValues(endpoint, "allowed"), denied: m.decisions.WithLabelValues(endpoint, "denied")}
}

// Inc counts one decision.
func (c DecisionCounter) Inc(allowed bool) {
	if allowed {
		c.allowed.Inc()
		return
	}
	c.denied.Inc()
}

// RouteObserver records one route's request latencies by status code.
type RouteObserver struct {
	route  string
	vec    *prometheus.HistogramVec
	byCode [600]atomic.Pointer[prometheus.Observer] // resolved on first use, by status code
}

// Route returns the latency observer of one route pattern.
func (m *Metrics) Route(route string) *RouteObserver {
	return &RouteObserver{route: route, vec: m.httpDuration}
}

// Observe records one request's latency.
func (o *RouteObserver) Observe(code int, d time.Duration) {
	if code < 0 || code >= len(o.byCode) {
		o.vec.WithLabelValues(o.route, strconv.Itoa(code)).Observe(d.Seconds())
		return
	}
	p := o.byCode[code].Load()
	if p == nil {
		obs := o.vec.WithLabelValues(o.route, strconv.Itoa(code))
		p = &obs
		o.byCode[code].Store(p)
	}
	(*p).Observe(d.Seconds())
}

// MustRegister adds further collectors (for example a store's own) to the registry.
func (m *Metrics) MustRegister(cs ...prometheus.Collector) { m.Registry.MustRegister(cs...) }

// storeOp is the pair of pre-resolved histograms of one store operation, and the name of
// its span.
type storeOp struct {
	ok, err prometheus.Observer
	span    string // "store.<op>"
}

func (m *Metrics) op(name string) storeOp {
	return storeOp{ok: m.storeDuration.WithLabelValues(name, "ok"), err: m.storeDuration.WithLabelValues(name, "error"), span: "store." + name}
}

// done observes an operation's latency and ends its span (nil when none was started).
func (o storeOp) done(start time.Time, span trace.Span, err error) {
	if span != nil {
		tracing.EndChild(span, err)
	}
	if err != nil {
		o.err.Observe(time.Since(start).Seconds())
		return
	}
	o.ok.Observe(time.Since(start).Seconds())
}

// child starts the span of one operation as a child of the request's span, when tracing
// is on and that span is recording (spec §12.8).
func (s *InstrumentedStore) child(ctx context.Context, o storeOp) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, nil
	}
	return tracing.StartChild(ctx, s.tracer, o.span)
}

// InstrumentedStore times every operation of an engine.Store, and with a tracer gives
// each a child span of the request's. It embeds nothing: a method added to the store's
// interfaces fails to compile here until it is timed too.
type InstrumentedStore struct {
	tracer                                                                                                              trace.Tracer // nil: no spans
	s                                                                                                                   engine.Store
	spend, spendAll, reset, acquire, release, renew, rules, putRule, deleteRule, addUsage, readUsage, monthTotals, ping storeOp
	webhook, putWebhook, deleteWebhook, enqueue, claim, ack, retry, outboxLen, nowMS                                    storeOp
	reportDemand, dropDemand                                                                                            storeOp
}

var _ engine.Store = (*InstrumentedStore)(nil)

// Instrument wraps s so each operation's latency is observed.
func (m *Metrics) Instrument(s engine.Store) *InstrumentedStore { return m.InstrumentTraced(s, nil) }

// InstrumentTraced is Instrument that also traces each operation with tr (nil: no spans).
func (m *Metrics) InstrumentTraced(s engine.Store, tr trace.Tracer) *InstrumentedStore {
	return &InstrumentedStore{
		tracer: tr,
		s:      s, spend: m.op("spend"), spendAll: m.op("spend_all"), reset: m.op("reset"), acquire: m.op("acquire"), release: m.op("release"),
		renew: m.op("renew"), rules: m.op("rules"), putRule: m.op("put_rule"), deleteRule: m.op("delete_rule"),
		addUsage: m.op("add_usage"), readUsage: m.op("read_usage"), monthTotals: m.op("month_totals"), ping: m.op("ping"),
		webhook: m.op("webhook"), putWebhook: m.op("put_webhook"), deleteWebhook: m.op("delete_webhook"),
		enqueue: m.op("enqueue"), claim: m.op("claim"), ack: m.op("ack"), retry: m.op("retry"), outboxLen: m.op("outbox_len"),
		nowMS: m.op("now"), reportDemand: m.op("report_demand"), dropDemand: m.op("drop_demand"),
	}
}

// ReportDemand times Store.ReportDemand.
func (s *InstrumentedStore) ReportDemand(ctx context.Context, d engine.DemandReport) ([]engine.StreamDemand, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.reportDemand)
	r, err := s.s.ReportDemand(ctx, d)
	s.reportDemand.done(t, span, err)
	return r, err
}

// DropDemand times Store.DropDemand.
func (s *InstrumentedStore) DropDemand(ctx context.Context, b engine.DemandBucket, stream string) error {
	t := time.Now()
	ctx, span := s.child(ctx, s.dropDemand)
	err := s.s.DropDemand(ctx, b, stream)
	s.dropDemand.done(t, span, err)
	return err
}

// Spend times Store.Spend.
func (s *InstrumentedStore) Spend(ctx context.Context, sp engine.Spend) (engine.Decision, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.spend)
	d, err := s.s.Spend(ctx, sp)
	s.spend.done(t, span, err)
	return d, err
}

// SpendAll times Store.SpendAll.
func (s *InstrumentedStore) SpendAll(ctx context.Context, spends []engine.Spend, out []engine.Decision) error {
	t := time.Now()
	ctx, span := s.child(ctx, s.spendAll)
	err := s.s.SpendAll(ctx, spends, out)
	s.spendAll.done(t, span, err)
	return err
}

// Reset times Store.Reset.
func (s *InstrumentedStore) Reset(ctx context.Context, c engine.Counter) (bool, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.reset)
	ok, err := s.s.Reset(ctx, c)
	s.reset.done(t, span, err)
	return ok, err
}

// Acquire times Store.Acquire.
func (s *InstrumentedStore) Acquire(ctx context.Context, set engine.LeaseSet, token string, limit, ttlMS int64) (engine.LeaseDecision, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.acquire)
	d, err := s.s.Acquire(ctx, set, token, limit, ttlMS)
	s.acquire.done(t, span, err)
	return d, err
}

// Release times Store.Release.
func (s *InstrumentedStore) Release(ctx context.Context, set engine.LeaseSet, token string) (engine.ReleaseResult, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.release)
	r, err := s.s.Release(ctx, set, token)
	s.release.done(t, span, err)
	return r, err
}

// Renew times Store.Renew.
func (s *InstrumentedStore) Renew(ctx context.Context, set engine.LeaseSet, token string, ttlMS int64) (engine.RenewResult, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.renew)
	r, err := s.s.Renew(ctx, set, token, ttlMS)
	s.renew.done(t, span, err)
	return r, err
}

// Rules times Store.Rules.
func (s *InstrumentedStore) Rules(ctx context.Context, account, namespace string) (engine.Rules, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.rules)
	r, err := s.s.Rules(ctx, account, namespace)
	s.rules.done(t, span, err)
	return r, err
}

// PutRule times Store.PutRule.
func (s *InstrumentedStore) PutRule(ctx context.Context, account, namespace string, r engine.Rule) (bool, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.putRule)
	created, err := s.s.PutRule(ctx, account, namespace, r)
	s.putRule.done(t, span, err)
	return created, err
}

// DeleteRule times Store.DeleteRule.
func (s *InstrumentedStore) DeleteRule(ctx context.Context, account, namespace string, kind engine.RuleKind) (bool, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.deleteRule)
	deleted, err := s.s.DeleteRule(ctx, account, namespace, kind)
	s.deleteRule.done(t, span, err)
	return deleted, err
}

// AddUsage times Store.AddUsage.
func (s *InstrumentedStore) AddUsage(ctx context.Context, b engine.UsageBatch) error {
	t := time.Now()
	ctx, span := s.child(ctx, s.addUsage)
	err := s.s.AddUsage(ctx, b)
	s.addUsage.done(t, span, err)
	return err
}

// ReadUsage times Store.ReadUsage.
func (s *InstrumentedStore) ReadUsage(ctx context.Context, q engine.UsageQuery) (engine.UsageReport, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.readUsage)
	r, err := s.s.ReadUsage(ctx, q)
	s.readUsage.done(t, span, err)
	return r, err
}

// MonthTotals times Store.MonthTotals.
func (s *InstrumentedStore) MonthTotals(ctx context.Context, month engine.Month, accounts []string) ([]int64, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.monthTotals)
	r, err := s.s.MonthTotals(ctx, month, accounts)
	s.monthTotals.done(t, span, err)
	return r, err
}

// Webhook times Store.Webhook.
func (s *InstrumentedStore) Webhook(ctx context.Context, account string) (engine.Webhook, bool, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.webhook)
	w, ok, err := s.s.Webhook(ctx, account)
	s.webhook.done(t, span, err)
	return w, ok, err
}

// PutWebhook times Store.PutWebhook.
func (s *InstrumentedStore) PutWebhook(ctx context.Context, account string, w engine.Webhook) error {
	t := time.Now()
	ctx, span := s.child(ctx, s.putWebhook)
	err := s.s.PutWebhook(ctx, account, w)
	s.putWebhook.done(t, span, err)
	return err
}

// DeleteWebhook times Store.DeleteWebhook.
func (s *InstrumentedStore) DeleteWebhook(ctx context.Context, account string) (bool, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.deleteWebhook)
	ok, err := s.s.DeleteWebhook(ctx, account)
	s.deleteWebhook.done(t, span, err)
	return ok, err
}

// Enqueue times Store.Enqueue.
func (s *InstrumentedStore) Enqueue(ctx context.Context, ev engine.OutboxEvent, onceKey string) (bool, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.enqueue)
	ok, err := s.s.Enqueue(ctx, ev, onceKey)
	s.enqueue.done(t, span, err)
	return ok, err
}

// Claim times Store.Claim.
func (s *InstrumentedStore) Claim(ctx context.Context, max int, visibilityMS int64) ([]engine.OutboxEvent, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.claim)
	evs, err := s.s.Claim(ctx, max, visibilityMS)
	s.claim.done(t, span, err)
	return evs, err
}

// Ack times Store.Ack.
func (s *InstrumentedStore) Ack(ctx context.Context, id string) error {
	t := time.Now()
	ctx, span := s.child(ctx, s.ack)
	err := s.s.Ack(ctx, id)
	s.ack.done(t, span, err)
	return err
}

// Retry times Store.Retry.
func (s *InstrumentedStore) Retry(ctx context.Context, id string, delayMS int64) error {
	t := time.Now()
	ctx, span := s.child(ctx, s.retry)
	err := s.s.Retry(ctx, id, delayMS)
	s.retry.done(t, span, err)
	return err
}

// OutboxLen times Store.OutboxLen.
func (s *InstrumentedStore) OutboxLen(ctx context.Context) (int64, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.outboxLen)
	n, err := s.s.OutboxLen(ctx)
	s.outboxLen.done(t, span, err)
	return n, err
}

// Ping times Store.Ping.
func (s *InstrumentedStore) Ping(ctx context.Context) error {
	t := time.Now()
	ctx, span := s.child(ctx, s.ping)
	err := s.s.Ping(ctx)
	s.ping.done(t, span, err)
	return err
}

// NowMS times Store.NowMS.
func (s *InstrumentedStore) NowMS(ctx context.Context) (int64, error) {
	t := time.Now()
	ctx, span := s.child(ctx, s.nowMS)
	n, err := s.s.NowMS(ctx)
	s.nowMS.done(t, span, err)
	return n, err
}

// Close closes the store; it is not timed.
func (s *InstrumentedStore) Close() error { return s.s.Close() }
