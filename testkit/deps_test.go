package testkit

import (
	"strings"
	"testing"
)

// TestNonStdlibDeps: the check sees a package that compiles the engine and one that
// compiles grpc.
func TestNonStdlibDeps(t *testing.T) {
	for pkg, want := range map[string]string{
		"github.com/leashd/leash/webhook":     "github.com/leashd/leash/engine (not in the standard library)",
		"github.com/leashd/leash/adapter/rls": "google.golang.org/grpc (grpc, go-redis, viper, prometheus, k8s or envoy)",
	} {
		bad, err := NonStdlibDeps(pkg)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(bad, "\n"), want) {
			t.Errorf("%s: %q lacks %q", pkg, bad, want)
		}
	}
	if bad, err := NonStdlibDeps("encoding/json"); err != nil || len(bad) != 0 {
		t.Fatalf("encoding/json: %v %v", bad, err)
	}
}
