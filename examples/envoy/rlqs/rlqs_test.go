// Tests of the RLQS example: the bootstrap is valid Envoy v3 configuration for the
// go-control-plane envoy v1.40.0 protos (every typed_config unpacked and validated),
// broken copies are caught, and the bucket ids its matchers build select the intended
// rules of quota.yaml through Leash's own bucket matching (spec §14.2).
package rlqs_test

import (
	"slices"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	rlqsfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/config"
	"github.com/leashd/leash/testkit/envoycheck"
)

func readDoc(t *testing.T, path string) any {
	t.Helper()
	docs, err := envoycheck.ReadYAML(path)
	if err != nil || len(docs) != 1 {
		t.Fatalf("%s: %v (%d documents)", path, err, len(docs))
	}
	return docs[0]
}

func checkBootstrap(doc any) (*bootstrapv3.Bootstrap, error) {
	b := &bootstrapv3.Bootstrap{}
	if err := envoycheck.Unmarshal(doc, b); err != nil {
		return nil, err
	}
	return b, envoycheck.Validate(b)
}

// filterConfig returns the rate_limit_quota filter's config.
func filterConfig(t *testing.T, b *bootstrapv3.Bootstrap) *rlqsfilter.RateLimitQuotaFilterConfig {
	t.Helper()
	hcm := &hcmv3.HttpConnectionManager{}
	if err := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	for _, f := range hcm.GetHttpFilters() {
		if f.GetName() == "envoy.filters.http.rate_limit_quota" {
			c := &rlqsfilter.RateLimitQuotaFilterConfig{}
			if err := f.GetTypedConfig().UnmarshalTo(c); err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
	t.Fatal("no rate_limit_quota filter")
	return nil
}

var filterPath = []any{"static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config", "http_filters", 0, "typed_config"}

func at(more ...any) []any { return append(slices.Clone(filterPath), more...) }

// TestBootstrap: envoy.yaml is valid, and each broken copy fails with its own error.
func TestBootstrap(t *testing.T) {
	b, err := checkBootstrap(readDoc(t, "envoy.yaml"))
	if err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	c := filterConfig(t, b)
	if c.GetDomain() != "quota" || c.GetRlqsServer().GetEnvoyGrpc().GetClusterName() != "leash" {
		t.Errorf("filter: domain %q, server %v", c.GetDomain(), c.GetRlqsServer())
	}
	matchers := at("bucket_matchers", "matcher_list", "matchers", 0)
	settings := append(slices.Clone(matchers), "on_match", "action", "typed_config")
	for _, tc := range []struct {
		name string
		p    []any
		v    any
		want string
	}{
		{"unknown field in the filter", at("domian"), "x", "unknown field"},
		{"unknown field in bucket settings", append(slices.Clone(settings), "reporting_intervall"), "1s", "unknown field"},
		{"unknown bucket settings type", append(slices.Clone(settings), "@type"), "type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettingz", "RateLimitQuotaBucketSettingz"},
		{"zero reporting interval", append(slices.Clone(settings), "reporting_interval"), "0s", "ReportingInterval"},
		{"unknown header input field", append(slices.Clone(matchers), "predicate", "single_predicate", "input", "typed_config", "header"), "x", "unknown field"},
	} {
		doc := readDoc(t, "envoy.yaml")
		if err := envoycheck.Set(doc, tc.v, tc.p...); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, err := checkBootstrap(doc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// buckets returns the bucket ids the filter's matchers build, with value for every
// custom_value (the request header).
func buckets(t *testing.T, c *rlqsfilter.RateLimitQuotaFilterConfig, value string) []map[string]string {
	t.Helper()
	var actions []*anypb.Any
	for _, m := range c.GetBucketMatchers().GetMatcherList().GetMatchers() {
		actions = append(actions, m.GetOnMatch().GetAction().GetTypedConfig())
	}
	actions = append(actions, c.GetBucketMatchers().GetOnNoMatch().GetAction().GetTypedConfig())
	var out []map[string]string
	for _, a := range actions {
		s := &rlqsfilter.RateLimitQuotaBucketSettings{}
		if err := a.UnmarshalTo(s); err != nil {
			t.Fatal(err)
		}
		id := map[string]string{}
		for k, v := range s.GetBucketIdBuilder().GetBucketIdBuilder() {
			if v.GetCustomValue() != nil {
				id[k] = value
			} else {
				id[k] = v.GetStringValue()
			}
		}
		out = append(out, id)
	}
	return out
}

// TestBucketsMatchRules: the per-user bucket selects 600 per 10 s, the anonymous one 100
// per minute, and leash.yaml maps the domain to its account.
func TestBucketsMatchRules(t *testing.T) {
	b, err := checkBootstrap(readDoc(t, "envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := filterConfig(t, b)
	d, err := descriptors.Load("quota.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		rpu, windowMS int64
		entries       []descriptors.Entry
	}{
		{600, 10_000, []descriptors.Entry{{Key: "api", Value: "search"}, {Key: "user_id", Value: "alice"}}},
		{100, 60_000, []descriptors.Entry{{Key: "api", Value: "search"}, {Key: "anonymous", Value: "true"}}},
	}
	bs := buckets(t, c, "alice")
	if len(bs) != len(want) {
		t.Fatalf("%d buckets, want %d", len(bs), len(want))
	}
	for i, id := range bs {
		m, ok := d.MatchBucket(c.GetDomain(), id)
		if !ok {
			t.Errorf("bucket %v matches no rule", id)
			continue
		}
		if l := m.Rule.Limits[0]; l.RequestsPerUnit != want[i].rpu || l.WindowMS != want[i].windowMS || !slices.Equal(m.Entries, want[i].entries) {
			t.Errorf("bucket %v: %d per %d ms as %v", id, l.RequestsPerUnit, l.WindowMS, m.Entries)
		}
	}
	cfg, err := config.Load([]string{"leash.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Envoy.Domains[c.GetDomain()].Account != "acme" || !slices.Contains(cfg.Envoy.ConfigPaths, "/etc/leash/quota.yaml") {
		t.Errorf("leash.yaml: domains %v, config_paths %v", cfg.Envoy.Domains, cfg.Envoy.ConfigPaths)
	}
	compose := readDoc(t, "docker-compose.yaml")
	mounts, _ := compose.(map[string]any)["services"].(map[string]any)["leash"].(map[string]any)["volumes"].([]any)
	if !slices.Contains(mounts, any("./quota.yaml:/etc/leash/quota.yaml:ro")) {
		t.Errorf("compose does not mount quota.yaml: %v", mounts)
	}
}
