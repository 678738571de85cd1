package descriptors

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// richResource and richFile say the same thing, as a resource and as a file.
func richResource(t testing.TB) *rlconf.RateLimitConfig {
	md, err := structpb.NewStruct(map[string]any{"team": "payments", "tier": 2.0, "tags": []any{"a", true}})
	if err != nil {
		t.Fatal(err)
	}
	return &rlconf.RateLimitConfig{Name: "edge-config", Domain: "edge", Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: "remote_address", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_SECOND, RequestsPerUnit: 10, Name: "per_ip"}, Metadata: md},
		{Key: "remote_address", Value: "10.0.0.1", RateLimit: &rlconf.RateLimitPolicy{Unlimited: true}},
		{Key: "path", Value: "/api/*", ShadowMode: true, QuotaMode: true, DetailedMetric: true,
			RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_HOUR, RequestsPerUnit: 0}},
		{Key: "user", Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "plan", Value: "free", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_MINUTE, RequestsPerUnit: 5,
				Replaces: []*rlconf.RateLimitReplace{{Name: "per_ip"}}}},
		}},
	}}
}

const richFile = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10, name: per_ip}
    metadata: {team: payments, tier: 2, tags: [a, true]}
  - key: remote_address
    value: 10.0.0.1
    rate_limit: {unlimited: true}
  - key: path
    value: /api/*
    shadow_mode: true
    quota_mode: true
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: user
    descriptors:
      - key: plan
        value: free
        rate_limit: {unit: minute, requests_per_unit: 5, replaces: [{name: per_ip}]}
`

// A resource builds the same rules as the file of the same content.
func TestFromResourcesMatchesFile(t *testing.T) {
	fromXDS, err := FromResources(richResource(t))
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := loadString(t, richFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := fromXDS.File("edge"); got != "xds:edge-config" {
		t.Errorf("File(edge) = %q", got)
	}
	x, f := fromXDS.Rules("edge"), fromFile.Rules("edge")
	if len(x) != len(f) || len(x) != 4 {
		t.Fatalf("%d rules from xDS, %d from the file", len(x), len(f))
	}
	for i := range x {
		a, b := *x[i], *f[i]
		a.File, b.File = "", ""
		if !proto.Equal(a.Metadata, b.Metadata) {
			t.Errorf("rule %d metadata %v, file %v", i, a.Metadata, b.Metadata)
		}
		a.Metadata, b.Metadata = nil, nil
		if !equalRules(&a, &b) {
			t.Errorf("rule %d:\nxDS  %+v\nfile %+v", i, a, b)
		}
	}
	m, ok := fromXDS.Match("edge", []Entry{{"user", "u1"}, {"plan", "free"}})
	if !ok || m.Rule.Limits[0].RequestsPerUnit != 5 {
		t.Errorf("Match = %+v, %v", m, ok)
	}
}

func equalRules(a, b *Rule) bool {
	return sprintRule(a) == sprintRule(b)
}

func sprintRule(r *Rule) string {
	var sb strings.Builder
	sb.WriteString(r.Domain + "|" + r.Path + "|" + r.MetricKey + "|" + r.Name)
	for _, e := range r.Descriptor {
		sb.WriteString("|" + e.Key + "=" + e.Value)
	}
	for _, l := range r.Limits {
		sb.WriteString("|" + l.Name + ":" + l.Algorithm.String() + ":" + l.Unit.String() + ":" +
			itoa(l.RequestsPerUnit) + ":" + itoa(l.WindowMS))
	}
	sb.WriteString("|" + strings.Join(r.Replaces, ","))
	for _, b := range []bool{r.Unlimited, r.ShadowMode, r.QuotaMode, r.DetailedMetric, r.ValueToMetric} {
		if b {
			sb.WriteString("|t")
		} else {
			sb.WriteString("|f")
		}
	}
	return sb.String()
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// An invalid resource fails with the error the file of the same content gives, naming the
// resource instead of the file and no line.
func TestFromResourcesErrorsAsFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		rc   *rlconf.RateLimitConfig
		file string
	}{
		{"no unit", &rlconf.RateLimitConfig{Name: "r", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "k", RateLimit: &rlconf.RateLimitPolicy{RequestsPerUnit: 1}}}},
			"domain: d\ndescriptors: [{key: k, rate_limit: {requests_per_unit: 1}}]"},
		{"too many requests", &rlconf.RateLimitConfig{Name: "r", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "k", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_SECOND, RequestsPerUnit: 4_000_000_000}}}},
			"domain: d\ndescriptors: [{key: k, rate_limit: {unit: SECOND, requests_per_unit: 4000000000}}]"},
		{"unknown replaces", &rlconf.RateLimitConfig{Name: "r", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "k", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_SECOND, Replaces: []*rlconf.RateLimitReplace{{Name: "nope"}}}}}},
			"domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 0, replaces: [{name: nope}]}}]"},
		{"no domain", &rlconf.RateLimitConfig{Name: "r"}, "domain: ''"},
		{"bad domain", &rlconf.RateLimitConfig{Name: "r", Domain: "no\ttabs"}, "domain: \"no\\ttabs\""},
		{"duplicate descriptor", &rlconf.RateLimitConfig{Name: "r", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "k", Value: "v"}, {Key: "k", Value: "v"}}},
			"domain: d\ndescriptors: [{key: k, value: v}, {key: k, value: v}]"},
		{"no key", &rlconf.RateLimitConfig{Name: "r", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{{Value: "v"}}},
			"domain: d\ndescriptors: [{key: '', value: v}]"},
		{"unlimited with a limit", &rlconf.RateLimitConfig{Name: "r", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "k", RateLimit: &rlconf.RateLimitPolicy{Unlimited: true, Unit: rlconf.RateLimitUnit_SECOND}}}},
			"domain: d\ndescriptors: [{key: k, rate_limit: {unlimited: true, unit: second}}]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, xerr := FromResources(tc.rc)
			_, ferr := loadString(t, tc.file)
			if xerr == nil || ferr == nil {
				t.Fatalf("xDS error %v, file error %v; want both", xerr, ferr)
			}
			if !strings.HasPrefix(xerr.Error(), "xds:r: ") {
				t.Errorf("xDS error %q does not start with the resource", xerr)
			}
			strip := regexp.MustCompile(`(?m)^\S*?config\.yaml(:\d+)?: `)
			if got, want := strings.ReplaceAll(xerr.Error(), "xds:r: ", ""), strip.ReplaceAllString(ferr.Error(), ""); got != want {
				t.Errorf("xDS error %q\nfile error %q", got, want)
			}
		})
	}
}

// Merge refuses a domain from two sources as Load refuses one in two files.
func TestMergeRefusesDuplicateDomain(t *testing.T) {
	files, err := loadString(t, "domain: edge\n")
	if err != nil {
		t.Fatal(err)
	}
	xds, err := FromResources(&rlconf.RateLimitConfig{Name: "mine", Domain: "edge"}, &rlconf.RateLimitConfig{Name: "other", Domain: "other"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Merge(files, xds)
	if err == nil || !strings.Contains(err.Error(), `xds:mine: domain: duplicate domain "edge": `+files.File("edge")+" defines it too") {
		t.Errorf("Merge = %v", err)
	}
	ok, err := Merge(files, nil, mustResources(t, &rlconf.RateLimitConfig{Domain: "api"}))
	if err != nil || strings.Join(ok.Domains(), ",") != "api,edge" {
		t.Errorf("Merge = %v, %v", ok.Domains(), err)
	}
	if c, err := Merge(nil, nil); c != nil || err != nil {
		t.Errorf("Merge(nil, nil) = %v, %v", c, err)
	}
}

func mustResources(t *testing.T, rcs ...*rlconf.RateLimitConfig) *Config {
	t.Helper()
	c, err := FromResources(rcs...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
