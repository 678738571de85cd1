// Package metrics holds Leash's Prometheus collectors. Every label is bounded (spec §12.2):
// endpoints, routes, outcomes, status codes and store operations; accounts and Envoy
// domains and rules (bounded by the config); namespaces only when metrics.namespaces lists
// them; never keys or request values (except a detailed_metric rule's, bounded).
package metrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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
