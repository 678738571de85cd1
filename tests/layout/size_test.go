package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bounds on the size of production code, so no type becomes the one that does everything
// and no package the one that holds everything.
const (
	maxMethods      = 25   // methods declared with one type as receiver
	maxPackageLines = 2500 // lines of a package's non-test files
	maxCmdFuncLines = 80   // lines of one function under cmd/
)

// sized are the trees of production code, whose packages keep to the bounds.
var sized = []string{"adapter", "admin", "cli", "client", "cmd", "config", "console", "engine", "httpapi",
	"internal", "metrics", "store", "tracing", "webhook", "wire"}

// manyMethods are the packages whose types may have more methods: the Go client offers
// one method per /v1 operation on one type, as net/http's Client-like APIs do.
var manyMethods = map[string]bool{"client": true}

// TestSizes fails when a package under sized has a type with more than maxMethods
// methods (outside manyMethods) or more than maxPackageLines lines of non-test code, or when a function under
// cmd/ is longer than maxCmdFuncLines lines.
func TestSizes(t *testing.T) {
	n := 0
	for _, tree := range sized {
		err := filepath.WalkDir(filepath.Join("../..", tree), func(dir string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if checkSizes(t, dir, strings.HasPrefix(tree, "cmd"), !manyMethods[tree]) {
				n++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 5 {
		t.Fatalf("checked %d packages; the walk is wrong", n)
	}
}

// checkSizes checks the package in dir, if any, and reports whether there was one.
func checkSizes(t *testing.T, dir string, funcs, bounded bool) bool {
	t.Helper()
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	lines, methods, found := 0, map[string]int{}, false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		found = true
		lines += fset.File(f.Pos()).LineCount()
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fn.Recv != nil {
				methods[receiverType(fn.Recv.List[0].Type)]++
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; funcs && n > maxCmdFuncLines {
				t.Errorf("%s: %s is %d lines long, more than %d", name, fn.Name.Name, n, maxCmdFuncLines)
			}
		}
	}
	if lines > maxPackageLines {
		t.Errorf("%s: %d lines of non-test code, more than %d", dir, lines, maxPackageLines)
	}
	for typ, n := range methods {
		if n > maxMethods && bounded {
			t.Errorf("%s: type %s has %d methods, more than %d", dir, typ, n, maxMethods)
		}
	}
	return found
}

// receiverType is the name of a method's receiver type, without a pointer or type
// parameters.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}
