package testkit

import (
	"os/exec"
	"strings"
	"testing"
)

// heavyDeps are module paths a stdlib-only package must never pull in.
var heavyDeps = []string{"google.golang.org/grpc", "github.com/redis/go-redis", "github.com/spf13/viper",
	"github.com/prometheus", "k8s.io", "sigs.k8s.io", "github.com/envoyproxy"}

// StdlibOnly fails t when `go list -deps pkg` names a package outside the standard library
// other than pkg itself and allowed (import paths of this module), or any of the heavy
// modules (grpc, go-redis, viper, prometheus, k8s, envoy).
func StdlibOnly(t *testing.T, pkg string, allowed ...string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	ok := map[string]bool{pkg: true}
	for _, a := range allowed {
		ok[a] = true
	}
	for dep := range strings.FieldsSeq(string(out)) {
		for _, h := range heavyDeps {
			if strings.HasPrefix(dep, h) {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
		first, _, _ := strings.Cut(dep, "/")
		if strings.Contains(first, ".") && !ok[dep] {
			t.Errorf("%s depends on %s, which is not in the standard library", pkg, dep)
		}
	}
}
