package testkit

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// heavyDeps are module paths a stdlib-only package must never pull in.
var heavyDeps = []string{"google.golang.org/grpc", "github.com/redis/go-redis", "github.com/spf13/viper",
	"github.com/prometheus", "k8s.io", "sigs.k8s.io", "github.com/envoyproxy"}

// NonStdlibDeps returns the packages `go list -deps pkg` names outside the standard
// library, other than pkg itself and allowed, each with why it is refused.
func NonStdlibDeps(pkg string, allowed ...string) ([]string, error) {
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	ok := map[string]bool{pkg: true}
	for _, a := range allowed {
		ok[a] = true
	}
	var bad []string
	for dep := range strings.FieldsSeq(string(out)) {
		heavy := false
		for _, h := range heavyDeps {
			heavy = heavy || strings.HasPrefix(dep, h)
		}
		first, _, _ := strings.Cut(dep, "/")
		switch {
		case heavy:
			bad = append(bad, dep+" (grpc, go-redis, viper, prometheus, k8s or envoy)")
		case strings.Contains(first, ".") && !ok[dep]:
			bad = append(bad, dep+" (not in the standard library)")
		}
	}
	return bad, nil
}

// StdlibOnly fails t when pkg depends on a package outside the standard library other
// than allowed (import paths of this module), or on any of grpc, go-redis, viper,
// prometheus, k8s or envoy.
func StdlibOnly(t *testing.T, pkg string, allowed ...string) {
	t.Helper()
	bad, err := NonStdlibDeps(pkg, allowed...)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s depends on %s", pkg, b)
	}
}
