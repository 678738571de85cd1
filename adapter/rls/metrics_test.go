package rls_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/adapter/rls"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/metrics"
	"github.com/leashd/leash/testkit"
)

const metricsConfig = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: header_match
    value: path
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// scrape reads the metrics text a /metrics handler serves for m.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// TestRuleMetrics drives allowed, near-limit, over-limit and shadow decisions through two
// rules and reads the exact per-rule counts from /metrics (spec §12.2), as the peer
// counts them (its src/limiter/base_limiter.go); a reload without a rule removes its
// series.
func TestRuleMetrics(t *testing.T) {
	m := metrics.New()
	h := newHarnessWith(t, scalePlan(), map[string]string{"edge.yaml": metricsConfig}, harnessOptions{
		adapter: func(o *rls.Options) { o.Rules = m.Rules() },
		engine:  wiring.Options{Observer: m.Observer(nil, 0.8)},
	})
	// remote_address, limit 10, near from 8: 9 allowed (the 9th is near), then a cost of
	// 2 is over (nothing spent), a cost of 1 takes the 10th (near).
	for range 9 {
		h.one(desc("remote_address", "10.0.0.1"))
	}
	two := desc("remote_address", "10.0.0.1")
	two.HitsAddend = wrapperspb.UInt64(2)
	h.one(two)
	h.one(desc("remote_address", "10.0.0.1"))
	h.one(desc("remote_address", "10.0.0.1")) // over
	// header_match path (shadow, limit 2): 2 allowed (the 2nd near: floor(1.6) = 1), 1 shadow denial.
	for range 3 {
		h.one(desc("header_match", "path"))
	}
	text := scrape(t, m)
	want := map[string]int{
		`leash_envoy_rule_hits_total{domain="edge",rule="remote_address"}`:                   13,
		`leash_envoy_rule_within_limit_total{domain="edge",rule="remote_address"}`:           10,
		`leash_envoy_rule_near_limit_total{domain="edge",rule="remote_address"}`:             2,
		`leash_envoy_rule_over_limit_total{domain="edge",rule="remote_address"}`:             3,
		`leash_envoy_rule_shadow_denials_total{domain="edge",rule="remote_address"}`:         0,
		`leash_envoy_rule_hits_total{domain="edge",rule="header_match_path"}`:                3,
		`leash_envoy_rule_within_limit_total{domain="edge",rule="header_match_path"}`:        2,
		`leash_envoy_rule_near_limit_total{domain="edge",rule="header_match_path"}`:          1,
		`leash_envoy_rule_over_limit_total{domain="edge",rule="header_match_path"}`:          1,
		`leash_envoy_rule_shadow_denials_total{domain="edge",rule="header_match_path"}`:      1,
		`leash_envoy_rule_local_cache_denials_total{domain="edge",rule="header_match_path"}`: 0,
	}
	for series, n := range want {
		if line := fmt.Sprintf("%s %d\n", series, n); !strings.Contains(text, line) {
			t.Errorf("missing %q in /metrics", strings.TrimSpace(line))
		}
	}
	// A reload without header_match removes its series; remote_address keeps its counts.
	next := &domains.Config{Descriptors: loadFiles(t, map[string]string{"edge.yaml": "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"}),
		Routing: domains.Routing{Domains: map[string]string{"edge": "acme"}}}
	h.svc.SetConfig(next)
	text = scrape(t, m)
	if strings.Contains(text, `rule="header_match_path"`) || strings.Contains(text, `rule="detailed"`) {
		t.Error("a removed rule's series are still exported")
	}
	if !strings.Contains(text, `leash_envoy_rule_hits_total{domain="edge",rule="remote_address"} 13`) {
		t.Error("a kept rule lost its counts on reload")
	}
}

// TestMetricsBounded: a flood of 10,000 distinct namespaces and keys, and of values of a
// detailed_metric rule, does not grow /metrics past its bound (spec §12.2).
func TestMetricsBounded(t *testing.T) {
	m := metrics.New()
	h := newHarnessWith(t, scalePlan(), map[string]string{"edge.yaml": metricsConfig}, harnessOptions{
		adapter: func(o *rls.Options) { o.Rules = m.Rules() },
		engine:  wiring.Options{Observer: m.Observer([]string{"api"}, 0.8)},
	})
	series := func() int {
		n := 0
		for _, l := range strings.Split(scrape(t, m), "\n") {
			if strings.HasPrefix(l, "leash_") {
				n++
			}
		}
		return n
	}
	h.one(desc("detailed", "v0"))
	base := series()
	// 10,000 distinct detailed values and keys, ten descriptors a request.
	for i := 0; i < 10_000; i += 10 {
		req := &rlsv3.RateLimitRequest{}
		for j := range 10 {
			req.Descriptors = append(req.Descriptors, desc("detailed", fmt.Sprint("v", i+j)), desc("remote_address", fmt.Sprint("k", i+j)))
		}
		h.call(req)
	}
	// 10,000 distinct namespaces on /v1.
	for i := range 10_000 {
		if _, err := (testkit.Check{Namespace: fmt.Sprint("ns", i), Key: "k", Limit: testkit.Ptr(int64(5)), WindowMS: testkit.Ptr(int64(1000))}).Do(context.Background(), h.eng, h.acct); err != nil {
			t.Fatal(err)
		}
	}
	got := series()
	// The detailed rule: at most MaxDetailedSeries values plus ":other", 6 metrics each;
	// per namespace: edge limit's "other" (and "api", unused), 2 outcomes each.
	if bound := base + (metrics.MaxDetailedSeries+1)*6 + 2*2; got > bound {
		t.Fatalf("%d series after the flood (%d before), want at most %d", got, base, bound)
	}
}
