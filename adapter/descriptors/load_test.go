package descriptors

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func domainFile(name string) string {
	return "domain: " + name + "\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
}

func TestLoadFolder(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "b.yaml", domainFile("b"))
	writeFile(t, dir, "a.yml", domainFile("a"))
	writeFile(t, dir, "C.YAML", domainFile("c"))
	writeFile(t, dir, ".hidden.yaml", "not: valid")   // dot files are skipped
	writeFile(t, dir, "b.yaml.swp", "garbage")        // so are other extensions
	writeFile(t, dir, "README.md", "# notes")         //
	writeFile(t, dir, "sub/d.yaml", domainFile("d"))  // and subfolders
	writeFile(t, dir, ".git/e.yaml", domainFile("e")) //
	if err := os.Mkdir(filepath.Join(dir, "dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Domains(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Domains() = %v", got)
	}
	want := []string{filepath.Join(dir, "C.YAML"), filepath.Join(dir, "a.yml"), filepath.Join(dir, "b.yaml")}
	if got := c.Files(); !slices.Equal(got, want) {
		t.Errorf("Files() = %v, want %v (sorted by name)", got, want)
	}
	if _, ok := c.Match("b", e("k", "v")); !ok {
		t.Error("b does not match")
	}
}

// A folder mounted from a Kubernetes ConfigMap: the visible names are links into a
// hidden, timestamped folder reached through the "..data" link.
func TestLoadConfigMapLayout(t *testing.T) {
	dir := t.TempDir()
	configMapSwap(t, dir, "..2024_01_01_00_00_00.000000001", map[string]string{
		"edge.yaml":  domainFile("edge"),
		"inner.yaml": domainFile("inner"),
	})
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Domains(); !slices.Equal(got, []string{"edge", "inner"}) {
		t.Errorf("Domains() = %v", got)
	}
	if got := c.Files(); len(got) != 2 || got[0] != filepath.Join(dir, "edge.yaml") {
		t.Errorf("Files() = %v", got)
	}
}

// configMapSwap lays out files as the kubelet does, replacing any earlier version
// atomically through the ..data link.
func configMapSwap(t *testing.T, dir, version string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		writeFile(t, filepath.Join(dir, version), name, content)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Keys that are gone lose their links.
	ents, _ := os.ReadDir(dir)
	for _, ent := range ents {
		if _, ok := files[ent.Name()]; !ok && !strings.HasPrefix(ent.Name(), ".") {
			os.Remove(filepath.Join(dir, ent.Name()))
		}
	}
	if old != "" && old != version {
		os.RemoveAll(filepath.Join(dir, old))
	}
}

func TestLoadSeveralPaths(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "one/a.yaml", domainFile("a"))
	writeFile(t, dir, "two/b.yaml", domainFile("b"))
	dot := writeFile(t, dir, "three/.named.yaml", domainFile("named"))
	// a is named and also inside a named folder: it loads once.
	c, err := Load(a, filepath.Join(dir, "two"), filepath.Join(dir, "one"), dot)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Domains(); !slices.Equal(got, []string{"a", "b", "named"}) {
		t.Errorf("Domains() = %v", got)
	}
	if len(c.Files()) != 3 {
		t.Errorf("Files() = %v", c.Files())
	}

	empty, err := Load()
	if err != nil || len(empty.Domains()) != 0 {
		t.Errorf("Load() = %v, %v", empty.Domains(), err)
	}
	emptyDir, err := Load(t.TempDir())
	if err != nil || len(emptyDir.Domains()) != 0 {
		t.Errorf("Load(empty folder) = %v, %v", emptyDir.Domains(), err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", domainFile("shared"))
	b := writeFile(t, dir, "b.yaml", domainFile("shared"))
	bad := writeFile(t, dir, "bad/x.yaml", "domain: x\ndescriptors: [{key: k, rate_limit: {unit: ever, requests_per_unit: 1}}]")
	big := writeFile(t, dir, "big/big.yaml", "domain: big\n#"+strings.Repeat("x", maxFileSize))
	dangling := filepath.Join(dir, "links", "gone.yaml")
	os.MkdirAll(filepath.Dir(dangling), 0o755)
	if err := os.Symlink("nowhere.yaml", dangling); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"duplicate domain", []string{a, b}, b + `:1: domain: duplicate domain "shared": ` + a + " defines it too"},
		{"duplicate domain in a folder", []string{dir}, b + `:1: domain: duplicate domain "shared"`},
		{"missing path", []string{filepath.Join(dir, "nope.yaml")}, filepath.Join(dir, "nope.yaml") + ": stat: no such file or directory"},
		{"bad file in a folder", []string{filepath.Join(dir, "bad")}, bad + `:2: descriptors[0].rate_limit.unit: unknown unit "ever"`},
		{"too large", []string{big}, big + ": larger than 4 MiB"},
		{"dangling link", []string{filepath.Dir(dangling)}, dangling + ": stat: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.paths...)
			var e *Error
			if err == nil || !errors.As(err, &e) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load(%v) = %v, want an *Error containing %q", tc.paths, err, tc.want)
			}
		})
	}
}

// Errors in several files are reported together.
func TestLoadErrorsAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", "domain: a\nbogus: 1\n")
	writeFile(t, dir, "b.yaml", "domain: ''\n")
	_, err := Load(dir)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{filepath.Join(dir, "a.yaml") + ":2: bogus: unknown key", filepath.Join(dir, "b.yaml") + ":1: domain: a domain is required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\ndoes not contain %q", err, want)
		}
	}
}
