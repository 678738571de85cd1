package devkeys_test

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leashd/leash/internal/devkeys"
)

// TestSaveLoadCopy: digests saved are loaded back, none saved is zero, the file holds
// digests only (never a key) and is its owner's alone, and Copy carries it to a backup.
func TestSaveLoadCopy(t *testing.T) {
	dir := t.TempDir()
	if d, err := devkeys.Load(dir); err != nil || d != (devkeys.Digests{}) {
		t.Fatalf("nothing saved: %+v, %v", d, err)
	}
	want := devkeys.Digests{API: sha256.Sum256([]byte("lsh_api")), Operator: sha256.Sum256([]byte("lsh_op"))}
	if err := devkeys.Save(dir, want); err != nil {
		t.Fatal(err)
	}
	if got, err := devkeys.Load(dir); err != nil || got != want {
		t.Fatalf("loaded %+v, %v; want %+v", got, err, want)
	}
	name := filepath.Join(dir, devkeys.FileName)
	b, _ := os.ReadFile(name)
	if strings.Contains(string(b), "lsh_") {
		t.Errorf("the file holds a key:\n%s", b)
	}
	if info, err := os.Stat(name); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", info.Mode(), err)
	}
	to := t.TempDir()
	if err := devkeys.Copy(dir, to); err != nil {
		t.Fatal(err)
	}
	if got, err := devkeys.Load(to); err != nil || got != want {
		t.Errorf("copied %+v, %v", got, err)
	}
	if err := os.WriteFile(name, []byte(`{"api_key_sha256":"nothex"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := devkeys.Load(dir); err == nil {
		t.Error("a malformed digest was loaded")
	}
}
