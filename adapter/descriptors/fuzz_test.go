package descriptors

import (
	"errors"
	"os"
	"path/filepath"
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

// Any input either loads or fails with *Error values naming the file; nothing panics.
func FuzzLoad(f *testing.F) {
	for _, data := range seedFiles(f) {
		f.Add(data)
	}
	f.Add([]byte(matchYAML))
	f.Add([]byte(aliasBomb()))
	f.Add([]byte("domain: d\ndescriptors: &d [{key: a, descriptors: *d}]"))
	f.Add([]byte("domain: d\ndescriptors: [{key: a, rate_limit: &r {<<: *r}}]"))
	f.Add([]byte("domain: d\ndescriptors: [{key: a, value: '**x*', share_threshold: true, rate_limits: [{unit: week, requests_per_unit: 1}]}]"))
	f.Add([]byte("\xff\xfe"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := build([]source{{name: "fuzz.yaml", data: data}})
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz.yaml: ") {
					t.Fatalf("error line %q does not name the file", line)
				}
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not an *Error", err)
			}
			return
		}
		for _, d := range c.Domains() {
			for _, r := range c.Rules(d) {
				req := make([]Entry, len(r.Descriptor))
				for i, en := range r.Descriptor {
					req[i] = Entry{Key: en.Key, Value: strings.ReplaceAll(en.Value, "*", "x")}
				}
				c.Match(d, req)
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
	})
}

// Any request either matches a rule with one entry per request entry, or nothing.
func FuzzMatch(f *testing.F) {
	c, err := build([]source{{name: "match.yaml", data: []byte(matchYAML)}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("api", "path", "/api/v2/users/1/2", "", "", 1)
	f.Add("api", "bucket", "shared-x", "object", "doc/y", 2)
	f.Add("api", "tenant", "t", "user", "u", 2)
	f.Add("api", "host", "", "", "", 1)
	f.Add("nope", "", "", "", "", 0)
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2 string, n int) {
		req := []Entry{{k1, v1}, {k2, v2}, {k1, v2}}
		if n < 0 {
			n = -n
		}
		req = req[:n%(len(req)+1)]
		m, ok := c.Match(domain, req)
		if !ok {
			return
		}
		if m.Rule == nil || len(m.Entries) != len(req) {
			t.Fatalf("match %+v for %v", m, req)
		}
		for i := range req {
			if m.Entries[i].Key != req[i].Key {
				t.Fatalf("entries %v for %v", m.Entries, req)
			}
		}
	})
}
