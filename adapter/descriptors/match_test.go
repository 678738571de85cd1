package descriptors

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/leashd/leash/engine"
)

const matchYAML = `
domain: api
descriptors:
  # exact, wildcard and bare at one level
  - key: path
    value: /health
    rate_limit: {unit: second, requests_per_unit: 1}
  # wildcards: the first one listed that matches wins, so the narrow ones come first
  - key: path
    value: /api/v2/users/*/*
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: path
    value: /api/v2/*
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value: /api/v2/never*
    rate_limit: {unit: second, requests_per_unit: 9}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 5}

  # equally specific wildcards: the first defined wins
  - key: host
    value: a*
    rate_limit: {unit: second, requests_per_unit: 6}
  - key: host
    value: '*z'
    rate_limit: {unit: second, requests_per_unit: 7}
  - key: host
    value: '*'
    rate_limit: {unit: second, requests_per_unit: 8}

  # a node with its own limit and children
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 10}
      - key: plan
        value: free
        descriptors:
          - key: user
            rate_limit: {unit: minute, requests_per_unit: 1}

  # no backtracking: the exact tenant "acme" has no "region" child
  - key: org
    value: acme
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 1}
  - key: org
    descriptors:
      - key: region
        rate_limit: {unit: hour, requests_per_unit: 2}

  # shared and unshared wildcards on two levels
  - key: bucket
    value: shared-*
    share_threshold: true
    descriptors:
      - key: object
        value: 'img/*'
        rate_limit: {unit: hour, requests_per_unit: 50}
      - key: object
        value: 'doc/*'
        share_threshold: true
        rate_limit: {unit: hour, requests_per_unit: 60}
  - key: bucket
    value: own-*
    rate_limit: {unit: hour, requests_per_unit: 70}

  # unlimited, shadow mode, replaces
  - key: internal
    rate_limit: {unlimited: true, name: internal_pass}
  - key: canary
    shadow_mode: true
    detailed_metric: true
    rate_limit:
      unit: second
      requests_per_unit: 1
      name: canary_limit
      replaces: [{name: internal_pass}, {name: per_key}]

  # several limits, algorithms, windows
  - key: key
    rate_limits:
      - {unit: second, requests_per_unit: 10, name: per_key}
      - {unit: hour, requests_per_unit: 1000, algorithm: sliding_window}
      - {unit: minute, requests_per_unit: 500, algorithm: token_bucket, unit_multiplier: 15}
      - {unit: second, requests_per_unit: 10, algorithm: token_bucket}

  # a key with '*' is an ordinary key
  - key: 'star*'
    rate_limit: {unit: day, requests_per_unit: 9}
`

func TestMatch(t *testing.T) {
	c, err := loadString(t, matchYAML)
	if err != nil {
		t.Fatal(err)
	}
	checkMatches(t, c, []matchCase{
		// Exact beats wildcard beats bare; among wildcards the first listed wins.
		{"api", e("path", "/api/v2/neverland"), want{rpu: 3, unit: second}}, // /api/v2/* is listed first
		{"api", e("path", "/health"), want{rpu: 1, unit: second}},
		{"api", e("path", "/api/v1/x"), want{rpu: 2, unit: second}},
		{"api", e("path", "/api/v2/x"), want{rpu: 3, unit: second}},
		{"api", e("path", "/api/v2/users/42/photos"), want{rpu: 4, unit: second}},
		{"api", e("path", "/api/v2/users/42"), want{rpu: 3, unit: second}}, // needs two more slashes' worth
		{"api", e("path", "/api/"), want{rpu: 2, unit: second}},            // '*' matches nothing too
		{"api", e("path", "/api"), want{rpu: 5, unit: second}},
		{"api", e("path", "/other"), want{rpu: 5, unit: second}},
		{"api", e("path", ""), want{rpu: 5, unit: second}},
		{"api", e("host", "abz"), want{rpu: 6, unit: second}},
		{"api", e("host", "xyz"), want{rpu: 7, unit: second}},
		{"api", e("host", "xyq"), want{rpu: 8, unit: second}},
		{"api", e("host", ""), want{rpu: 8, unit: second}},

		// Depth must match.
		{"api", e("path", "/health", "user", "u"), want{none: true}},
		{"api", e("tenant", "t"), want{rpu: 100, unit: minute, path: "descriptors[9]"}},
		{"api", e("tenant", "t", "user", "u"), want{rpu: 10, unit: minute, path: "descriptors[9].descriptors[0]"}},
		{"api", e("tenant", "t", "user", "u", "device", "d"), want{none: true}},
		{"api", e("tenant", "t", "plan", "free"), want{none: true}}, // stops where there is no limit
		{"api", e("tenant", "t", "plan", "free", "user", "u"), want{rpu: 1, unit: minute}},
		{"api", e("tenant", "t", "plan", "paid", "user", "u"), want{none: true}},
		{"api", e("tenant", "t", "region", "eu"), want{none: true}},

		// No backtracking from the exact value to the bare key.
		{"api", e("org", "acme", "user", "u"), want{rpu: 1, unit: hour}},
		{"api", e("org", "other", "region", "eu"), want{rpu: 2, unit: hour}},
		{"api", e("org", "acme", "region", "eu"), want{none: true}},

		// share_threshold puts the pattern in place of the value, level by level.
		{"api", e("bucket", "shared-1", "object", "img/a.png"), want{rpu: 50, unit: hour,
			entries: e("bucket", "shared-*", "object", "img/a.png")}},
		{"api", e("bucket", "shared-2", "object", "doc/a.pdf"), want{rpu: 60, unit: hour,
			entries: e("bucket", "shared-*", "object", "doc/*")}},
		{"api", e("bucket", "own-1"), want{rpu: 70, unit: hour}},
		{"api", e("bucket", "shared-1"), want{none: true}},

		// Unlimited, shadow mode, replaces.
		{"api", e("internal", "x"), want{unlimited: true}},
		{"api", e("canary", "x"), want{rpu: 1, unit: second, shadow: true, detailed: true,
			name: "canary_limit", replaces: []string{"internal_pass", "per_key"}}},

		// Keys are literal.
		{"api", e("star*", "x"), want{rpu: 9, unit: day}},
		{"api", e("starfish", "x"), want{none: true}},

		// Unknown domains and empty requests match nothing.
		{"other", e("path", "/health"), want{none: true}},
		{"api", nil, want{none: true}},
	})

	m, ok := c.Match("api", e("internal", "x"))
	if !ok || m.Rule.Name != "internal_pass" {
		t.Errorf("unlimited rule name %q", m.Rule.Name)
	}

	m, ok = c.Match("api", e("key", "k"))
	if !ok {
		t.Fatal("key: no match")
	}
	wantLimits := []Limit{
		{Name: "per_key", Algorithm: engine.FixedWindow, RequestsPerUnit: 10, Unit: second, UnitMultiplier: 1, WindowMS: 1000},
		{Algorithm: engine.SlidingWindow, RequestsPerUnit: 1000, Unit: hour, UnitMultiplier: 1, WindowMS: 3_600_000},
		{Algorithm: engine.TokenBucket, RequestsPerUnit: 500, Unit: minute, UnitMultiplier: 15, WindowMS: 900_000},
		{Algorithm: engine.TokenBucket, RequestsPerUnit: 10, Unit: second, UnitMultiplier: 1, WindowMS: 1000},
	}
	if !slices.Equal(m.Rule.Limits, wantLimits) {
		t.Errorf("limits\n got %+v\nwant %+v", m.Rule.Limits, wantLimits)
	}
	if got := m.Rule.Descriptor; !slices.Equal(got, e("key", "")) {
		t.Errorf("descriptor %v", got)
	}
	m, _ = c.Match("api", e("tenant", "t", "plan", "free", "user", "u"))
	if got := m.Rule.Descriptor; !slices.Equal(got, e("tenant", "", "plan", "free", "user", "")) {
		t.Errorf("descriptor %v", got)
	}

	rules := c.Rules("api")
	if len(rules) != 21 {
		t.Errorf("%d rules", len(rules))
	}
	for _, r := range rules {
		if r.Domain != "api" || r.File == "" || r.Path == "" {
			t.Errorf("rule %+v", r)
		}
	}
	if c.Rules("nope") != nil {
		t.Error("rules of an unknown domain")
	}
}

// The request's entries are returned as they are unless a shared wildcard rewrites them,
// and a rewrite never touches the caller's slice.
func TestMatchEntriesNotModified(t *testing.T) {
	c, err := loadString(t, matchYAML)
	if err != nil {
		t.Fatal(err)
	}
	req := e("bucket", "shared-9", "object", "doc/x")
	orig := slices.Clone(req)
	m, ok := c.Match("api", req)
	if !ok || m.Entries[0].Value != "shared-*" || !slices.Equal(req, orig) {
		t.Errorf("got %v, request now %v", m.Entries, req)
	}
}

func TestMatchAllocations(t *testing.T) {
	c, err := loadString(t, matchYAML)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range [][]Entry{
		e("path", "/api/v2/users/42/photos"),
		e("tenant", "t", "plan", "free", "user", "u"),
		e("org", "acme", "region", "eu"),
		e("key", "k"),
	} {
		if n := testing.AllocsPerRun(100, func() { c.Match("api", req) }); n != 0 {
			t.Errorf("Match(%v) allocates %v times", req, n)
		}
	}
	var nilConfig *Config
	if _, ok := nilConfig.Match("api", e("a", "b")); ok {
		t.Error("nil config matched")
	}
}

func TestUnits(t *testing.T) {
	for _, tc := range []struct {
		name string
		unit rlsv3.RateLimitResponse_RateLimit_Unit
		ms   int64
	}{
		{"second", rlsv3.RateLimitResponse_RateLimit_SECOND, 1000},
		{"Minute", rlsv3.RateLimitResponse_RateLimit_MINUTE, 60_000},
		{"HOUR", rlsv3.RateLimitResponse_RateLimit_HOUR, 3_600_000},
		{"day", rlsv3.RateLimitResponse_RateLimit_DAY, 86_400_000},
		{"week", rlsv3.RateLimitResponse_RateLimit_WEEK, 7 * 86_400_000},
		{"month", rlsv3.RateLimitResponse_RateLimit_MONTH, 30 * 86_400_000},
		{"year", rlsv3.RateLimitResponse_RateLimit_YEAR, 365 * 86_400_000},
	} {
		u, ok := ParseUnit(tc.name)
		if !ok || u != tc.unit || UnitMS(u) != tc.ms {
			t.Errorf("ParseUnit(%q) = %v %v, UnitMS %d", tc.name, u, ok, UnitMS(u))
		}
		c, err := loadString(t, "domain: d\ndescriptors: [{key: k, rate_limit: {unit: "+tc.name+", requests_per_unit: 3}}]")
		if err != nil {
			t.Fatal(err)
		}
		m, _ := c.Match("d", e("k", "v"))
		if l := m.Rule.Limits[0]; l.Unit != tc.unit || l.WindowMS != tc.ms || l.UnitMultiplier != 1 || l.Algorithm != engine.FixedWindow {
			t.Errorf("%s: %+v", tc.name, l)
		}
	}
	for _, bad := range []string{"", "unknown", "seconds", "ſecond", "fortnight"} {
		if _, ok := ParseUnit(bad); ok {
			t.Errorf("ParseUnit(%q) ok", bad)
		}
	}
	if UnitMS(rlsv3.RateLimitResponse_RateLimit_UNKNOWN) != 0 || UnitMS(99) != 0 || UnitMS(-1) != 0 {
		t.Error("UnitMS of a bad unit")
	}
}

// unit_multiplier multiplies the unit; the longest windows allowed fit engine.MaxWindowMS.
func TestWindows(t *testing.T) {
	for _, tc := range []struct {
		unit string
		mult int64
		ms   int64
	}{
		{"second", 30, 30_000},
		{"minute", 5, 300_000},
		{"hour", 6, 21_600_000},
		{"day", 366, 31_622_400_000},
		{"week", 52, 52 * 604_800_000},
		{"month", 12, 12 * 2_592_000_000},
		{"year", 1, 31_536_000_000},
		{"second", engine.MaxWindowMS / 1000, engine.MaxWindowMS},
	} {
		y := "domain: d\ndescriptors: [{key: k, rate_limit: {unit: " + tc.unit + ", requests_per_unit: 1, unit_multiplier: " +
			strconv.FormatInt(tc.mult, 10) + "}}]"
		c, err := loadString(t, y)
		if err != nil {
			t.Errorf("%d %s: %v", tc.mult, tc.unit, err)
			continue
		}
		m, _ := c.Match("d", e("k", "v"))
		if l := m.Rule.Limits[0]; l.WindowMS != tc.ms || l.UnitMultiplier != tc.mult {
			t.Errorf("%d %s: %+v", tc.mult, tc.unit, l)
		}
	}
	if _, err := loadString(t, "domain: d\ndescriptors: [{key: k, rate_limit: {unit: day, requests_per_unit: 1, unit_multiplier: 367}}]"); err == nil {
		t.Error("367 days accepted")
	}
}

// A large file without aliases stays within the node budget, and matching stays cheap.
func TestLargeConfig(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: big\ndescriptors:\n")
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&b, "- {key: k, value: v%d, descriptors: [{key: u, rate_limits: [{unit: second, requests_per_unit: 1}, {unit: hour, requests_per_unit: 9}]}]}\n", i)
	}
	c, err := loadString(t, b.String())
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := c.Match("big", e("k", "v19999", "u", "x")); !ok || len(m.Rule.Limits) != 2 {
		t.Errorf("no match")
	}
}

func BenchmarkMatch(b *testing.B) {
	c, err := build([]source{{name: "match.yaml", data: []byte(matchYAML)}})
	if err != nil {
		b.Fatal(err)
	}
	req := e("tenant", "t", "plan", "free", "user", "u")
	wild := e("path", "/api/v2/users/42/photos")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.Match("api", req)
		c.Match("api", wild)
	}
}

// TestMissingRequestsPerUnitIsZero: a rate_limit without requests_per_unit blocks every
// request, as in the peer (spec §9.5).
func TestMissingRequestsPerUnitIsZero(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "z.yaml")
	if err := os.WriteFile(path, []byte("domain: d\ndescriptors:\n  - key: ip\n    rate_limit: {unit: minute}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := c.Match("d", []Entry{{Key: "ip", Value: "1.2.3.4"}})
	if !ok || len(m.Rule.Limits) != 1 || m.Rule.Limits[0].RequestsPerUnit != 0 || m.Rule.Limits[0].WindowMS != 60_000 {
		t.Fatalf("match = %+v, %v", m.Rule, ok)
	}
}

// TestMatchBucket: an RLQS bucket id is an unordered map; the tree's key order at each
// level orders it, and the same exact/wildcard/bare rules apply (spec §14.2).
func TestMatchBucket(t *testing.T) {
	c, err := loadString(t, matchYAML)
	if err != nil {
		t.Fatal(err)
	}
	b := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name    string
		bucket  map[string]string
		rpu     int64
		entries []Entry // nil: no match
	}{
		{"one entry, exact", b("path", "/health"), 1, e("path", "/health")},
		{"one entry, wildcard", b("path", "/api/v2/x"), 3, e("path", "/api/v2/x")},
		{"one entry, bare", b("path", "/other"), 5, e("path", "/other")},
		{"nested: tree order, not map order", b("user", "u", "tenant", "t"), 10, e("tenant", "t", "user", "u")},
		{"three levels", b("user", "u", "plan", "free", "tenant", "t"), 1, e("tenant", "t", "plan", "free", "user", "u")},
		{"shared wildcard", b("object", "doc/a.pdf", "bucket", "shared-2"), 60, e("bucket", "shared-*", "object", "doc/*")},
		{"an entry left over", b("path", "/health", "user", "u"), 0, nil},
		{"stops without a limit", b("tenant", "t", "plan", "free"), 0, nil},
		{"no backtracking", b("org", "acme", "region", "eu"), 0, nil},
		{"unknown key", b("nope", "x"), 0, nil},
		{"empty", b(), 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for range 5 { // map iteration order varies: the answer must not
				m, ok := c.MatchBucket("api", tc.bucket)
				if tc.entries == nil {
					if ok {
						t.Fatalf("matched %s", m.Rule.Path)
					}
					continue
				}
				if !ok {
					t.Fatal("no match")
				}
				if got := m.Rule.Limits[0].RequestsPerUnit; got != tc.rpu {
					t.Errorf("rpu %d, want %d", got, tc.rpu)
				}
				if !slices.Equal(m.Entries, tc.entries) {
					t.Errorf("entries %v, want %v", m.Entries, tc.entries)
				}
				// The same entries as a request descriptor select the same rule and counter.
				if r, ok := c.Match("api", tc.entries); !ok || r.Rule != m.Rule || !slices.Equal(r.Entries, m.Entries) {
					t.Errorf("Match of %v disagrees", tc.entries)
				}
			}
		})
	}
	if _, ok := c.MatchBucket("other", b("path", "/health")); ok {
		t.Error("unknown domain matched")
	}
	big := map[string]string{}
	for i := range MaxBucketEntries + 1 {
		big[strconv.Itoa(i)] = "v"
	}
	if _, ok := c.MatchBucket("api", big); ok {
		t.Error("an oversized bucket matched")
	}
}

// TestMatchBucketKeyOrder: where two keys of a bucket are both listed at a level, the
// one listed first in the file leads.
func TestMatchBucketKeyOrder(t *testing.T) {
	c, err := loadString(t, `
domain: d
descriptors:
  - key: b
    descriptors:
      - key: a
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 2}
`)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := c.MatchBucket("d", map[string]string{"a": "1", "b": "2"})
	if !ok || m.Rule.Limits[0].RequestsPerUnit != 1 || !slices.Equal(m.Entries, e("b", "2", "a", "1")) {
		t.Fatalf("got %v %v", ok, m.Entries)
	}
}
