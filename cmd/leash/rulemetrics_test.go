package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
)

// metricsText reads a running leash's /metrics page.
func metricsText(t *testing.T, p *leashproc.Proc) string {
	t.Helper()
	resp, err := http.Get("http://" + p.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRuleMetricsOfRunningLeash: allowed, near-limit, over-limit and shadow decisions
// through two rules of a running leash read back exactly from its /metrics, and editing
// the descriptor file to drop a rule removes that rule's series while the other keeps its
// counts (spec §12.2; the peer counts as its src/limiter/base_limiter.go does).
func TestRuleMetricsOfRunningLeash(t *testing.T) {
	dir := t.TempDir()
	descDir := filepath.Join(dir, "ratelimit")
	if err := os.Mkdir(descDir, 0o755); err != nil {
		t.Fatal(err)
	}
	descFile := filepath.Join(descDir, "edge.yaml")
	both := "domain: edge\ndescriptors:\n" +
		"  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 5}\n" +
		"  - key: header_match\n    value: path\n    shadow_mode: true\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
	testkit.ReplaceFile(t, descFile, both)
	cfg := filepath.Join(dir, "leash.yaml")
	testkit.ReplaceFile(t, cfg, fmt.Sprintf("accounts:\n  - {id: acme, plan: pro, api_keys: [k]}\nenvoy:\n  config_paths: [%s]\n  domains: {edge: {account: acme}}\n", descDir))
	p := leashproc.Start(t, binary, []string{"--config", cfg})
	c := leashproc.DialRLS(t, p.GRPC)
	send := func(k, v string, n int) {
		for range n {
			if _, err := c.ShouldRateLimit(context.Background(), leashproc.Request("edge", leashproc.Entry(k, v))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// remote_address, limit 5, near from ⌊5 × 0.8⌋ = 4: 5 allowed (the 5th near), 2 over.
	send("remote_address", "10.0.0.1", 7)
	// header_match path, shadow, limit 2, near from 1: 2 allowed (the 2nd near), 3 shadow denials.
	send("header_match", "path", 5)
	want := map[string]int{
		`leash_envoy_rule_hits_total{domain="edge",rule="remote_address"}`:              7,
		`leash_envoy_rule_within_limit_total{domain="edge",rule="remote_address"}`:      5,
		`leash_envoy_rule_near_limit_total{domain="edge",rule="remote_address"}`:        1,
		`leash_envoy_rule_over_limit_total{domain="edge",rule="remote_address"}`:        2,
		`leash_envoy_rule_shadow_denials_total{domain="edge",rule="remote_address"}`:    0,
		`leash_envoy_rule_hits_total{domain="edge",rule="header_match_path"}`:           5,
		`leash_envoy_rule_within_limit_total{domain="edge",rule="header_match_path"}`:   2,
		`leash_envoy_rule_near_limit_total{domain="edge",rule="header_match_path"}`:     1,
		`leash_envoy_rule_over_limit_total{domain="edge",rule="header_match_path"}`:     3,
		`leash_envoy_rule_shadow_denials_total{domain="edge",rule="header_match_path"}`: 3,
	}
	text := metricsText(t, p)
	for series, n := range want {
		if line := fmt.Sprintf("%s %d\n", series, n); !strings.Contains(text, line) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(line))
		}
	}

	testkit.ReplaceFile(t, descFile, "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 5}\n")
	testkit.Eventually(t, "the removed rule's series gone", 5*time.Second, func() bool {
		return !strings.Contains(metricsText(t, p), `rule="header_match_path"`)
	})
	if text := metricsText(t, p); !strings.Contains(text, `leash_envoy_rule_hits_total{domain="edge",rule="remote_address"} 7`+"\n") {
		t.Error("the kept rule lost its counts on reload")
	}
}
