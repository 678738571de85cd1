package main

import (
	"bytes"
	"errors"
	"fmt"
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
	twoBad := writeTestFile(t, dir, "twobad.yaml", "http:\n  adr: \":1\"\n  bogus: 2\n")
	var many strings.Builder // 22 unknown keys: check-config prints every one (serve, the first 20 and how many more)
	many.WriteString("http:\n")
	for i := range 22 {
		fmt.Fprintf(&many, "  bogus%d: 1\n", i)
	}
	manyBad := writeTestFile(t, dir, "manybad.yaml", many.String())
	// A config written for a container: its descriptor folder is not on this machine, and
	// its store is a host name only the container network resolves.
	container := writeTestFile(t, dir, "container.yaml", `
store:
  backend: redis
  redis: {url: "redis://redis:6379/0"}
accounts:
  - {id: acme, plan: free}
envoy:
  default_account: acme
  config_paths: [/etc/leash/no-such-ratelimit]
`)
	missingAndBad := writeTestFile(t, dir, "missingbad.yaml", `
accounts:
  - {id: acme, plan: free}
envoy:
  default_account: acme
  config_paths: [`+filepath.Join(dir, "absent")+`, `+filepath.Join(dir, "bad")+`]
`)
	// Three files, each with its own problem; the middle one parses but its domain has
	// no account (there is no default).
	three := filepath.Join(dir, "three")
	threeA := writeTestFile(t, three, "a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	threeB := writeTestFile(t, three, "b.yaml", "domain: nobody\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	threeC := writeTestFile(t, three, "c.yaml", "domain: c\nbogus: 1\n")

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string // parts of stdout
		stderr []string // parts of stderr
	}{
		{"no config, a descriptor file", []string{good}, 0, []string{"valid: 1 account, 1 domain: edge\n"}, nil},
		{"config with its config_paths", []string{"--config", cfg}, 0, []string{"valid: 1 account, 1 domain: edge\n"}, nil},
		{"named paths replace config_paths; the store is not contacted", []string{"--config", container, good}, 0,
			[]string{"valid: 1 account, 1 domain: edge\n"},
			[]string{"envoy.config_paths (/etc/leash/no-such-ratelimit) not checked: the paths named on the command line replace them"}},
		{"a missing config_paths folder does not hide the others' problems", []string{"--config", missingAndBad}, 1, nil, []string{
			filepath.Join(dir, "absent") + ": stat: no such file or directory",
			badKey + `:2: bogus: unknown key "bogus"`,
			badUnit + `:5: descriptors[0].rate_limit.unit: unknown unit "fortnight"`,
			"invalid (3 problems)\n"}},
		{"a missing named path does not hide the others' problems", []string{filepath.Join(dir, "nope.yaml"), badUnit}, 1, nil, []string{
			"nope.yaml: stat: no such file or directory",
			badUnit + `:5: descriptors[0].rate_limit.unit: unknown unit "fortnight"`,
			"invalid (2 problems)\n"}},
		{"two config problems count as two", []string{"--config", twoBad}, 1, nil, []string{
			"twobad.yaml:2: http.adr: unknown key", "twobad.yaml:3: http.bogus: unknown key", "invalid (2 problems)\n"}},
		{"one problem", []string{"--config", badCfg}, 1, nil, []string{"invalid (1 problem)\n"}},
		{"every config problem, however many", []string{"--config", manyBad}, 1, nil, []string{
			"manybad.yaml:2: http.bogus0: unknown key", "manybad.yaml:23: http.bogus21: unknown key", "invalid (22 problems)\n"}},
		{"every file's problems, named one by one", []string{"--config", noDefault, threeA, threeB, threeC}, 1, nil, []string{
			threeA + `:4: descriptors[0].rate_limit.unit: unknown unit "fortnight"`,
			threeB + `:1: domain "nobody" maps to no account`,
			threeC + `:2: bogus: unknown key "bogus"`,
			"invalid (3 problems)\n"}},
		{"every file's problems, in a folder", []string{"--config", noDefault, three}, 1, nil, []string{
			threeA + `:4: descriptors[0].rate_limit.unit: unknown unit "fortnight"`,
			threeB + `:1: domain "nobody" maps to no account`,
			threeC + `:2: bogus: unknown key "bogus"`,
			"invalid (3 problems)\n"}},
		{"a file named twice is one file", []string{good, filepath.Join(dir, "rl"), good}, 0, []string{"valid: 1 account, 1 domain: edge\n"}, nil},
		{"flags after paths", []string{good, "--config", noDefault}, 1, nil,
			[]string{good + `:1: domain "edge" maps to no account: set envoy.domains.edge.account or envoy.default_account`}},
		{"every error with file and line", []string{filepath.Join(dir, "bad")}, 1, nil, []string{
			badKey + `:2: bogus: unknown key "bogus"`,
			badUnit + `:5: descriptors[0].rate_limit.unit: unknown unit "fortnight"`,
			"invalid (2 problems)\n"}},
		{"a domain in two places", []string{"--config", cfg, filepath.Join(dir, "rl"), dupe}, 1, nil,
			[]string{dupe + `:1: domain: duplicate domain "edge": ` + good + " defines it too"}},
		{"algorithm not on the plan", []string{"--config", cfg, tb}, 1, nil,
			[]string{tb + `:3: descriptors[0]: algorithm token_bucket is not available on plan free of account "acme"`}},
		{"bad config file, descriptors still checked", []string{"--config", badCfg, badUnit}, 1, nil,
			[]string{"badcfg.yaml:2: http.adr: unknown key", badUnit + ":5: "}},
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

// TestCLIHelp: --help or -h on any command prints that command's usage on stdout and exits
// 0 (spec §13.5), the binary's own commands and the /v1 verbs alike.
func TestCLIHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // a line of the usage
		not  string // a line of another command's usage
	}{
		{[]string{"check-config", "--help"}, "  leash check-config [--config FILE]... [DESCRIPTOR_PATH]...", "leash serve"},
		{[]string{"check-config", "--config", "x.yaml", "-h"}, "  leash check-config [--config FILE]... [DESCRIPTOR_PATH]...", "leash serve"},
		{[]string{"serve", "--help"}, "  leash serve [--config FILE]...", "leash check-config"},
		{[]string{"serve", "-h"}, "  leash serve [--config FILE]...", "leash check-config"},
		{[]string{"keys", "--help"}, "  leash keys new", "leash serve"},
		{[]string{"keys", "new", "-h"}, "  leash keys new", "leash serve"},
		{[]string{"lease", "--help"}, "  leash lease release LEASE_ID", "leash limit"},
		{[]string{"lease", "acquire", "--help"}, "  leash lease acquire NAMESPACE KEY", "leash lease release"},
		{[]string{"webhook", "test", "-h"}, "  leash webhook test", "leash limit"},
		{[]string{"--help"}, "  leash lease renew LEASE_ID", ""},
	} {
		code, out, errOut := leashCLI(t, nil, tc.args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage:\n") || !strings.Contains(out, tc.want) ||
			(tc.not != "" && strings.Contains(out, tc.not)) {
			t.Errorf("%v: exit %d, stderr %q, stdout:\n%s", tc.args, code, errOut, out)
		}
	}
}
