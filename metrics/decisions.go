package metrics

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leashd/leash/engine"
)

// Decision metrics from the engine's one decision path (spec §12.2): every decided item
// is seen once, by Observer.Decided, whatever edge it came from.
//
//   - Per rule of the Envoy descriptor config: hits, within limit, near limit, over limit,
//     shadow-mode denials and denials from the over-limit cache, labelled by domain and
//     the rule's key path (never by request values, except for a rule with
//     detailed_metric, and then at most MaxDetailedSeries values per rule). A rule's
//     series disappear when the rule leaves the config (SyncRules).
//   - Per namespace: decisions by edge, account and outcome, the namespace labelled only
//     when metrics.namespaces lists it, else "other".

// MaxDetailedSeries bounds the request values one detailed_metric rule gets series for;
// later values are counted under the rule's key path followed by ":other".
const MaxDetailedSeries = 100

// OtherNamespace labels the namespaces metrics.namespaces does not list.
const OtherNamespace = "other"

// RuleID names one rule of the descriptor config.
type RuleID struct {
	Domain string
	Rule   string // the rule's key path (descriptors.Rule.MetricKey)
}

// RuleCounters are one rule's counts; an edge hands a *RuleCounters to the engine as the
// item's Tag.
type RuleCounters struct {
	hits, within, near, over, shadow, cached atomic.Uint64
}

// ruleEntry is a configured rule's counters and, for detailed_metric, its per-value ones.
type ruleEntry struct {
	RuleCounters
	mu       sync.Mutex
	detailed map[string]*RuleCounters // by the detailed key path
}

// Rules is the per-rule collector.
type Rules struct {
	mu    sync.RWMutex
	rules map[RuleID]*ruleEntry
	descs [6]*prometheus.Desc
}

var ruleMetricNames = [6][2]string{
	{"leash_envoy_rule_hits_total", "Units requested of an Envoy descriptor rule (hits_addend summed)."},
	{"leash_envoy_rule_within_limit_total", "Units of an Envoy descriptor rule allowed."},
	{"leash_envoy_rule_near_limit_total", "Units of an Envoy descriptor rule allowed past metrics.near_limit_ratio of the limit."},
	{"leash_envoy_rule_over_limit_total", "Units of an Envoy descriptor rule denied (shadow and cached denials included)."},
	{"leash_envoy_rule_shadow_denials_total", "Units of an Envoy descriptor rule in shadow_mode that were over the limit and answered OK."},
	{"leash_envoy_rule_local_cache_denials_total", "Units of an Envoy descriptor rule denied from the over-limit cache."},
}

func newRules() *Rules {
	r := &Rules{rules: make(map[RuleID]*ruleEntry)}
	for i, n := range ruleMetricNames {
		r.descs[i] = prometheus.NewDesc(n[0], n[1], []string{"domain", "rule"}, nil)
	}
	return r
}

// Sync makes rules the configured set: new ones start at 0, ones no longer listed (and
// their detailed series) disappear; rules still listed keep their counts.
func (r *Rules) Sync(rules []RuleID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keep := make(map[RuleID]*ruleEntry, len(rules))
	for _, id := range rules {
		e := r.rules[id]
		if e == nil {
			e = &ruleEntry{}
		}
		keep[id] = e
	}
	r.rules = keep
}

// Tag returns the counters of a configured rule, or of one of its detailed values
// (detailed non-empty: the key path with the request's values); nil when the rule is not
// in the synced set.
func (r *Rules) Tag(id RuleID, detailed string) *RuleCounters {
	r.mu.RLock()
	e := r.rules[id]
	r.mu.RUnlock()
	if e == nil {
		return nil
	}
	if detailed == "" {
		return &e.RuleCounters
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.detailed[detailed]; c != nil {
		return c
	}
	if e.detailed == nil {
		e.detailed = make(map[string]*RuleCounters)
	}
	if len(e.detailed) >= MaxDetailedSeries {
		detailed = id.Rule + ":other"
		if c := e.detailed[detailed]; c != nil {
			return c
		}
	}
	c := &RuleCounters{}
	e.detailed[detailed] = c
	return c
}

// Describe sends the descriptors of the per-rule metrics.
func (r *Rules) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range r.descs {
		ch <- d
	}
}

// Collect sends every synced rule's counts.
func (r *Rules) Collect(ch chan<- prometheus.Metric) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	send := func(domain, rule string, c *RuleCounters) {
		for i, v := range [6]*atomic.Uint64{&c.hits, &c.within, &c.near, &c.over, &c.shadow, &c.cached} {
			ch <- prometheus.MustNewConstMetric(r.descs[i], prometheus.CounterValue, float64(v.Load()), domain, rule)
		}
	}
	for id, e := range r.rules {
		send(id.Domain, id.Rule, &e.RuleCounters)
		e.mu.Lock()
		for k, c := range e.detailed {
			send(id.Domain, k, c)
		}
		e.mu.Unlock()
	}
}

// count adds one decided item to c (the peer's counting, in units of cost; a denied
// request spends nothing in Leash, so all of its units are over the limit).
func (c *RuleCounters) count(r *engine.ItemResult, cost int64, nearRatio float64) {
	u := uint64(cost)
	c.hits.Add(u)
	switch {
	case r.Cached:
		c.over.Add(u)
		c.cached.Add(u)
		if r.ShadowDenied {
			c.shadow.Add(u)
		}
	case r.ShadowDenied || !r.Allowed:
		c.over.Add(u)
		if r.ShadowDenied {
			c.shadow.Add(u)
		}
	default:
		c.within.Add(u)
		l := r.Limit.Limit
		after := l - r.Remaining
		before := after - cost
		thr := int64(math.Floor(float64(l) * nearRatio))
		if after > thr {
			c.near.Add(uint64(after - max(thr, before)))
		}
	}
}

// nsCounters are one (edge, account, namespace) pair's decision counters.
type nsCounters struct{ allowed, denied prometheus.Counter }

// Observer is the engine.Observer that counts decisions per rule and per namespace.
type Observer struct {
	rules      *Rules
	nearRatio  float64
	namespaces map[string]bool // listed in metrics.namespaces
	vec        *prometheus.CounterVec
	hardCap    *prometheus.CounterVec // leash_hard_cap_denials_total{endpoint,account}

	mu      sync.Mutex // serialises building resolved
	resolve atomic.Pointer[map[nsKey]*nsCounters]
}

type nsKey struct {
	edge      engine.Edge
	account   string
	namespace string // a listed namespace or OtherNamespace
}

var _ engine.Observer = (*Observer)(nil)

// Decided counts one decided item.
func (o *Observer) Decided(a *engine.Account, q *engine.Query, it *engine.Item, r *engine.ItemResult) {
	if c, ok := it.Tag.(*RuleCounters); ok && c != nil && r.Limited {
		c.count(r, it.Cost, o.nearRatio)
	}
	ns := OtherNamespace
	if o.namespaces[q.Namespace] {
		ns = q.Namespace
	}
	c := o.counters(nsKey{q.Edge, a.ID, ns})
	if r.Allowed && !r.ShadowDenied {
		c.allowed.Inc()
	} else {
		c.denied.Inc()
	}
}

// HardCapRefused counts one call an account's hard cap refused, labelled by the edge
// (limit, leases, envoy, rlqs) and the account.
func (o *Observer) HardCapRefused(a *engine.Account, edge engine.Edge) {
	o.hardCap.WithLabelValues(string(edge), a.ID).Inc()
}

// counters returns the resolved counters of k, resolving them once.
func (o *Observer) counters(k nsKey) *nsCounters {
	if m := o.resolve.Load(); m != nil {
		if c := (*m)[k]; c != nil {
			return c
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	old := o.resolve.Load()
	if old != nil {
		if c := (*old)[k]; c != nil {
			return c
		}
	}
	next := make(map[nsKey]*nsCounters)
	if old != nil {
		for kk, v := range *old {
			next[kk] = v
		}
	}
	c := &nsCounters{
		allowed: o.vec.WithLabelValues(string(k.edge), k.account, k.namespace, "allowed"),
		denied:  o.vec.WithLabelValues(string(k.edge), k.account, k.namespace, "denied"),
	}
	next[k] = c
	o.resolve.Store(&next)
	return c
}

// Observer returns the engine.Observer of these metrics: per-rule counts through Rules,
// per-namespace counts labelled for the listed namespaces only. nearRatio is
// metrics.near_limit_ratio.
func (m *Metrics) Observer(namespaces []string, nearRatio float64) *Observer {
	o := &Observer{rules: m.rules, nearRatio: nearRatio, namespaces: make(map[string]bool, len(namespaces)), vec: m.nsDecisions, hardCap: m.hardCap}
	for _, ns := range namespaces {
		o.namespaces[ns] = true
	}
	return o
}

// Rules returns the per-rule collector, which edges sync with their config and tag
// items from.
func (m *Metrics) Rules() *Rules { return m.rules }
