package filewatch_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/leashd/leash/internal/filewatch"
)

func TestDirs(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	target := filepath.Join(dir, "data")
	for _, d := range []string{sub, target} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(target, "f.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "f.yaml")
	if err := os.Symlink(filepath.Join(target, "f.yaml"), link); err != nil {
		t.Fatal(err)
	}
	got := filewatch.Dirs([]string{sub, link, filepath.Join(dir, "missing.yaml"), sub})
	want := []string{sub, dir, target}
	if !slices.Equal(got, want) {
		t.Fatalf("Dirs = %v, want %v", got, want)
	}
}

// TestRunReportsEventsSoon: a write is reported within the settle time, long before the
// poll tick (an hour). Run gives no sign that it watches its folders yet, so the test
// writes again every half second until a check comes, up to a deadline: only an event
// can bring one.
func TestRunReportsEventsSoon(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.yaml")
	calls := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		filewatch.Run(ctx, []string{path}, time.Hour, func() { calls <- struct{}{} }, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()
	deadline := time.After(10 * time.Second)
	for {
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		select {
		case <-calls:
			return
		case <-time.After(5 * filewatch.Settle):
		case <-deadline:
			t.Fatal("no check after a write")
		}
	}
}
