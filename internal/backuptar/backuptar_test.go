package backuptar_test

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leashd/leash/internal/backuptar"
)

// TestRoundTrip: Write's stream, unpacked by Extract, gives back every file with its bytes.
func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{"000002.log": strings.Repeat("x", 70_000), "MANIFEST-000001": "m", "empty": ""}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := backuptar.Write(&buf, src); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := backuptar.Extract(&buf, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadDir(dst)
	if err != nil || len(got) != len(files) {
		t.Fatalf("%d files unpacked, want %d (%v)", len(got), len(files), err)
	}
	for name, body := range files {
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(b) != body {
			t.Errorf("%s: %d bytes, %v; want %d", name, len(b), err, len(body))
		}
	}
	if err := backuptar.Extract(bytes.NewReader(nil), dst); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("Extract into an existing directory: %v", err)
	}
}

// TestExtractRefusesPathsAndLinks: a stream naming a path outside the directory, a
// folder, a hidden name or a link is refused, and nothing is written outside.
func TestExtractRefusesPathsAndLinks(t *testing.T) {
	for _, hdr := range []tar.Header{
		{Name: "../escape", Typeflag: tar.TypeReg, Size: 1},
		{Name: "a/b", Typeflag: tar.TypeReg, Size: 1},
		{Name: "/abs", Typeflag: tar.TypeReg, Size: 1},
		{Name: ".hidden", Typeflag: tar.TypeReg, Size: 1},
		{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
		{Name: "dir", Typeflag: tar.TypeDir},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			tw.Write([]byte("x"))
		}
		tw.Close()
		parent := t.TempDir()
		err := backuptar.Extract(&buf, filepath.Join(parent, "copy"))
		if err == nil || !strings.Contains(err.Error(), "not a plain file") {
			t.Errorf("%q (type %c): %v, want a refusal", hdr.Name, hdr.Typeflag, err)
		}
		if _, err := os.Stat(filepath.Join(parent, "escape")); err == nil {
			t.Errorf("%q wrote outside the directory", hdr.Name)
		}
	}
}
