package descriptors

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// seedFiles are the YAML files under testdata, as fuzz seeds.
func seedFiles(f *testing.F) [][]byte {
	var out [][]byte
	filepath.WalkDir("testdata", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") {
			data, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			out = append(out, data)
		}
		return nil
	})
	return out
}

// FuzzLoad checks the loader on any file:
//
//   - a file that does not load fails with at most maxErrors *Error values, each naming
//     the file and a path that is a place in a descriptor file (or none, for the whole
//     file);
//   - a file that loads has limits with windows of unit × multiplier, and loads the
//     same a second time;
//   - written back as plain YAML (aliases and merge keys expanded, defaults dropped) it
//     loads again to the same domain;
//   - Match agrees with refMatch, the documented rule, on requests made from every
//     rule's own descriptor, and a descriptor of exact values finds its own rule.
func FuzzLoad(f *testing.F) {
	for _, data := range seedFiles(f) {
		f.Add(data)
	}
	f.Add([]byte(matchYAML))
	f.Add([]byte(aliasBomb()))
	f.Add([]byte("domain: d\ndescriptors: &d [{key: a, descriptors: *d}]"))
	f.Add([]byte("domain: d\ndescriptors: [{key: a, rate_limit: &r {<<: *r}}]"))
	f.Add([]byte("domain: d\ndescriptors: [{key: a, value: '**x*', share_threshold: true, rate_limits: [{unit: week, requests_per_unit: 1}]}]"))
	f.Add([]byte("domain: d\nx: &l {unit: second, requests_per_unit: 5}\n"))
	f.Add([]byte("domain: d\ndescriptors:\n- {key: a, rate_limit: &l {unit: Second, requests_per_unit: 0x10, name: n}}\n- {key: b, rate_limit: {<<: *l, name: m, replaces: [{name: n}]}}\n"))
	f.Add([]byte("domain: d\ndescriptors: [{key: k, value: \"a\\tb\\u00e9\", rate_limit: {unlimited: true, name: u}}, {key: '<<', value: '*', rate_limit: {unit: year}}]"))
	f.Add([]byte("\xff\xfe"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkLoad(t, data)
	})
}

// checkLoad checks the properties of FuzzLoad on one file and returns its config, or
// nil when it does not load.
func checkLoad(t *testing.T, data []byte) *Config {
	c, err := build([]source{{name: "fuzz.yaml", data: data}})
	if err != nil {
		if why := checkLoadErrors(err, "fuzz.yaml"); why != "" {
			t.Fatal(why)
		}
		return nil
	}
	for _, d := range c.Domains() {
		for _, r := range c.Rules(d) {
			if !r.Unlimited && len(r.Limits) == 0 {
				t.Fatalf("rule %s has no limits", r.Path)
			}
			for _, l := range r.Limits {
				if l.WindowMS != UnitMS(l.Unit)*l.UnitMultiplier || l.WindowMS <= 0 {
					t.Fatalf("rule %s: bad window %+v", r.Path, l)
				}
			}
		}
	}
	dom := c.domains[c.names[0]]
	want := dumpDomain(dom)
	c2, err := build([]source{{name: "fuzz.yaml", data: data}})
	if err != nil || dumpDomain(c2.domains[c2.names[0]]) != want {
		t.Fatalf("loading again: %v\n%s", err, want)
	}
	out, err := marshalDomain(dom)
	if err != nil {
		t.Fatalf("writing back: %v", err)
	}
	c3, err := build([]source{{name: "written.yaml", data: out}})
	if err != nil {
		t.Fatalf("written back as\n%s\nit does not load: %v", out, err)
	}
	if got := dumpDomain(c3.domains[c3.names[0]]); got != want {
		t.Fatalf("written back as\n%s\nit loads as\n%s\nnot\n%s", out, got, want)
	}
	for _, r := range dom.rules {
		for _, req := range probes(r.Descriptor) {
			checkMatch(t, c, dom.name, req)
		}
		if exactOnly(r.Descriptor) {
			if m, ok := c.Match(dom.name, r.Descriptor); !ok || m.Rule != r {
				t.Fatalf("descriptor %q of %s matches %+v, %v, not its own rule", r.Descriptor, r.Path, m.Rule, ok)
			}
		}
	}
	return c
}

// FuzzLoadGenerated checks files written by genFile from the fuzzer's bytes, which are
// mostly valid YAML (random bytes seldom are), by the properties of FuzzLoad, and
// matches requests of the fuzzer's two strings against them by checkMatch.
func FuzzLoadGenerated(f *testing.F) {
	f.Add([]byte{3, 0, 1, 0x3c, 1, 2, 0, 1, 5, 0x24, 2, 1, 3, 1}, "x", "y")
	f.Add([]byte{2, 2, 2, 0x05, 0, 1, 1, 2, 9, 0x21, 1, 0, 2, 0, 1}, "xz", "")
	f.Add([]byte{4, 1, 3, 0x4c, 3, 1, 2, 0, 4, 5, 0x10, 1, 2, 1, 0x80, 0x24}, "x*", "a\x00")
	f.Add([]byte{1, 0, 0, 0x20, 0, 1, 9, 3, 0, 0x04}, "", "*")
	f.Fuzz(func(t *testing.T, data []byte, s1, s2 string) {
		file := genFile(data, s1, s2)
		c := checkLoad(t, file)
		if c == nil {
			return
		}
		for _, k1 := range genKeys[:3] {
			for _, k2 := range genKeys[:3] {
				req := []Entry{{k1, s1}, {k2, s2}, {k1, s2}}
				for n := 1; n <= len(req); n++ {
					checkMatch(t, c, "d", req[:n])
				}
			}
		}
	})
}

// probes are requests made from a configured descriptor: as written, with each pattern's
// stars dropped or filled, and with bare keys given a value.
func probes(desc []Entry) [][]Entry {
	var out [][]Entry
	for _, fill := range []string{"", "x", "*", "\x00é"} {
		req := slices.Clone(desc)
		for i := range req {
			if req[i].Value == "" {
				req[i].Value = fill
			} else {
				req[i].Value = strings.ReplaceAll(req[i].Value, "*", fill)
			}
		}
		out = append(out, req)
	}
	return append(out, desc, desc[:len(desc)-1], append(slices.Clone(desc), Entry{"extra", "x"}))
}

func exactOnly(desc []Entry) bool {
	for _, e := range desc {
		if e.Value == "" || strings.Contains(e.Value, "*") {
			return false
		}
	}
	return true
}

// checkMatch checks one request: Match agrees with refMatch, twice, and what it returns is
// consistent with the rule it found: the request's keys and depth, a configured value
// that is empty, equal or a matching pattern at each level, and counter entries that are
// the request's own or, for a shared wildcard, its pattern.
func checkMatch(t *testing.T, c *Config, domain string, req []Entry) {
	t.Helper()
	orig := slices.Clone(req)
	m, ok := c.Match(domain, req)
	again, ok2 := c.Match(domain, req)
	if ok != ok2 || m.Rule != again.Rule || !slices.Equal(m.Entries, again.Entries) {
		t.Fatalf("Match(%q, %q) is not deterministic", domain, req)
	}
	if !slices.Equal(req, orig) {
		t.Fatalf("Match modified the request: %q, was %q", req, orig)
	}
	wantRule, wantEntries := refMatch(c, domain, req)
	if ok != (wantRule != nil) || m.Rule != wantRule || !slices.Equal(m.Entries, wantEntries) {
		t.Fatalf("Match(%q, %q) = %+v, %v; the documented rule gives %+v, %q", domain, req, m, ok, wantRule, wantEntries)
	}
	if !ok {
		return
	}
	if len(m.Rule.Descriptor) != len(req) || len(m.Entries) != len(req) {
		t.Fatalf("Match(%q) found %s with descriptor %q, entries %q", req, m.Rule.Path, m.Rule.Descriptor, m.Entries)
	}
	for i, e := range req {
		cfg := m.Rule.Descriptor[i]
		wild := strings.Contains(cfg.Value, "*")
		switch {
		case cfg.Key != e.Key || m.Entries[i].Key != e.Key:
			t.Fatalf("Match(%q): level %d key %q, rule %s has %q", req, i, e.Key, m.Rule.Path, cfg.Key)
		case cfg.Value != "" && cfg.Value != e.Value && !(wild && globRef(cfg.Value, e.Value)):
			t.Fatalf("Match(%q): level %d value %q, rule %s has %q", req, i, e.Value, m.Rule.Path, cfg.Value)
		case m.Entries[i].Value != e.Value && !(wild && m.Entries[i].Value == cfg.Value):
			t.Fatalf("Match(%q): level %d counts as %q", req, i, m.Entries[i].Value)
		}
	}
}

// FuzzMatch checks Match on the configuration of TestMatch with requests of up to three
// entries, by checkMatch.
func FuzzMatch(f *testing.F) {
	c, err := build([]source{{name: "match.yaml", data: []byte(matchYAML)}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("api", "path", "/api/v2/users/1/2", "", "", 1)
	f.Add("api", "bucket", "shared-x", "object", "doc/y", 2)
	f.Add("api", "bucket", "shared-", "object", "img/", 2)
	f.Add("api", "tenant", "t", "user", "u", 2)
	f.Add("api", "org", "acme", "region", "eu", 2)
	f.Add("api", "host", "", "", "", 1)
	f.Add("api", "host", "a\x00z", "host", "z", 3)
	f.Add("api", "star*", "", "", "", 1)
	f.Add("nope", "", "", "", "", 0)
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2 string, n int) {
		req := []Entry{{k1, v1}, {k2, v2}, {k1, v2}}
		if n < 0 {
			n = -n
		}
		checkMatch(t, c, domain, req[:n%(len(req)+1)])
	})
}

// FuzzMatchBucket checks MatchBucket on the matching test file with any bucket id (spec
// §14.2): it never panics; a match uses every entry of the bucket once, in an order the
// request-descriptor Match agrees with (same rule, same counter entries); and the answer
// does not depend on the map's iteration order.
func FuzzMatchBucket(f *testing.F) {
	f.Add("tenant", "t", "user", "u", "plan", "free")
	f.Add("path", "/api/v2/x", "", "", "", "")
	f.Add("bucket", "shared-1", "object", "doc/a", "x", "")
	f.Add("org", "acme", "region", "eu", "user", "u")
	c, err := build([]source{{name: "match.yaml", data: []byte(matchYAML)}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string) {
		bucket := map[string]string{}
		for _, kv := range [][2]string{{k1, v1}, {k2, v2}, {k3, v3}} {
			if kv[0] != "" {
				bucket[kv[0]] = kv[1]
			}
		}
		m, ok := c.MatchBucket("api", bucket)
		for range 3 {
			m2, ok2 := c.MatchBucket("api", bucket)
			if ok2 != ok || ok && (m2.Rule != m.Rule || !slices.Equal(m2.Entries, m.Entries)) {
				t.Fatalf("%v: answers differ between calls", bucket)
			}
		}
		if !ok {
			return
		}
		if len(m.Entries) != len(bucket) {
			t.Fatalf("%v: matched %d entries", bucket, len(m.Entries))
		}
		for _, e := range m.Entries {
			if _, in := bucket[e.Key]; !in {
				t.Fatalf("%v: entry %v is not the bucket's", bucket, e)
			}
		}
		// The bucket's own values in match order select the same rule and counter.
		ordered := make([]Entry, len(m.Entries))
		for i, e := range m.Entries {
			ordered[i] = Entry{Key: e.Key, Value: bucket[e.Key]}
		}
		r, ok := c.Match("api", ordered)
		if !ok || r.Rule != m.Rule || !slices.Equal(r.Entries, m.Entries) {
			t.Fatalf("%v: Match of %v disagrees", bucket, ordered)
		}
	})
}
