package openapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

var update = flag.Bool("update", false, "rewrite clients/api.json from docs/openapi.yaml")

// Summary is what the TypeScript and Python clients check themselves against: every
// operation of docs/openapi.yaml and every field of every object schema.
type Summary struct {
	// Note says where the file comes from.
	Note string `json:"note"`
	// Operations are the document's operations, by operationId.
	Operations []Operation `json:"operations"`
	// Schemas maps a schema's name to its property names, sorted. An object defined
	// inline in a property is named "<Schema>.<property>" (its items', for an array).
	Schemas map[string][]string `json:"schemas"`
}

// Operation is one operation of the document.
type Operation struct {
	ID     string `json:"id"`
	Method string `json:"method"`
	Path   string `json:"path"`
}

// goOnly marks an operation that only the Go client and the leash command line call
// (POST /v1/admin/backup's tar stream, which `leash backup` unpacks): the TypeScript and
// Python clients, made for applications, leave it out, so the summary does too.
const goOnly = "x-go-client-only"

// summarize builds the summary of doc, less the operations marked goOnly.
func summarize(doc *openapi3.T) Summary {
	s := Summary{
		Note:    "Generated from docs/openapi.yaml by `go test ./tests/openapi -run TestClientSummary -update`; do not edit.",
		Schemas: map[string][]string{},
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if _, skip := op.Extensions[goOnly]; skip {
				continue
			}
			s.Operations = append(s.Operations, Operation{ID: op.OperationID, Method: method, Path: path})
		}
	}
	sort.Slice(s.Operations, func(i, j int) bool { return s.Operations[i].ID < s.Operations[j].ID })
	var add func(name string, sc *openapi3.Schema)
	add = func(name string, sc *openapi3.Schema) {
		if sc == nil || len(sc.Properties) == 0 {
			return
		}
		var names []string
		for prop, ref := range sc.Properties {
			names = append(names, prop)
			if ref.Ref != "" || ref.Value == nil {
				continue
			}
			inner := ref.Value
			if inner.Items != nil && inner.Items.Ref == "" {
				inner = inner.Items.Value
			}
			add(name+"."+prop, inner)
		}
		slices.Sort(names)
		s.Schemas[name] = names
	}
	for name, ref := range doc.Components.Schemas {
		add(name, ref.Value)
	}
	return s
}

// TestClientSummary: clients/api.json is the summary of docs/openapi.yaml, so that a route
// or a field added to the document fails the clients' own coverage tests until they cover
// it (clients/typescript and clients/python, "Adding an operation").
func TestClientSummary(t *testing.T) {
	doc := loadDoc(t)
	want, err := json.MarshalIndent(summarize(doc), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	path := filepath.Join(root(), "clients", "api.json")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("clients/api.json is not the summary of docs/openapi.yaml: run `go test ./tests/openapi -run TestClientSummary -update`, then make both clients cover what changed\n%s",
			firstDiff(string(got), string(want)))
	}
}

// firstDiff names the first line where two texts differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + itoa(i+1) + ": have " + x + "\n        want " + y
		}
	}
	return ""
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
