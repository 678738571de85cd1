package yamlline

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestLocate(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		line int
	}{
		{"a: 1\nb: 2\n- c\n", 3},                           // library: line 2
		{"http:\n  addr: \":1\"\n  bogus: [1\n", 3},        // library: line 2
		{"http:\n  addr: \":1\"\n bogus: 2\n", 3},          // library: line 2
		{"a: 1\nb: 2\nc: 3\nhttp:\n  addr: x\n  - y\n", 6}, // library: line 4
		{"http:\n  addr: \":1\"\n  a: b: c\n", 3},
		{"http:\n  addr: \":1\"\n\tbogus: 2\n", 3},
		{"http:\n  addr: \":1\"\n  x: \"abc\n", 3},
		{"- [a,\n   b]\n- c: d: e\n", 3}, // a list open across lines is no error
		{"http: [\n", 1},
	} {
		var v any
		err := yaml.Unmarshal([]byte(tc.doc), &v)
		if err == nil {
			t.Fatalf("%q parsed", tc.doc)
		}
		ps := Locate([]byte(tc.doc), err)
		if len(ps) != 1 || ps[0].Line != tc.line || ps[0].Msg == "" {
			t.Errorf("%q: %+v, want line %d (library: %v)", tc.doc, ps, tc.line, err)
		}
	}
	doc := "http: {addr: ':1'}\nlog: {}\nhttp: {addr: ':2'}\n"
	var v map[string]any
	ps := Locate([]byte(doc), yaml.Unmarshal([]byte(doc), &v))
	if len(ps) != 1 || ps[0].Line != 3 {
		t.Errorf("duplicate key: %+v", ps)
	}
}
