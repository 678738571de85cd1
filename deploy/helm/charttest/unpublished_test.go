package charttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// published is the image the chart names by default, not published yet.
const published = "ghcr.io/leashd/leash"

// TestNotesSayHowToGetTheImage: installed with the default (unpublished) image, the notes
// say how to build the image and load it into the cluster; with an image of one's own,
// they do not.
func TestNotesSayHowToGetTheImage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		v    values
		want bool
	}{
		{"default image", values{}, true},
		{"sidecar, default image", values{files: []string{examplesDir + "/values-sidecar.yaml"}}, true},
		{"own image", values{set: []string{"image.repository=registry.example.com/leash"}}, false},
	} {
		notes := renderNotes(t, "leash", "leash", tc.v)
		for _, w := range []string{published + ":0.1.0 is not published yet", "make image IMAGE=leash:0.1.0",
			"kind load docker-image leash:0.1.0", "minikube image load leash:0.1.0", "--set image.repository=leash"} {
			if strings.Contains(notes, w) != tc.want {
				t.Errorf("%s: notes mention %q: %v, want %v:\n%s", tc.name, w, !tc.want, tc.want, notes)
			}
		}
	}
}

// TestUnpublishedImageExplained: every file of the repository's docs and deploy/ that
// names the unpublished image says how to build it and load it into a cluster.
func TestUnpublishedImageExplained(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	var files []string
	for _, dir := range []string{"deploy", "docs"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "testdata") {
				return err
			}
			files = append(files, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	named := 0
	for _, f := range append(files, filepath.Join(root, "README.md")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if !strings.Contains(text, published+":") && !strings.Contains(text, "repository: "+published) {
			continue
		}
		named++
		if !strings.Contains(text, "make image") || !strings.Contains(text, "kind load docker-image") {
			t.Errorf("%s names %s, which is not published, without how to build it (make image) and load it (kind load docker-image)", f, published)
		}
	}
	if named == 0 {
		t.Fatal("no file names the image: the test looks in the wrong place")
	}
}
