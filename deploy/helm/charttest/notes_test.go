package charttest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// notesTemplate wraps NOTES.txt, rendered with tpl, into a ConfigMap, because helm
// template does not render the notes.
const notesTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: rendered-notes
data:
  notes: {{ tpl (.Files.Get "rendered-notes.txt") . | toJson }}
`

// renderNotes renders the chart's install notes for a release, from a copy of the chart
// with notesTemplate added.
func renderNotes(t *testing.T, name, ns string, v values) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "leash")
	err := filepath.WalkDir(chartDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(chartDir, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(chartDir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string]string{
		"rendered-notes.txt":         string(notes),
		"templates/zz-notes-cm.yaml": notesTemplate,
	} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"template", name, dir, "--namespace", ns, "--show-only", "templates/zz-notes-cm.yaml"}, v.flags()...)
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := decodeAll(out)
	if err != nil {
		t.Fatal(err)
	}
	return only[*corev1.ConfigMap](t, ms).Data["notes"]
}

// TestServiceNotes: the notes of a shared service say how to reach it.
func TestServiceNotes(t *testing.T) {
	cases := []struct {
		name  string
		v     values
		want  []string
		avoid []string
	}{
		{"default", values{}, []string{
			"http://leash.leash.svc:8080/v1",
			"leash.leash.svc:8081",
			"outbound|8081||leash.leash.svc.cluster.local",
			"kubectl -n leash port-forward svc/leash 8080:http 9090:admin",
			"kubectl -n leash logs deploy/leash",
			"helm test leash -n leash",
			"allows one replica",
		}, nil},
		{"redis with accounts", values{files: []string{examplesDir + "/values-redis.yaml"}, set: []string{"service.ports.http=80"}},
			[]string{"http://leash.leash.svc:80/v1", "(redis store)", "port-forward svc/leash 80:http"},
			[]string{"No accounts are configured", "allows one replica"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			notes := renderNotes(t, "leash", "leash", tc.v)
			for _, w := range tc.want {
				if !strings.Contains(notes, w) {
					t.Errorf("notes lack %q:\n%s", w, notes)
				}
			}
			for _, a := range tc.avoid {
				if strings.Contains(notes, a) {
					t.Errorf("notes mention %q:\n%s", a, notes)
				}
			}
		})
	}
}

// between returns the text between the line start and the next line end.
func between(t *testing.T, text, start, end string) string {
	t.Helper()
	_, rest, ok := strings.Cut(text, start+"\n")
	if !ok {
		t.Fatalf("no %q in:\n%s", start, text)
	}
	block, _, ok := strings.Cut(rest, end+"\n")
	if !ok {
		t.Fatalf("no %q after %q", end, start)
	}
	return block
}
