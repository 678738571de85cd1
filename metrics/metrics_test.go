package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/metrics"
	"github.com/leashd/leash/store/memstore"
	dto "github.com/prometheus/client_model/go"
)

func families(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*dto.MetricFamily)
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := make(map[string]string)
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestCollectors(t *testing.T) {
	m := metrics.New()
	d := m.Decisions("limit")
	d.Inc(true)
	d.Inc(false)
	d.Inc(false)
	r := m.Route("POST /v1/limit")
	r.Observe(200, time.Millisecond)
	r.Observe(200, time.Millisecond)
	r.Observe(999, time.Millisecond) // outside the resolved range still counts

	s := m.Instrument(memstore.New(memstore.Options{}))
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Spend(ctx, engine.Spend{Counter: engine.Counter{Account: "a", Namespace: "n", Key: "k", Algorithm: engine.FixedWindow, WindowMS: 1000}, Limit: 1, Cost: 1}); err != nil {
		t.Fatal(err)
	}

	fams := families(t, m)
	got := map[string]float64{}
	for _, mt := range fams["leash_decisions_total"].GetMetric() {
		l := labels(mt)
		got[l["endpoint"]+"/"+l["outcome"]] = mt.GetCounter().GetValue()
	}
	if got["limit/allowed"] != 1 || got["limit/denied"] != 2 {
		t.Fatalf("decisions = %v", got)
	}
	codes := map[string]uint64{}
	for _, mt := range fams["leash_http_request_duration_seconds"].GetMetric() {
		l := labels(mt)
		if l["route"] != "POST /v1/limit" {
			t.Fatalf("unexpected route label %q", l["route"])
		}
		codes[l["code"]] = mt.GetHistogram().GetSampleCount()
	}
	if len(codes) != 2 || codes["200"] != 2 || codes["999"] != 1 {
		t.Fatalf("http series = %v; want only the codes observed", codes)
	}
	var spendOK uint64
	for _, mt := range fams["leash_store_operation_duration_seconds"].GetMetric() {
		if l := labels(mt); l["op"] == "spend" && l["result"] == "ok" {
			spendOK = mt.GetHistogram().GetSampleCount()
		}
	}
	if spendOK != 1 {
		t.Fatalf("store spend observations = %d, want 1", spendOK)
	}
}

// TestRLQSCollectors: the RLQS gauges and counters (spec §14.6), every kind and reason at
// 0 before use.
func TestRLQSCollectors(t *testing.T) {
	m := metrics.New()
	r := m.RLQS()
	fams := families(t, m)
	if n := len(fams["leash_rlqs_assignments_total"].GetMetric()); n != 4 {
		t.Fatalf("%d assignment kinds before use, want 4", n)
	}
	if n := len(fams["leash_rlqs_rejected_total"].GetMetric()); n != 6 {
		t.Fatalf("%d rejection reasons before use, want 6", n)
	}
	r.Streams(2)
	r.Streams(-1)
	r.Buckets(5)
	r.Sent("token_bucket")
	r.Sent("token_bucket")
	r.Reported("web", 7, 3)
	r.Reported("web", 0, 1)
	r.Rejected("bad_bucket")
	fams = families(t, m)
	if v := fams["leash_rlqs_streams"].GetMetric()[0].GetGauge().GetValue(); v != 1 {
		t.Errorf("streams %v", v)
	}
	if v := fams["leash_rlqs_buckets"].GetMetric()[0].GetGauge().GetValue(); v != 5 {
		t.Errorf("buckets %v", v)
	}
	got := map[string]float64{}
	for _, name := range []string{"leash_rlqs_assignments_total", "leash_rlqs_reported_requests_total", "leash_rlqs_rejected_total"} {
		for _, mt := range fams[name].GetMetric() {
			l := labels(mt)
			got[name+"/"+l["kind"]+l["domain"]+l["outcome"]+l["reason"]] = mt.GetCounter().GetValue()
		}
	}
	for k, want := range map[string]float64{
		"leash_rlqs_assignments_total/token_bucket":     2,
		"leash_rlqs_assignments_total/abandon":          0,
		"leash_rlqs_reported_requests_total/weballowed": 7,
		"leash_rlqs_reported_requests_total/webdenied":  4,
		"leash_rlqs_rejected_total/bad_bucket":          1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}

// TestXDSCollectors: the xDS families exist only once asked for, both results at 0
// before use, and follow the callbacks.
func TestXDSCollectors(t *testing.T) {
	m := metrics.New()
	if _, ok := families(t, m)["leash_xds_connected"]; ok {
		t.Fatal("leash_xds_connected before XDS")
	}
	updated, connected := m.XDS()
	fams := families(t, m)
	if n := len(fams["leash_xds_updates_total"].GetMetric()); n != 2 {
		t.Fatalf("%d update results before use, want 2", n)
	}
	updated(true)
	updated(true)
	updated(false)
	connected(true)
	fams = families(t, m)
	got := map[string]float64{}
	for _, mt := range fams["leash_xds_updates_total"].GetMetric() {
		got[labels(mt)["result"]] = mt.GetCounter().GetValue()
	}
	if got["applied"] != 2 || got["refused"] != 1 {
		t.Errorf("updates %v", got)
	}
	if v := fams["leash_xds_connected"].GetMetric()[0].GetGauge().GetValue(); v != 1 {
		t.Errorf("connected %v, want 1", v)
	}
	connected(false)
	if v := families(t, m)["leash_xds_connected"].GetMetric()[0].GetGauge().GetValue(); v != 0 {
		t.Errorf("connected %v after the stream stopped, want 0", v)
	}
}

// TestHardCapRefusals: the engine observer counts hard-cap refusals by edge and account.
func TestHardCapRefusals(t *testing.T) {
	m := metrics.New()
	o := m.Observer(nil, 0.8)
	a := &engine.Account{ID: "acme"}
	o.HardCapRefused(a, engine.EdgeRLQS)
	o.HardCapRefused(a, engine.EdgeRLQS)
	o.HardCapRefused(a, engine.EdgeLeases)
	got := map[string]float64{}
	for _, mt := range families(t, m)["leash_hard_cap_denials_total"].GetMetric() {
		l := labels(mt)
		got[l["endpoint"]+"/"+l["account"]] = mt.GetCounter().GetValue()
	}
	if len(got) != 2 || got["rlqs/acme"] != 2 || got["leases/acme"] != 1 {
		t.Fatalf("hard-cap refusals %v", got)
	}
}
