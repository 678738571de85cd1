// Package yamlline gives a YAML syntax error the line a reader looks at. The YAML library
// (go.yaml.in/yaml/v3) reports most parser errors at the line before the one at fault,
// or at the line where the enclosing mapping starts: a stray "- c" on line 3 of a mapping
// is reported as line 2. Locate finds the line from the text itself.
package yamlline

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxLines bounds the text Locate re-reads line by line; a longer one keeps the library's
// line, corrected.
const maxLines = 5000

// Problem is one syntax problem: its 1-based line (0 when unknown) and its message.
type Problem struct {
	Line int
	Msg  string
}

// Locate returns the problems of err, an error from decoding data with the YAML library:
// one per entry of a *yaml.TypeError (their lines are right), else one, at the first line
// by which the text can no longer be read as YAML (when the library names a later line,
// that one).
func Locate(data []byte, err error) []Problem {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		out := make([]Problem, 0, len(te.Errors))
		for _, e := range te.Errors {
			out = append(out, split(e, false))
		}
		return out
	}
	p := split(strings.TrimPrefix(err.Error(), "yaml: "), true)
	if first := firstBadLine(data); first > p.Line {
		p.Line = first
	}
	if n := lineCount(data); p.Line > n && n > 0 { // the end of the text, past its last line
		p.Line = n
	}
	return []Problem{p}
}

// split reads "line N: message". The parser's errors ("did not find expected ...") count
// lines from 0 (its scanner's from 1), so with parser a line is corrected; an error with no
// line is on line 1.
func split(s string, parser bool) Problem {
	at, rest, ok := strings.Cut(s, ": ")
	n, err := strconv.Atoi(strings.TrimPrefix(at, "line "))
	if !ok || err != nil || !strings.HasPrefix(at, "line ") {
		if parser {
			return Problem{Line: 1, Msg: s}
		}
		return Problem{Msg: s}
	}
	if parser && strings.HasPrefix(rest, "did not find expected") {
		n++
	}
	return Problem{Line: n, Msg: rest}
}

// firstBadLine is the smallest n such that the first n lines of data are not YAML; 0 when
// every prefix reads (the error is in no whole line) or data is too long to re-read.
func firstBadLine(data []byte) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > maxLines {
		return 0
	}
	end := 0
	for i, l := range lines {
		end += len(l)
		if !parses(data[:end]) {
			return i + 1
		}
	}
	return 0
}

// lineCount is the number of lines of data, a last one without its newline included.
func lineCount(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// parses reports whether every document of data decodes.
func parses(data []byte) (ok bool) {
	defer func() {
		if recover() != nil { // the YAML library must not take the process down
			ok = false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
	}
}
