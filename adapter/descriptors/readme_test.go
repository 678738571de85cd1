package descriptors

import (
	"path/filepath"
	"slices"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

const (
	second = rlsv3.RateLimitResponse_RateLimit_SECOND
	minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour   = rlsv3.RateLimitResponse_RateLimit_HOUR
	day    = rlsv3.RateLimitResponse_RateLimit_DAY
)

// e builds entries from key, value pairs.
func e(kv ...string) []Entry {
	var out []Entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

// want describes the expected outcome of one match.
type want struct {
	none      bool // no rule applies
	rpu       int64
	unit      rlsv3.RateLimitResponse_RateLimit_Unit
	unlimited bool
	shadow    bool
	detailed  bool
	name      string
	replaces  []string
	path      string  // the rule's path, when checked
	entries   []Entry // Match.Entries, when they differ from the request
}

type matchCase struct {
	domain  string
	entries []Entry
	want    want
}

func checkMatches(t *testing.T, c *Config, cases []matchCase) {
	t.Helper()
	for _, tc := range cases {
		m, ok := c.Match(tc.domain, tc.entries)
		if tc.want.none {
			if ok {
				t.Errorf("Match(%s, %v) = rule at %s, want no match", tc.domain, tc.entries, m.Rule.Path)
			}
			continue
		}
		if !ok {
			t.Errorf("Match(%s, %v): no match", tc.domain, tc.entries)
			continue
		}
		r := m.Rule
		if r.Unlimited != tc.want.unlimited || r.ShadowMode != tc.want.shadow || r.DetailedMetric != tc.want.detailed {
			t.Errorf("Match(%s, %v): unlimited=%v shadow=%v detailed=%v, want %v %v %v", tc.domain, tc.entries,
				r.Unlimited, r.ShadowMode, r.DetailedMetric, tc.want.unlimited, tc.want.shadow, tc.want.detailed)
		}
		if tc.want.unlimited {
			if len(r.Limits) != 0 {
				t.Errorf("Match(%s, %v): unlimited rule has limits %v", tc.domain, tc.entries, r.Limits)
			}
		} else if len(r.Limits) != 1 || r.Limits[0].RequestsPerUnit != tc.want.rpu || r.Limits[0].Unit != tc.want.unit || r.Limits[0].Name != tc.want.name {
			t.Errorf("Match(%s, %v): limits %+v, want %d per %v named %q", tc.domain, tc.entries, r.Limits, tc.want.rpu, tc.want.unit, tc.want.name)
		}
		if !slices.Equal(r.Replaces, tc.want.replaces) {
			t.Errorf("Match(%s, %v): replaces %v, want %v", tc.domain, tc.entries, r.Replaces, tc.want.replaces)
		}
		if tc.want.path != "" && r.Path != tc.want.path {
			t.Errorf("Match(%s, %v): rule path %q, want %q", tc.domain, tc.entries, r.Path, tc.want.path)
		}
		wantEntries := tc.want.entries
		if wantEntries == nil {
			wantEntries = tc.entries
		}
		if !slices.Equal(m.Entries, wantEntries) {
			t.Errorf("Match(%s, %v): entries %v, want %v", tc.domain, tc.entries, m.Entries, wantEntries)
		}
		if r.Domain != tc.domain {
			t.Errorf("Match(%s, %v): rule domain %q", tc.domain, tc.entries, r.Domain)
		}
	}
}

// The README's examples load unchanged, all at once from their folder, and select
// the limits the README describes.
func TestReadmeExamples(t *testing.T) {
	c, err := Load("testdata/readme")
	if err != nil {
		t.Fatal(err)
	}
	wantDomains := []string{"edge_proxy_per_ip", "example6", "example7", "example8", "example9", "internal",
		"messaging", "mongo_cps", "rl", "share_threshold", "value_to_metric"}
	if got := c.Domains(); !slices.Equal(got, wantDomains) {
		t.Fatalf("Domains() = %v, want %v (the example4 subfolder must not load)", got, wantDomains)
	}
	if got := c.File("rl"); got != filepath.Join("testdata/readme", "rl.yaml") {
		t.Errorf("File(rl) = %q", got)
	}
	checkMatches(t, c, []matchCase{
		// Example 1.
		{"mongo_cps", e("database", "users"), want{rpu: 500, unit: second}},
		{"mongo_cps", e("database", "default"), want{rpu: 500, unit: second}},
		{"mongo_cps", e("database", "orders"), want{none: true}},
		{"mongo_cps", e("collection", "users"), want{none: true}},

		// Example 2: each number gets 5 marketing messages and 100 messages in all a day.
		{"messaging", e("message_type", "marketing", "to_number", "2061111111"), want{rpu: 5, unit: day}},
		{"messaging", e("message_type", "marketing", "to_number", "2062222222"), want{rpu: 5, unit: day}},
		{"messaging", e("to_number", "2061111111"), want{rpu: 100, unit: day}},
		{"messaging", e("to_number", "2062222222"), want{rpu: 100, unit: day}},
		{"messaging", e("message_type", "marketing"), want{none: true}}, // a placeholder
		{"messaging", e("message_type", "transactional", "to_number", "2061111111"), want{none: true}},

		// Example 3: the most specific match at the request's level wins.
		{"edge_proxy_per_ip", e("remote_address", "50.0.0.1"), want{rpu: 10, unit: second}},
		{"edge_proxy_per_ip", e("remote_address", "50.0.0.5"), want{rpu: 0, unit: second}},

		// Example 5.
		{"internal", e("ldap", "anything"), want{unlimited: true}},
		{"internal", e("azure", "anything"), want{rpu: 100, unit: minute}},
		{"internal", e("github", "anything"), want{none: true}},

		// Example 6.
		{"example6", e("service", "auth-service", "user", "user-a"), want{rpu: 10, unit: second, shadow: true}},
		{"example6", e("service", "auth-service", "user", "user-b"), want{rpu: 20, unit: second}},
		{"example6", e("service", "auth-service", "user", "user-c"), want{none: true}},

		// Example 7: each alone keeps its own limit (see TestReadmeReplaces for both).
		{"example7", e("key_1", "value_1", "user", "bkthomps"), want{rpu: 5, unit: second, name: "specific_limit"}},
		{"example7", e("key_2", "value_2", "user", "bkthomps"), want{rpu: 10, unit: second, replaces: []string{"specific_limit"}}},

		// Example 8.
		{"example8", e("key1", "unspecified_value"), want{rpu: 10, unit: minute, detailed: true}},
		{"example8", e("key1", "unspecified_value2"), want{rpu: 10, unit: minute, detailed: true}},
		{"example8", e("key1", "value1"), want{rpu: 20, unit: minute}},

		// Example 9: the wildcard matches; each value keeps its own counter.
		{"example9", e("key1", "value1"), want{rpu: 20, unit: minute}},
		{"example9", e("key1", "value2"), want{rpu: 20, unit: minute}},
		{"example9", e("key1", "value"), want{rpu: 20, unit: minute}},
		{"example9", e("key1", "other"), want{none: true}},

		// The demo's curl calls.
		{"rl", e("source_cluster", "proxy", "destination_cluster", "mock"), want{rpu: 1, unit: minute}},
		{"rl", e("foo", "foo"), want{rpu: 2, unit: minute}},
		{"rl", e("foo", "foo", "bar", "bar"), want{rpu: 3, unit: minute}},
		{"rl", e("foo", "foo", "baz", "baz"), want{rpu: 1, unit: second}},
		{"rl", e("foo", "foo", "bar", "banned"), want{rpu: 0, unit: minute}},
		{"rl", e("foo", "foo", "baz", "shady"), want{rpu: 1, unit: minute, shadow: true}},
		{"rl", e("foo", "foo", "baz", "not-so-shady"), want{rpu: 1, unit: second}},
		{"rl", e("foo", "foo", "bay", "x"), want{unlimited: true}},
		{"rl", e("qux", "x"), want{unlimited: true}},
		{"rl", e("foo", "foo", "other", "x"), want{none: true}},
		{"rl", e("source_cluster", "proxy"), want{none: true}},

		// share_threshold: all files share one counter.
		{"share_threshold", e("files", "files/a.pdf"), want{rpu: 100, unit: hour, entries: e("files", "files/*")}},
		{"share_threshold", e("files", "files/b.csv"), want{rpu: 100, unit: hour, entries: e("files", "files/*")}},
		{"share_threshold", e("files", "images/a.png"), want{none: true}},

		// value_to_metric changes metrics only.
		{"value_to_metric", e("route", "api", "http_method", "GET", "subject_id", "123"), want{rpu: 60, unit: minute}},
		{"value_to_metric", e("route", "api", "http_method", "GET"), want{none: true}},
	})

	// Example 4: the same two-entry request against each configuration.
	req := e("key", "value", "subkey", "subvalue")
	flat, err := Load("testdata/readme/example4/flat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkMatches(t, flat, []matchCase{
		{"example4", req, want{none: true}},
		{"example4", e("key", "value"), want{rpu: 300, unit: second}},
	})
	nested, err := Load("testdata/readme/example4/nested.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkMatches(t, nested, []matchCase{
		{"example4", req, want{rpu: 300, unit: second}},
		{"example4", e("key", "value"), want{none: true}},
	})
}

// effective applies replaces as a caller does: it drops the limits whose names another
// matched rule replaces, and returns the requests per unit of the limits left.
func effective(c *Config, domain string, descriptors ...[]Entry) []int64 {
	var rules []*Rule
	replaced := map[string]bool{}
	for _, d := range descriptors {
		if m, ok := c.Match(domain, d); ok {
			rules = append(rules, m.Rule)
			for _, name := range m.Rule.Replaces {
				replaced[name] = true
			}
		}
	}
	var out []int64
	for _, r := range rules {
		for _, l := range r.Limits {
			if l.Name == "" || !replaced[l.Name] {
				out = append(out, l.RequestsPerUnit)
			}
		}
	}
	return out
}

// README example 7: with both descriptors in one request only the replacing limit
// counts; each alone keeps its own.
func TestReadmeReplaces(t *testing.T) {
	c, err := Load("testdata/readme/example7.yaml")
	if err != nil {
		t.Fatal(err)
	}
	one := e("key_1", "value_1", "user", "bkthomps")
	two := e("key_2", "value_2", "user", "bkthomps")
	for _, tc := range []struct {
		descs [][]Entry
		want  []int64
	}{
		{[][]Entry{one}, []int64{5}},
		{[][]Entry{two}, []int64{10}},
		{[][]Entry{one, two}, []int64{10}},
	} {
		if got := effective(c, "example7", tc.descs...); !slices.Equal(got, tc.want) {
			t.Errorf("effective(%v) = %v, want %v", tc.descs, got, tc.want)
		}
	}
}

// The peer's unit_multiplier file loads as our extension of the same name.
func TestPeerUnitMultiplier(t *testing.T) {
	c, err := Load("testdata/peer/unit_multiplier.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key    string
		rpu    int64
		mult   int64
		window int64
	}{
		{"key1", 20, 5, 5 * 60_000},
		{"key2", 25, 1, 60_000},
	} {
		m, ok := c.Match("test-domain", e(tc.key, "v"))
		if !ok {
			t.Fatalf("%s: no match", tc.key)
		}
		l := m.Rule.Limits[0]
		if l.RequestsPerUnit != tc.rpu || l.UnitMultiplier != tc.mult || l.WindowMS != tc.window || l.Unit != minute {
			t.Errorf("%s: %+v", tc.key, l)
		}
	}
}
