package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leashd/leash/testkit/leashproc"
)

// runCheck runs the built `leash check-config args...` with no LEASH_ variables set and
// returns its exit code and output.
func runCheck(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"check-config"}, args...)...)
	cmd.Env = leashproc.Environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

func writeTestFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// `leash check-config` loads what serve loads and reports every problem with its file and
// line (spec §9.16); the peer's counterpart is src/config_check_cmd/main.go.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := writeTestFile(t, dir, "rl/edge.yaml", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 10}\n")
	badUnit := writeTestFile(t, dir, "bad/unit.yaml", "domain: api\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n")
	badKey := writeTestFile(t, dir, "bad/key.yaml", "domain: other\nbogus: 1\n")
	dupe := writeTestFile(t, dir, "dupe/edge.yaml", "domain: edge\n")
	tb := writeTestFile(t, dir, "tb/tb.yaml", "domain: tb\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket}\n")
	cfg := writeTestFile(t, dir, "leash.yaml", `
accounts:
  - {id: acme, plan: free}
envoy:
  default_account: acme
  config_paths: [`+filepath.Join(dir, "rl")+`]
`)
	noDefault := writeTestFile(t, dir, "nodefault.yaml", "accounts:\n  - {id: acme, plan: free}\n")
	badCfg := writeTestFile(t, dir, "badcfg.yaml", "http:\n  adr: \":1\"\n")

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string // parts of stdout
		stderr []string // parts of stderr
	}{
		{"no config, a descriptor file", []string{good}, 0, []string{"valid: 1 account(s), 1 domain(s): edge"}, nil},
		{"config with its config_paths", []string{"--config", cfg}, 0, []string{"valid: 1 account(s), 1 domain(s): edge"}, nil},
		{"flags after paths", []string{good, "--config", noDefault}, 1, nil,
			[]string{good + `:1: domain "edge" maps to no account: set envoy.domains.edge.account or envoy.default_account`}},
		{"every error with file and line", []string{filepath.Join(dir, "bad")}, 1, nil, []string{
			badKey + `:2: bogus: unknown key "bogus"`,
			badUnit + `:5: descriptors[0].rate_limit.unit: unknown unit "fortnight"`,
			"invalid (2 problem(s))"}},
		{"a domain in two places", []string{"--config", cfg, dupe}, 1, nil,
			[]string{dupe + `:1: domain: duplicate domain "edge": ` + good + " defines it too"}},
		{"algorithm not on the plan", []string{"--config", cfg, tb}, 1, nil,
			[]string{tb + `:3: descriptors[0]: algorithm token_bucket is not available on plan free of account "acme"`}},
		{"bad config file, descriptors still checked", []string{"--config", badCfg, badUnit}, 1, nil,
			[]string{"badcfg.yaml: http.adr: unknown key", badUnit + ":5: "}},
		{"missing path", []string{filepath.Join(dir, "nope.yaml")}, 1, nil, []string{"nope.yaml: stat: no such file or directory"}},
		{"bad flag", []string{"--bogus"}, 2, nil, []string{"flag provided but not defined: -bogus"}},
		{"flag without value", []string{"--config"}, 2, nil, []string{"flag needs an argument"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCheck(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}
