package speccheck

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// specPath is the specification, relative to the repository root.
const specPath = "docs/spec.md"

// selfPath is this file, relative to the repository root. It builds the forbidden strings
// from pieces, so that it does not contain them (a plain grep of the repository finds
// nothing), and the scan skips it anyway.
const selfPath = "tests/speccheck/speccheck_test.go"

var (
	// citeRE finds a citation and the list of further sections that may follow it:
	// "spec §4.6–§4.8", "spec §9.1, §9.3", "spec §3 to §8".
	citeRE = regexp.MustCompile(`spec §(\d+(?:\.\d+)*)((?:\s*(?:,|–|—|-|/|and|or|to)\s*§\d+(?:\.\d+)*)*)`)
	// sectionRE finds every section number in a piece of text.
	sectionRE = regexp.MustCompile(`§(\d+(?:\.\d+)*)`)
	// headingRE is a section heading of the specification: "## §N Title", "### §N.M Title".
	headingRE = regexp.MustCompile(`^(#+) §(\d+(?:\.\d+)*)(?:\s+(.*))?$`)
	// linkRE is a Markdown link to a file named spec.md, with its optional fragment.
	linkRE = regexp.MustCompile(`\]\(((?:[^)\s#]*/)?spec\.md)(#[^)\s]*)?\)`)
	// contractRE is the name of the external document the specification replaced, as an
	// upper-case word.
	contractRE = regexp.MustCompile(`\b` + contractWord + `\b`)
)

// contractWord is that name; sharedPath is the relative path of the folder beside the
// repository that held it.
const (
	contractWord = "CON" + "TRACT"
	sharedPath   = ".." + "/shared"
)

// spec is what the checks need from docs/spec.md.
type spec struct {
	sections map[string]bool // "4", "4.7"
	anchors  map[string]bool // GitHub heading anchors, without '#'
}

func TestSpecCitations(t *testing.T) {
	root := repoRoot(t)
	problems := check(root)
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Logf("%d problem(s); sections are the headings \"## §N\" / \"### §N.M\" of %s", len(problems), specPath)
	}
}

// TestCheckFindsProblems runs the checks on a small made-up repository with one problem
// of each kind, so a check that stopped finding anything would fail here.
func TestCheckFindsProblems(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/x\n")
	write(specPath, "# Spec\n\n## §1 One\n\n### §1.1 First part\n\nSee §1.1 and §7.\n\n### §1.1 Again\n\n## §2.1 Wrong level\n")
	write("a.go", "package a\n\n// spec §1.1 is fine.\n// spec §2.3 does not exist.\n// spec §1, §1.9 half exists.\n")
	write("README.md", "[ok](docs/spec.md#11-first-part) [bad](docs/spec.md#nope) [path](spec.md#1-one)\n")
	write("docs/other.md", "[ok](spec.md#1-one) and [ok too](spec.md)\n")
	write("notes.txt", "per the "+contractWord+" section 4\nsee "+sharedPath+"/x.md\n"+contractWord+"S and contract are fine\n")
	write("testdata/ignored.go", "// spec §99 is in a testdata folder\n")
	write("bin.dat", "spec §98\x00binary")

	got := check(root)
	want := []string{
		"docs/spec.md:7: §7: no such section",
		"docs/spec.md:9: §1.1: heading given twice",
		"docs/spec.md:11: §2.1: heading level",
		"README.md:1: link docs/spec.md#nope",
		"README.md:1: link spec.md#1-one",
		"a.go:4: spec §2.3: no such section",
		"a.go:5: spec §1.9: no such section",
		"notes.txt:1: mentions the external contract",
		"notes.txt:2: mentions " + sharedPath,
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, w) }) {
			t.Errorf("missing problem %q", w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}

// repoRoot returns the folder holding go.mod, searched upwards from the working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod in the working directory or above it")
		}
		dir = parent
	}
}

// check returns every problem found under root, each "file:line: what".
func check(root string) []string {
	var problems []string
	add := func(file string, line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: ", file, line)+fmt.Sprintf(format, args...))
	}
	sp, err := readSpec(root, add)
	if err != nil {
		return []string{err.Error()}
	}
	specAbs := filepath.Join(root, filepath.FromSlash(specPath))

	walkErr := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			// node_modules holds third-party packages (clients/typescript's dev dependencies).
			if path != root && (name == ".git" || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || name == ".git" { // a worktree's .git is a file
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == selfPath {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
			return nil // binary
		}
		isMarkdown := strings.EqualFold(filepath.Ext(name), ".md")
		isSpec := rel == specPath
		for i, line := range strings.Split(string(data), "\n") {
			n := i + 1
			if contractRE.MatchString(line) {
				add(rel, n, "mentions the external contract; cite %s instead", specPath)
			}
			if strings.Contains(line, sharedPath) {
				add(rel, n, "mentions %s, a folder outside the repository", sharedPath)
			}
			for _, m := range citeRE.FindAllStringSubmatch(line, -1) {
				secs := []string{m[1]}
				for _, s := range sectionRE.FindAllStringSubmatch(m[2], -1) {
					secs = append(secs, s[1])
				}
				for _, s := range secs {
					if !sp.sections[s] {
						add(rel, n, "spec §%s: no such section in %s (cited as %q)", s, specPath, m[0])
					}
				}
			}
			if isSpec && !headingRE.MatchString(line) {
				for _, s := range sectionRE.FindAllStringSubmatch(line, -1) {
					if !sp.sections[s[1]] {
						add(rel, n, "§%s: no such section", s[1])
					}
				}
			}
			if isMarkdown {
				for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
					target := filepath.Join(filepath.Dir(path), filepath.FromSlash(m[1]))
					frag := strings.TrimPrefix(m[2], "#")
					switch {
					case target != specAbs:
						add(rel, n, "link %s%s does not lead to %s", m[1], m[2], specPath)
					case frag != "" && !sp.anchors[frag]:
						add(rel, n, "link %s%s: no heading of %s has that anchor", m[1], m[2], specPath)
					}
				}
			}
		}
		return nil
	})
	if walkErr != nil {
		problems = append(problems, "walking the repository: "+walkErr.Error())
	}
	return problems
}

// readSpec reads the section headings of docs/spec.md, reporting a number given twice and
// a heading whose level does not match its number (## §N, ### §N.M).
func readSpec(root string, add func(file string, line int, format string, args ...any)) (*spec, error) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(specPath)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", specPath, err)
	}
	sp := &spec{sections: map[string]bool{}, anchors: map[string]bool{}}
	inFence := false
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		sp.anchors[anchor(strings.TrimLeft(line, "# "))] = true
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		num := m[2]
		if sp.sections[num] {
			add(specPath, i+1, "§%s: heading given twice", num)
		}
		sp.sections[num] = true
		if want := strings.Count(num, ".") + 2; len(m[1]) != want {
			add(specPath, i+1, "§%s: heading level %d, want %d (## §N, ### §N.M)", num, len(m[1]), want)
		}
	}
	if len(sp.sections) == 0 {
		return nil, fmt.Errorf("%s: no section headings (## §N Title)", specPath)
	}
	return sp, nil
}

// anchor returns the fragment GitHub gives a heading: lower case, letters, digits, '-' and
// '_' kept, spaces turned into '-', everything else dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
