// Package charttest tests the Helm chart in deploy/helm/leash: it runs the helm binary
// (helm lint, helm template), decodes every rendered manifest strictly into the
// k8s.io/api types (unknown or duplicate fields fail) and checks what matters, including
// that the config the chart renders is accepted by Leash's own loader. It holds only
// tests, so the Kubernetes modules stay out of the leash binary.
//
// helm is looked up on PATH, then in $(go env GOPATH)/bin (where .ci/run installs it).
// Without it the tests fail when CI=true and are skipped otherwise.
package charttest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// chartDir is the chart under test, relative to this package.
const chartDir = "../leash"

// examplesDir holds the example values files.
const examplesDir = "../examples"

var (
	helmOnce sync.Once
	helmPath string
	helmHome string // HELM_*_HOME for every run, so no user state is read or written
)

// helm returns the helm binary, failing the test in CI and skipping it elsewhere when
// there is none.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if p, err := exec.LookPath("helm"); err == nil {
			helmPath = p
		} else {
			for _, dir := range goBinDirs() {
				p := filepath.Join(dir, "helm")
				if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
					helmPath = p
					break
				}
			}
		}
		if helmPath != "" {
			if d, err := os.MkdirTemp("", "leash-charttest-"); err == nil {
				helmHome = d
			}
		}
		readInputs()
	})
	if helmPath == "" {
		msg := "helm not found on PATH or in $(go env GOPATH)/bin: install it with " +
			"`go install helm.sh/helm/v3/cmd/helm@v3.22.0` (as .ci/run does)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPING THE HELM CHART TESTS: " + msg)
	}
	return helmPath
}

// inputs are the files helm and the tests read besides this package's own.
var inputs = []string{chartDir, examplesDir, "../../sidecar", "../../../examples/istio", "../../../Dockerfile"}

// readInputs reads every input file in this process. helm reads the chart in a child
// process, which go test's cache does not see; files this process opens are part of the
// cache key, so an edited chart reruns the tests.
func readInputs() {
	for _, root := range inputs {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				_, _ = os.ReadFile(p)
			}
			return nil
		})
	}
	_, _ = os.Stat(helmPath)
}

// goBinDirs are the folders `go install` puts binaries in: GOBIN, else each GOPATH's bin.
func goBinDirs() []string {
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return nil
	}
	gobin, gopath, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if gobin = strings.TrimSpace(gobin); gobin != "" {
		return []string{gobin}
	}
	var dirs []string
	for _, p := range filepath.SplitList(strings.TrimSpace(gopath)) {
		dirs = append(dirs, filepath.Join(p, "bin"))
	}
	return dirs
}

// runHelm runs helm with args and returns its standard output; err carries the
// standard error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmHome, "data"),
		"KUBECONFIG="+filepath.Join(helmHome, "no-kubeconfig"),
		"HELM_NO_PLUGINS=1",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// values builds the helm flags for values files and --set-string/--set pairs.
type values struct {
	files []string // values files, in order
	set   []string // --set key=value, in order
}

func (v values) flags() []string {
	var out []string
	for _, f := range v.files {
		out = append(out, "-f", f)
	}
	for _, s := range v.set {
		out = append(out, "--set", s)
	}
	return out
}

// template renders the chart as release name in namespace ns.
func template(t *testing.T, name, ns string, v values) (string, error) {
	t.Helper()
	args := append([]string{"template", name, chartDir, "--namespace", ns}, v.flags()...)
	return runHelm(t, args...)
}

// exampleValues lists the example values files.
func exampleValues(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(examplesDir, "values-*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example values files in %s: %v", examplesDir, err)
	}
	return files
}

func TestMain(m *testing.M) {
	code := m.Run()
	if helmHome != "" {
		os.RemoveAll(helmHome)
	}
	os.Exit(code)
}
