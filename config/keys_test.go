package config

import (
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

var updateSpec = flag.Bool("update-spec", false, "rewrite docs/spec.md's key table (§10.2) from keys")

const specPath = "../docs/spec.md"

// specKeyTable returns spec.md and the start and end of its §10.2 key table.
func specKeyTable(t *testing.T) (spec string, start, end int) {
	t.Helper()
	data, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	spec = string(data)
	const heading = "### §10.2 Keys\n\n"
	start = strings.Index(spec, heading)
	if start < 0 {
		t.Fatalf("%s has no %q", specPath, strings.TrimSpace(heading))
	}
	start += len(heading)
	end = strings.Index(spec[start:], "\n\n")
	if end < 0 {
		t.Fatalf("%s: the key table does not end", specPath)
	}
	return spec, start, start + end + 1
}

// TestSpecKeyTable: docs/spec.md's key table is the one keys describes (go test ./config
// -run TestSpecKeyTable -update-spec rewrites it).
func TestSpecKeyTable(t *testing.T) {
	spec, start, end := specKeyTable(t)
	want := keyTable()
	if *updateSpec {
		if err := os.WriteFile(specPath, []byte(spec[:start]+want+spec[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got := spec[start:end]
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("docs/spec.md §10.2 differs from the keys of config/keys.go at table line %d:\n spec: %s\n keys: %s\n(go test ./config -run TestSpecKeyTable -update-spec rewrites the table)", i+1, gl, wl)
		}
	}
}

// TestKeysDescribeEveryKeyOnce: no key path is described twice, and every row of the key
// table documents its keys.
func TestKeysDescribeEveryKeyOnce(t *testing.T) {
	seen := map[string]bool{}
	for i, k := range keys() {
		if seen[k.path] {
			t.Errorf("%s is described twice", k.path)
		}
		seen[k.path] = true
		if i == 0 && k.doc == "" {
			t.Errorf("%s: the first key needs its meaning", k.path)
		}
		parseDefault(k) // panics on a bad duration
	}
}

// TestExampleListsEveryKey: config/example.yaml sets every key keys describes outside
// plans, accounts, operators and envoy.domains, each at its own path or, where setting it
// would clash with another key (cluster_addrs, sentinel), as a commented line (TestExample
// checks that they are the defaults, and Load that it names no other key).
func TestExampleListsEveryKey(t *testing.T) {
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(Example()), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys() {
		if strings.ContainsAny(k.path, "<[") {
			continue
		}
		var v any = doc
		for _, seg := range strings.Split(k.path, ".") {
			m, _ := v.(map[string]any)
			var ok bool
			if v, ok = m[seg]; !ok {
				if strings.Contains(Example(), "# "+seg+":") || strings.Contains(Example(), "#   "+seg+":") {
					break
				}
				t.Errorf("example.yaml does not list %s", k.path)
				break
			}
		}
	}
}

// TestKeysNameFields: every key keys describes names a field of the document Load decodes
// (matchKey) of a Go type that holds its kind, and every field of it is named by a key, so
// keys and Config cannot drift.
func TestKeysNameFields(t *testing.T) {
	named := map[string]bool{} // "Type.Field" of every field a key reaches
	for _, k := range keys() {
		typ := reflect.TypeOf(document{})
		segs := strings.Split(k.path, ".")
		for i, seg := range segs {
			if _, ok := placeholderName(seg); ok {
				continue
			}
			seg = strings.TrimSuffix(seg, "[]")
			f, owner, ok := fieldOf(typ, seg)
			if !ok {
				t.Errorf("%s: %s has no field for %q", k.path, typ, seg)
				break
			}
			named[owner+"."+f.Name] = true
			typ = f.Type
			if want := goTypes[k.kind]; i == len(segs)-1 && !slices.Contains(want, typ.String()) {
				t.Errorf("%s: a %s field holds it, want one of %v", k.path, typ, want)
			}
			for typ.Kind() == reflect.Map || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Pointer {
				typ = typ.Elem()
			}
		}
	}
	var walk func(typ reflect.Type)
	walk = func(typ reflect.Type) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if !f.IsExported() || f.Tag.Get("mapstructure") == "-" || f.Anonymous {
				if f.Anonymous {
					walk(f.Type)
				}
				continue
			}
			if !named[typ.Name()+"."+f.Name] {
				t.Errorf("%s.%s: no key of keys.go names it", typ.Name(), f.Name)
			}
			ft := f.Type
			for ft.Kind() == reflect.Map || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Duration(0)) {
				walk(ft)
			}
		}
	}
	walk(reflect.TypeOf(document{}))
}

// goTypes are the Go types a field of each kind may have.
var goTypes = map[kind][]string{
	kString:   {"string"},
	kInt:      {"int", "*int64"},
	kBool:     {"bool", "*bool"},
	kDuration: {"time.Duration"},
	kFloat:    {"float64"},
	kStrings:  {"[]string"},
	kHardCap:  {"*int64"},
}

// fieldOf returns the field of the struct typ (or of a struct embedded in it) that key
// names, and the name of the struct that declares it.
func fieldOf(typ reflect.Type, key string) (f reflect.StructField, owner string, ok bool) {
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.Anonymous {
			if g, owner, ok := fieldOf(f.Type, key); ok {
				return g, owner, true
			}
			continue
		}
		if f.IsExported() && f.Tag.Get("mapstructure") != "-" && matchKey(key, f.Name) {
			return f, typ.Name(), true
		}
	}
	return reflect.StructField{}, "", false
}
