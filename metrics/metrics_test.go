package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/memstore"
	"github.com/leashd/leash/metrics"
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
