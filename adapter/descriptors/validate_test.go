package descriptors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// writeFile writes content to dir/name and returns the path.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadString loads content as one file.
func loadString(t testing.TB, content string) (*Config, error) {
	t.Helper()
	return Load(writeFile(t, t.TempDir(), "config.yaml", content))
}

// Every validation error names the file and the path inside it.
func TestValidationErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		path string // the path the error must name ("" for the whole file)
		msg  string // a part of the message
	}{
		{"unknown unit, nested", `
domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
      - key: c
        rate_limit: {unit: fortnight, requests_per_unit: 1}
`, "descriptors[0].descriptors[1].rate_limit.unit", `unknown unit "fortnight"`},
		{"unit UNKNOWN", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: unknown, requests_per_unit: 1}}]",
			"descriptors[0].rate_limit.unit", `unknown unit "unknown"`},
		{"unit missing", "domain: d\ndescriptors: [{key: a, rate_limit: {requests_per_unit: 1}}]",
			"descriptors[0].rate_limit", "unit is required"},
		{"unit not a string", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: [second], requests_per_unit: 1}}]",
			"descriptors[0].rate_limit.unit", "must be a string, not a list"},
		{"unit missing", "domain: d\ndescriptors: [{key: a, rate_limit: {requests_per_unit: 1}}]",
			"descriptors[0].rate_limit", "unit"},
		{"requests_per_unit a word", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: ten}}]",
			"descriptors[0].rate_limit.requests_per_unit", `must be an integer, not "ten"`},
		{"requests_per_unit quoted", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: \"10\"}}]",
			"descriptors[0].rate_limit.requests_per_unit", "must be an integer"},
		{"requests_per_unit float", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1.5}}]",
			"descriptors[0].rate_limit.requests_per_unit", "must be an integer"},
		{"requests_per_unit negative", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: -1}}]",
			"descriptors[0].rate_limit.requests_per_unit", "out of range"},
		{"requests_per_unit too big", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1000000001}}]",
			"descriptors[0].rate_limit.requests_per_unit", "out of range"},
		{"requests_per_unit overflows", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 99999999999999999999}}]",
			"descriptors[0].rate_limit.requests_per_unit", "99999999999999999999 is out of range"},
		{"duplicate key and value", `
domain: d
descriptors:
  - key: a
    value: x
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    value: x
    rate_limit: {unit: minute, requests_per_unit: 1}
`, "descriptors[1]", `duplicate descriptor: key "a" value "x" is already defined at descriptors[0]`},
		{"duplicate bare key, nested", `
domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
      - key: b
`, "descriptors[0].descriptors[1]", `key "b" with no value is already defined at descriptors[0].descriptors[0]`},
		{"duplicate wildcard", "domain: d\ndescriptors: [{key: a, value: 'x*'}, {key: a, value: 'x*'}]",
			"descriptors[1]", "duplicate descriptor"},
		{"empty value is the bare key", "domain: d\ndescriptors: [{key: a}, {key: a, value: ''}]",
			"descriptors[1]", "duplicate descriptor"},
		{"empty domain", "domain: ''\ndescriptors: []", "domain", "a domain is required"},
		{"missing domain", "descriptors: [{key: a}]", "domain", "a domain is required"},
		{"empty file", "", "domain", "a domain is required"},
		{"domain with a control character", "domain: \"my\\tdomain\"\n", "domain", "not a valid domain"},
		{"domain too long", "domain: " + strings.Repeat("d", 257) + "\n", "domain", "not a valid domain"},
		{"domain a list", "domain: [a]\n", "domain", "must be a string, not a list"},
		{"unlimited with unit", "domain: d\ndescriptors: [{key: a, rate_limit: {unlimited: true, unit: second}}]",
			"descriptors[0].rate_limit.unit", "must not be given with unlimited: true"},
		{"unlimited with requests_per_unit", "domain: d\ndescriptors: [{key: a, rate_limit: {unlimited: true, requests_per_unit: 0}}]",
			"descriptors[0].rate_limit.requests_per_unit", "must not be given with unlimited: true"},
		{"unlimited not a bool", "domain: d\ndescriptors: [{key: a, rate_limit: {unlimited: sometimes}}]",
			"descriptors[0].rate_limit.unlimited", `must be true or false, not "sometimes"`},
		{"replaces an unknown name", `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, name: first}
  - key: b
    rate_limit:
      unit: second
      requests_per_unit: 1
      replaces: [{name: first}, {name: frist}]
`, "descriptors[1].rate_limit.replaces[1].name", `no rate limit named "frist" in domain "d"`},
		{"replaces defined later is fine, unknown is not", `
domain: d
descriptors:
  - key: b
    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: later}]}
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, name: later, replaces: [{name: nope}]}
`, "descriptors[1].rate_limit.replaces[0].name", `no rate limit named "nope"`},
		{"replaces with an empty name", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}}]",
			"descriptors[0].rate_limit.replaces[0]", "a replaces entry needs a name"},
		{"replaces itself", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1, name: me, replaces: [{name: me}]}}]",
			"descriptors[0].rate_limit.replaces[0].name", "cannot replace itself"},
		{"replaces entry with an unknown key", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1, replaces: [{nam: x}]}}]",
			"descriptors[0].rate_limit.replaces[0].nam", `unknown key "nam"`},
		{"descriptor without key", "domain: d\ndescriptors: [{key: a}, {value: b, rate_limit: {unit: second, requests_per_unit: 1}}]",
			"descriptors[1]", "key is required"},
		{"descriptor with empty key", "domain: d\ndescriptors: [{key: ''}]", "descriptors[0]", "key is required"},
		{"key not a string", "domain: d\ndescriptors: [{key: {a: b}}]", "descriptors[0].key", "must be a string, not a mapping"},
		{"unknown top-level key", "domain: d\ndescriptor: []", "descriptor", `unknown key "descriptor"`},
		{"descriptor key at top level", "domain: d\nkey: a", "key", "belongs in an entry of descriptors"},
		{"unknown descriptor key", "domain: d\ndescriptors: [{key: a, rate_limt: {}}]", "descriptors[0].rate_limt", `unknown key "rate_limt"`},
		{"limit key on the descriptor", "domain: d\ndescriptors: [{key: a, unit: second}]", "descriptors[0].unit", "belongs inside rate_limit"},
		{"shadow_mode inside rate_limit", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1, shadow_mode: true}}]",
			"descriptors[0].rate_limit.shadow_mode", "belongs on the descriptor, beside rate_limit"},
		{"quota_mode not a boolean", "domain: d\ndescriptors: [{key: a, quota_mode: yes please}]", "descriptors[0].quota_mode", "must be true or false"},
		{"metadata a list", "domain: d\ndescriptors: [{key: a, metadata: [x]}]", "descriptors[0].metadata", "must be a mapping"},
		{"quota_mode inside rate_limit", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1, quota_mode: true}}]", "descriptors[0].rate_limit.quota_mode", "belongs on the descriptor"},
		{"duplicate mapping key", "domain: d\ndescriptors:\n  - key: a\n    key: b\n", "descriptors[0].key", `duplicate key "key"`},
		{"descriptors a mapping", "domain: d\ndescriptors: {key: a}", "descriptors", "must be a list, not a mapping"},
		{"descriptor a string", "domain: d\ndescriptors: [a]", "descriptors[0]", `must be a mapping, not "a"`},
		{"rate_limit a list", "domain: d\ndescriptors: [{key: a, rate_limit: [1]}]", "descriptors[0].rate_limit", "must be a mapping"},
		{"shadow_mode not a bool", "domain: d\ndescriptors: [{key: a, shadow_mode: maybe}]", "descriptors[0].shadow_mode", "must be true or false"},
		{"detailed_metric not a bool", "domain: d\ndescriptors: [{key: a, detailed_metric: [x]}]", "descriptors[0].detailed_metric", "must be true or false"},
		{"share_threshold without a wildcard", "domain: d\ndescriptors: [{key: a, value: b, share_threshold: true}]",
			"descriptors[0].share_threshold", "needs a wildcard value"},
		{"share_threshold on a bare key", "domain: d\ndescriptors: [{key: a, share_threshold: true}]",
			"descriptors[0].share_threshold", "needs a wildcard value"},
		{"algorithm concurrent_limit", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1, algorithm: concurrent_limit}}]",
			"descriptors[0].rate_limit.algorithm", "concurrent_limit is a lease kind"},
		{"algorithm unknown", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky_bucket}}]",
			"descriptors[0].rate_limit.algorithm", `unknown algorithm "leaky_bucket"`},
		{"unit_multiplier zero", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: 0}}]",
			"descriptors[0].rate_limit.unit_multiplier", "must be at least 1"},
		{"unit_multiplier negative", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: -3}}]",
			"descriptors[0].rate_limit.unit_multiplier", "must be at least 1"},
		{"unit_multiplier a float", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: 2.5}}]",
			"descriptors[0].rate_limit.unit_multiplier", "must be an integer"},
		{"window of two years", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: year, requests_per_unit: 1, unit_multiplier: 2}}]",
			"descriptors[0].rate_limit.unit_multiplier", "a window of 2 years is longer than the maximum of 366 days"},
		{"window of 13 months", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: month, requests_per_unit: 1, unit_multiplier: 13}}]",
			"descriptors[0].rate_limit.unit_multiplier", "longer than the maximum"},
		{"window overflowing int64", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: week, requests_per_unit: 1, unit_multiplier: 9223372036854775807}}]",
			"descriptors[0].rate_limit.unit_multiplier", "longer than the maximum"},
		{"rate_limit and rate_limits", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1}, rate_limits: [{unit: hour, requests_per_unit: 9}]}]",
			"descriptors[0]", "has both rate_limit and rate_limits"},
		{"rate_limits empty", "domain: d\ndescriptors: [{key: a, rate_limits: []}]", "descriptors[0].rate_limits", "at least one"},
		{"rate_limits with 9 entries", "domain: d\ndescriptors: [{key: a, rate_limits: [" +
			"{unit: second, requests_per_unit: 1}, {unit: minute, requests_per_unit: 1}, {unit: hour, requests_per_unit: 1}, " +
			"{unit: day, requests_per_unit: 1}, {unit: week, requests_per_unit: 1}, {unit: month, requests_per_unit: 1}, " +
			"{unit: year, requests_per_unit: 1}, {unit: second, requests_per_unit: 1, unit_multiplier: 2}, " +
			"{unit: second, requests_per_unit: 1, unit_multiplier: 3}]}]",
			"descriptors[0].rate_limits", "at most 8 apply"},
		{"rate_limits a mapping", "domain: d\ndescriptors: [{key: a, rate_limits: {unit: hour}}]", "descriptors[0].rate_limits", "must be a list"},
		{"rate_limits same algorithm and window", `
domain: d
descriptors:
  - key: a
    rate_limits:
      - {unit: minute, requests_per_unit: 10, unit_multiplier: 60}
      - {unit: hour, requests_per_unit: 20}
`, "descriptors[0].rate_limits[1]", "same algorithm and window as descriptors[0].rate_limits[0]"},
		{"rate_limits entry with unlimited", "domain: d\ndescriptors: [{key: a, rate_limits: [{unlimited: true}]}]",
			"descriptors[0].rate_limits[0].unlimited", "unlimited goes in rate_limit"},
		{"rate_limits entry with a bad unit", "domain: d\ndescriptors: [{key: a, rate_limits: [{unit: hour, requests_per_unit: 1}, {unit: hours, requests_per_unit: 1}]}]",
			"descriptors[0].rate_limits[1].unit", `unknown unit "hours"`},
		{"YAML syntax", "domain: d\ndescriptors:\n  - key: a\n   value: b\n", "", "did not find expected"},
		{"two documents", "domain: a\n---\ndomain: b\n", "", "more than one YAML document"},
		{"top level a list", "- domain: d\n", "", "must be a mapping, not a list"},
		{"non-string key", "domain: d\n? [a]\n: b\n", "", "has a key that is a list"},
		{"alias bomb", aliasBomb(), "", "too many YAML nodes"},
		{"merge cycle", "domain: d\ndescriptors: [{key: a, rate_limit: &r {<<: *r}}]", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := writeFile(t, dir, "ratelimit/config.yaml", tc.yaml)
			c, err := Load(file)
			if err == nil {
				t.Fatalf("Load succeeded with domains %v; want an error", c.Domains())
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			prefix := regexp.QuoteMeta(file) + `(:[1-9][0-9]*)?: `
			if tc.path != "" {
				prefix += regexp.QuoteMeta(tc.path) + ": "
			}
			re := regexp.MustCompile("^" + prefix)
			found := false
			for _, line := range strings.Split(err.Error(), "\n") {
				if re.MatchString(line) && strings.Contains(line, tc.msg) {
					found = true
				}
			}
			if !found {
				t.Errorf("error %q\nwant a line starting %q containing %q", err, prefix, tc.msg)
			}
		})
	}
}

// aliasBomb nests aliases so that expanding them would visit billions of nodes.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "  - key: a%d\n    descriptors: &a%d [", i, i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			if i == 0 {
				fmt.Fprintf(&b, "{key: k%d}", j)
			} else {
				fmt.Fprintf(&b, "{key: k%d, descriptors: *a%d}", j, i-1)
			}
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// The example error from the package documentation, word for word.
func TestErrorFormat(t *testing.T) {
	e := &Error{File: "ratelimit/config.yaml", Line: 9, Path: "descriptors[0].descriptors[1].rate_limit.unit", Msg: `unknown unit "fortnight"`}
	if got, want := e.Error(), `ratelimit/config.yaml:9: descriptors[0].descriptors[1].rate_limit.unit: unknown unit "fortnight"`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := (&Error{File: "f.yaml", Msg: "m"}).Error(); got != "f.yaml: m" {
		t.Errorf("got %q", got)
	}
	if got := (&Error{File: "f.yaml", Line: 7, Path: "domain", Msg: "m"}).Error(); got != "f.yaml:7: domain: m" {
		t.Errorf("got %q", got)
	}
}

// Errors name the YAML line of the path they report: the key's own line, a list item's
// line, or the nearest enclosing one for a key that is missing.
func TestErrorLines(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		line       int
		path       string
	}{
		{"bad unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n", 5, "descriptors[0].rate_limit.unit"},
		{"missing unit", "domain: d\ndescriptors:\n  - key: a\n  - key: b\n    rate_limit:\n      requests_per_unit: 1\n", 5, "descriptors[1].rate_limit"},
		{"missing key", "domain: d\ndescriptors:\n  - key: a\n  - value: b\n", 4, "descriptors[1]"},
		{"duplicate key", "domain: d\ndescriptors:\n  - key: a\n    key: b\n", 4, "descriptors[0].key"},
		{"missing domain", "\n\ndescriptors: []\n", 3, "domain"},
		{"YAML syntax", "domain: d\ndescriptors:\n  - key: a\n   - key: b\n", 4, ""}, // the line at fault (the YAML library says 2)
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadString(t, tc.yaml)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if e.Line != tc.line || e.Path != tc.path {
				t.Errorf("error %q at line %d path %q, want line %d path %q", err, e.Line, e.Path, tc.line, tc.path)
			}
		})
	}
}

// Several problems are reported together, up to a bound.
func TestManyErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := 0; i < 30; i++ {
		b.WriteString("  - {key: a, rate_limit: {unit: nope, requests_per_unit: 1}}\n")
	}
	_, err := loadString(t, b.String())
	if err == nil {
		t.Fatal("no error")
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != maxErrors {
		t.Errorf("%d errors reported, want %d:\n%v", n, maxErrors, err)
	}
}

// Keys are strict, but the peer's optional keys and YAML conveniences are accepted.
func TestAccepted(t *testing.T) {
	c, err := loadString(t, `
domain: d
defaults: &limit
  unit: MINUTE
  requests_per_unit: 7
descriptors:
  - key: a
    value: 1          # a number read as the string "1"
    shadow_mode: yes   # YAML 1.1 booleans, as the peer's parser reads them
    detailed_metric: off
    value_to_metric: true
    rate_limit:
      <<: *limit
      name: ~
  - key: b
    value: ~
    descriptors: ~
    rate_limit: ~
  - key: c
    rate_limit:
      unit: Hour
      requests_per_unit: 0x10
`)
	if err == nil {
		t.Fatal("the unknown key 'defaults' was accepted")
	}
	if !strings.Contains(err.Error(), `defaults: unknown key "defaults"`) {
		t.Fatal(err)
	}
	// Anchors must live somewhere the format allows; a merge from an earlier descriptor works.
	c, err = loadString(t, `
domain: d
descriptors:
  - key: base
    rate_limit: &limit
      unit: MINUTE
      requests_per_unit: 7
  - key: a
    value: 1
    shadow_mode: yes
    detailed_metric: off
    value_to_metric: true
    rate_limit:
      <<: *limit
      requests_per_unit: 8
      name: ~
  - key: b
    value: ~
    descriptors: ~
    rate_limit: ~
  - key: c
    rate_limit:
      unit: Hour
      requests_per_unit: 0x10
`)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := c.Match("d", e("a", "1"))
	if !ok || !m.Rule.ShadowMode || m.Rule.DetailedMetric || !m.Rule.ValueToMetric || m.Rule.Limits[0].RequestsPerUnit != 8 || m.Rule.Limits[0].Unit != minute {
		t.Errorf("a: %+v %v", m.Rule, ok)
	}
	if _, ok := c.Match("d", e("b", "x")); ok {
		t.Error("b has no limit but matched")
	}
	if m, ok := c.Match("d", e("c", "x")); !ok || m.Rule.Limits[0].RequestsPerUnit != 16 || m.Rule.Limits[0].Unit != hour {
		t.Errorf("c: %+v %v", m.Rule, ok)
	}
}
