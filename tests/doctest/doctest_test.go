// Package doctest runs the shell examples of README.md and docs/*.md against a real
// `leash serve`, so that a doc whose example breaks fails `go test`.
//
// The convention, also stated in README.md:
//
//   - a block fenced ```sh is run, with bash -e -o pipefail, against a leash started for
//     the file (memory store, dev account, dev operator): KEY is its API key,
//     LEASH_OPERATOR_KEY the dev operator's key (the admin verbs read it), LEASH_URL its /v1 base URL,
//     LEASH_SRC this repository's root, and the built `leash` command is first on PATH. The blocks of one file run in order in
//     a fresh temporary folder, each seeing the exported variables and the functions the
//     earlier ones defined. A block must exit 0.
//   - a block fenced any other way (```console, ```text, ```yaml, ```go...) is shown only:
//     use ```console for commands that need Kubernetes, Envoy, Docker, a Redis or a webhook
//     receiver.
//   - inside a run block, a whole-line comment that starts with `# {` is the JSON a command
//     above it prints (continued on following comment lines while its braces are open;
//     `...` elides). Every `"field":value` in it with a literal value must appear in a JSON
//     line of the block's output, in the order the comments come, except values that vary
//     from run to run (fields in volatile, strings containing "..."). A comment `# HTTP/1.1
//     200 OK` is a status line and `# Name: value` a response header that `curl -i` printed.
//     Any other whole-line comment is a line of text a command prints, compared with its
//     numbers masked (durations and counts vary). Explanations go after a command, on its
//     line, or in the prose around the block.
package doctest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/testkit/leashproc"
)

var bin string

func TestMain(m *testing.M) { os.Exit(leashproc.Main(m, &bin)) }

// root is the repository root.
func root() string { return leashproc.Root() }

// block is one ```sh block of a doc.
type block struct {
	line int    // line of the opening fence
	text string // the block's lines
}

// runBlocks extracts the ```sh blocks of a Markdown document.
func runBlocks(doc string) []block {
	var out []block
	var cur *block
	var lines []string
	for i, l := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			if strings.TrimSpace(strings.TrimPrefix(trimmed, "```")) == "sh" {
				cur = &block{line: i + 1}
				lines = nil
			} else {
				cur = &block{line: -1} // a block shown only: skip to its end
			}
		case cur != nil && trimmed == "```":
			if cur.line > 0 {
				cur.text = strings.Join(lines, "\n") + "\n"
				out = append(out, *cur)
			}
			cur = nil
		case cur != nil:
			lines = append(lines, l)
		}
	}
	return out
}

// volatile are JSON fields whose values differ from run to run.
var volatile = map[string]bool{
	"reset_ms": true, "lease_id": true, "secret": true, "event_id": true, "day": true, "month": true,
}

// volatileHeaders are response headers whose values differ from run to run.
var volatileHeaders = map[string]bool{"ratelimit-reset": true, "x-request-id": true, "retry-after": true, "date": true}

var (
	pairRE   = regexp.MustCompile(`"([A-Za-z_]+)":("(?:[^"\\]|\\.)*"|-?[0-9]+|true|false|null)`)
	statusRE = regexp.MustCompile(`^HTTP/[0-9.]+ [0-9]{3}\b`)
	headerRE = regexp.MustCompile(`^([A-Z][A-Za-z-]+): (\S+)`)
)

// expectation is one output a run block's comments show.
type expectation struct {
	line  int      // line in the doc
	shown string   // the comment, for messages
	pairs []string // `"field":value` that a JSON output line must contain
	exact string   // a status line, or "name: value" of a header (lower-case name)
	text  string   // a line of text, numbers masked
}

// durations are the Go durations masked in text lines (21.9s, 1m0s, 250ms), and digits
// the other numbers.
var (
	durations = regexp.MustCompile(`\b(?:[0-9][0-9.]*(?:ns|us|µs|ms|h|m|s))+\b`)
	digits    = regexp.MustCompile(`[0-9][0-9.]*`)
)

// mask replaces every duration of a text line with "<duration>" and every other number
// with "#".
func mask(s string) string {
	s = durations.ReplaceAllString(strings.TrimSpace(s), "<duration>")
	return digits.ReplaceAllString(s, "#")
}

// expectations reads the outputs shown in a run block's comments.
func expectations(b block) []expectation {
	var out []expectation
	lines := strings.Split(b.text, "\n")
	for i := 0; i < len(lines); i++ {
		c, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "# ")
		if !ok {
			continue
		}
		e := expectation{line: b.line + 1 + i, shown: c}
		switch {
		case strings.HasPrefix(c, "{"):
			text := c
			for strings.Count(text, "{")+strings.Count(text, "[") > strings.Count(text, "}")+strings.Count(text, "]") && i+1 < len(lines) {
				next, ok := strings.CutPrefix(strings.TrimSpace(lines[i+1]), "#")
				if !ok {
					break
				}
				text += strings.TrimSpace(next)
				i++
			}
			for _, m := range pairRE.FindAllStringSubmatch(text, -1) {
				if volatile[m[1]] || strings.Contains(m[2], "...") {
					continue
				}
				e.pairs = append(e.pairs, m[0])
			}
			if len(e.pairs) == 0 {
				continue
			}
		case statusRE.MatchString(c):
			e.exact = statusRE.FindString(c)
		case headerRE.MatchString(c):
			m := headerRE.FindStringSubmatch(c)
			if volatileHeaders[strings.ToLower(m[1])] {
				continue
			}
			e.exact = strings.ToLower(m[1]) + ": " + m[2]
		default:
			e.text = mask(c)
		}
		out = append(out, e)
	}
	return out
}

// matches reports whether an output line shows e.
func (e expectation) matches(line string) bool {
	line = strings.TrimSpace(line)
	switch {
	case e.pairs != nil:
		if !strings.HasPrefix(line, "{") {
			return false
		}
		for _, p := range e.pairs {
			if !strings.Contains(line, p) {
				return false
			}
		}
		return true
	case e.text != "":
		return mask(line) == e.text
	case statusRE.MatchString(e.exact):
		return strings.HasPrefix(line, e.exact)
	default:
		name, value, ok := strings.Cut(line, ": ")
		return ok && strings.ToLower(name)+": "+value == e.exact
	}
}

// docs are the documents whose ```sh blocks are run, relative to the root.
func docs(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(root(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		out = append(out, filepath.Join("docs", filepath.Base(f)))
	}
	return out
}

// TestDocExamples runs every ```sh block of README.md and docs/*.md and checks the outputs
// their comments show.
func TestDocExamples(t *testing.T) {
	ran := 0
	for _, name := range docs(t) {
		b, err := os.ReadFile(filepath.Join(root(), name))
		if err != nil {
			t.Fatal(err)
		}
		blocks := runBlocks(string(b))
		if len(blocks) == 0 {
			continue
		}
		ran += len(blocks)
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) { runDoc(t, name, blocks) })
	}
	if ran < 8 {
		t.Fatalf("only %d run blocks found in README.md and docs/*.md", ran)
	}
}

// runDoc runs one document's blocks in order against a fresh leash.
func runDoc(t *testing.T, name string, blocks []block) {
	const key, opKey = "lsh_doctest_key", "lsh_doctest_operator_key"
	p := leashproc.Start(t, bin, nil, "LEASH_DEV_API_KEY="+key, "LEASH_DEV_OPERATOR_KEY="+opKey)
	dir := t.TempDir()
	state := filepath.Join(dir, ".state")
	env := append(leashproc.Environ(),
		"KEY="+key, "LEASH_OPERATOR_KEY="+opKey, "LEASH_URL="+p.URL, "LEASH_SRC="+root(),
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if err := os.WriteFile(state, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	clearedMinute = time.Time{} // each document's blocks run on counters of their own
	for _, b := range blocks {
		clearOfMinuteEnd(b.text)
		script := fmt.Sprintf("source %q\n%s\n{ declare -px; declare -f; } > %q\n", state, b.text, state)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s:%d: the block failed: %v\n--- block\n%s--- output\n%s", name, b.line, err, b.text, out)
		}
		lines := strings.Split(string(out), "\n")
		next := 0
		for _, e := range expectations(b) {
			found := -1
			for i := next; i < len(lines); i++ {
				if e.matches(lines[i]) {
					found = i
					break
				}
			}
			if found < 0 {
				t.Errorf("%s:%d: no output shows %q (want %v)\n--- output\n%s", name, e.line, e.shown, e.pairs, out)
				continue
			}
			next = found + 1
		}
	}
	p.NoCrash(t)
}

// clearOfMinuteEnd waits, before the first block of a minute that uses a minute-long
// window, until that minute has at least 25 s left: the examples' fixed windows are aligned
// to the minute, and a block that straddles a minute's end would see its counter start
// again (README.md's checks did, once in CI: the fourth check allowed, and the usage figures
// after it off by one). Later blocks of the same minute run at once: they use the counters
// the earlier ones spent (README.md's reset), which a wait into the next minute would clear.
func clearOfMinuteEnd(block string) {
	if !strings.Contains(block, "60000") {
		return
	}
	now := time.Now()
	minute := now.Truncate(time.Minute)
	if minute.Equal(clearedMinute) {
		return
	}
	if left := minute.Add(time.Minute).Sub(now); left < 25*time.Second {
		time.Sleep(left + 200*time.Millisecond)
		minute = minute.Add(time.Minute)
	}
	clearedMinute = minute
}

// clearedMinute is the minute clearOfMinuteEnd last found (or waited for) clear of its end.
var clearedMinute time.Time

// TestExpectations: the comment conventions are read as documented.
func TestExpectations(t *testing.T) {
	b := runBlocks("x\n```sh\napi -i $LEASH_URL/v1/limit\n# HTTP/1.1 200 OK\n# Ratelimit-Limit: 3\n# Ratelimit-Reset: 23   <- s\n" +
		"# {\"allowed\":true,\"reset_ms\":5,\"id\":\"ab...\",\n#  \"days\":[{\"day\":\"x\",\"total\":0}]}\n# allowed: 1 of 3 remaining, resets in 21.9s\n```\n```console\nnot run\n```\n")
	if len(b) != 1 || b[0].line != 2 {
		t.Fatalf("blocks = %+v", b)
	}
	es := expectations(b[0])
	if len(es) != 4 || !es[3].matches("allowed: 2 of 3 remaining, resets in 5s") || es[3].matches("denied: 0 of 3 remaining, retry in 5s") || es[0].exact != "HTTP/1.1 200" || es[1].exact != "ratelimit-limit: 3" ||
		strings.Join(es[2].pairs, ",") != `"allowed":true,"total":0` {
		t.Fatalf("expectations = %+v", es)
	}
	if !es[2].matches(`{"allowed":true,"days":[{"total":0}]}`) || es[2].matches(`{"allowed":false,"total":0}`) {
		t.Fatal("a JSON expectation matches wrongly")
	}
	if !es[1].matches("RateLimit-Limit: 3\r") {
		t.Fatal("a header expectation does not match its header")
	}
	// A duration shown in one form matches another's: the run's clock sets the numbers,
	// and a retry just after a minute began is printed "1m0s", not "22s".
	for _, d := range []string{"1m0s", "59.5s", "1h0m0s", "250ms"} {
		if !es[3].matches("allowed: 2 of 3 remaining, resets in " + d) {
			t.Errorf("%q does not match %q", "resets in "+d, es[3].shown)
		}
	}
	if es[3].matches("allowed: 2 of 3 remaining, resets in 5") || es[3].matches("allowed: 2 of 3 remaining, resets in 5 s") {
		t.Error("a number without its unit matches a duration")
	}
}
