package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a bytes.Buffer that is safe to write from one goroutine (a logger, a child
// process) while another reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Eventually polls cond every 10 ms until it holds, and fails the test when it does not
// hold within the given time.
func Eventually(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ReplaceFile gives path the new content the way editors and Kubernetes ConfigMaps do: a
// new file written beside it and renamed over it.
func ReplaceFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TableRows returns the body rows, as lines, of the Markdown table in the file at path
// that starts with a header line beginning with header, the first such after the line
// heading; it fails t when either is missing.
func TableRows(t testing.TB, path, heading, header string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, heading)
	if i < 0 {
		t.Fatalf("%s: no heading %q", path, heading)
	}
	s = s[i:]
	j := strings.Index(s, header)
	if j < 0 {
		t.Fatalf("%s: no table %q after %q", path, header, heading)
	}
	var rows []string
	for n, line := range strings.Split(s[j:], "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if n >= 2 { // the header and the separator
			rows = append(rows, line)
		}
	}
	return rows
}
