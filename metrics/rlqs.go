package metrics

import "github.com/prometheus/client_golang/prometheus"

// RLQS holds the Rate Limit Quota Service's collectors (spec §14.6).
type RLQS struct {
	streams, buckets         prometheus.Gauge
	sent, reported, rejected *prometheus.CounterVec
}

// rlqsKinds are the bucket actions counted by leash_rlqs_assignments_total.
var rlqsKinds = []string{"token_bucket", "allow_all", "deny_all", "abandon"}

// rlqsReasons are the refusals counted by leash_rlqs_rejected_total.
var rlqsReasons = []string{"no_domain", "bad_domain", "unmapped_domain", "bad_bucket", "bad_counts", "too_many_buckets"}

func newRLQS() *RLQS {
	r := &RLQS{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leash_rlqs_streams",
			Help: "Open Rate Limit Quota Service streams on this instance.",
		}),
		buckets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leash_rlqs_buckets",
			Help: "RLQS buckets tracked on this instance.",
		}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leash_rlqs_assignments_total",
			Help: "RLQS bucket actions sent by kind (token_bucket, allow_all, deny_all, abandon).",
		}, []string{"kind"}),
		reported: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leash_rlqs_reported_requests_total",
			Help: "Requests RLQS proxies reported by domain (configured ones, else other) and outcome (allowed, denied).",
		}, []string{"domain", "outcome"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leash_rlqs_rejected_total",
			Help: "RLQS streams ended or bucket entries ignored, by reason.",
		}, []string{"reason"}),
	}
	for _, k := range rlqsKinds {
		r.sent.WithLabelValues(k)
	}
	for _, k := range rlqsReasons {
		r.rejected.WithLabelValues(k)
	}
	r.reported.WithLabelValues("other", "allowed") // the family is exposed before any report
	r.reported.WithLabelValues("other", "denied")
	return r
}

func (r *RLQS) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.streams, r.buckets, r.sent, r.reported, r.rejected}
}

// RLQS returns the Rate Limit Quota Service's collectors.
func (m *Metrics) RLQS() *RLQS { return m.rlqs }

// Streams adds delta to the open streams.
func (r *RLQS) Streams(delta int) { r.streams.Add(float64(delta)) }

// Buckets adds delta to the buckets tracked.
func (r *RLQS) Buckets(delta int) { r.buckets.Add(float64(delta)) }

// Sent counts one bucket action of kind.
func (r *RLQS) Sent(kind string) { r.sent.WithLabelValues(kind).Inc() }

// Reported counts the requests of one report; domain must be bounded by the caller.
func (r *RLQS) Reported(domain string, allowed, denied uint64) {
	if allowed > 0 {
		r.reported.WithLabelValues(domain, "allowed").Add(float64(allowed))
	}
	if denied > 0 {
		r.reported.WithLabelValues(domain, "denied").Add(float64(denied))
	}
}

// Rejected counts one refusal.
func (r *RLQS) Rejected(reason string) { r.rejected.WithLabelValues(reason).Inc() }
