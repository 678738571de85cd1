// Package layout holds the test that keeps the tree's architecture what the README's
// layout table says: edges above the engine, stores beside it implementing its ports, test
// kits apart.
package layout

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/leashd/leash/"

// floors lists the production packages from the bottom up. A package may import a package
// of its own floor or of one below, never one above; the first prefix that matches a
// package names its floor.
var floors = [][]string{
	{"engine/algo", "store/redisstore/respipe", "internal/filewatch", "internal/suggest", "internal/yamlline", "internal/backuptar", "internal/devkeys", "tracing", "webhook/signature", "wire"},
	{"engine"}, // the domain, its capabilities and the ports they need from a store
	{"store"},  // the backends: each implements the engine's ports and imports no edge
	{"config", "metrics", "webhook", "adapter/descriptors", "adapter/domains"},
	{"httpapi", "adapter", "admin", "client", "cli", "console"},
	{"cmd"},
}

// testOnly are trees no production package may import.
var testOnly = []string{"testkit", "tests", "examples", "scripts", "deploy"}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "github.com/leashd/leash/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, module)
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func under(path, prefix string) bool { return path == prefix || strings.HasPrefix(path, prefix+"/") }

func floorOf(path string) int {
	for i, f := range floors {
		for _, prefix := range f {
			if under(path, prefix) {
				return i
			}
		}
	}
	return -1
}

func isTestOnly(path string) bool {
	return slices.ContainsFunc(testOnly, func(p string) bool { return under(path, p) })
}

// TestImportsRunDown fails when a production package imports one on a floor above its
// own, or a test kit, or when a package has no floor (a new top-level folder must be
// placed on one).
func TestImportsRunDown(t *testing.T) {
	for _, p := range listPackages(t) {
		if isTestOnly(p.ImportPath) || p.ImportPath == "adapter" && len(p.Imports) == 0 {
			continue
		}
		own := floorOf(p.ImportPath)
		if own < 0 {
			t.Errorf("%s is on no floor: add it to floors in this test", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			if isTestOnly(imp) {
				t.Errorf("%s imports the test kit %s", p.ImportPath, imp)
				continue
			}
			if f := floorOf(imp); f > own {
				t.Errorf("%s (floor %d) imports %s (floor %d): imports run down only", p.ImportPath, own, imp, f)
			}
		}
	}
}

// TestEngineImportsNoEdge fails when anything under engine/ depends, directly or not, on
// a package outside engine/ (a store included), on net/http or on gRPC: the engine is the
// domain, and the edges translate to it.
func TestEngineImportsNoEdge(t *testing.T) {
	checkInside(t, "engine", 12, false, "engine")
}

// TestStoresImportOnlyTheEngine fails when a store depends, directly or not, on a package
// outside store/ and engine/, or imports net/http or gRPC: a backend implements the
// engine's ports and knows nothing of the edges. A storage library a store uses may
// reach net/http itself (Pebble's error reporting does), so that one is checked on the
// store's own imports.
func TestStoresImportOnlyTheEngine(t *testing.T) {
	checkInside(t, "store", 4, true, "store", "engine")
}

// checkInside fails when a package under tree depends on one of this module outside
// allowed, or on net/http or gRPC (with ownImports, only when it imports them itself);
// atLeast guards against a listing that found nothing.
func checkInside(t *testing.T, tree string, atLeast int, ownImports bool, allowed ...string) {
	t.Helper()
	n := 0
	for _, p := range listPackages(t) {
		if !under(p.ImportPath, tree) {
			continue
		}
		n++
		for _, d := range p.Deps {
			inside := func(a string) bool { return under(strings.TrimPrefix(d, module), a) }
			edge := d == "net/http" || strings.HasPrefix(d, "google.golang.org/grpc")
			switch {
			case edge && (!ownImports || slices.Contains(p.Imports, d)):
				t.Errorf("%s depends on %s", p.ImportPath, d)
			case strings.HasPrefix(d, module) && !slices.ContainsFunc(allowed, inside):
				t.Errorf("%s depends on %s, outside %v", p.ImportPath, strings.TrimPrefix(d, module), allowed)
			}
		}
	}
	if n < atLeast {
		t.Fatalf("found %d packages under %s/; the listing is wrong", n, tree)
	}
}
