package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
)

// The variables README's walkthrough exports for the command line (and LEASH_SRC of its
// Go section) are no config keys: serve and check-config start with them set (spec §10.1).
func TestWalkthroughVariablesDoNotStopServe(t *testing.T) {
	walk := []string{"LEASH_URL=http://localhost:8080", "LEASH_API_KEY=lsh_x", "LEASH_OPERATOR_KEY=lsh_y", "LEASH_SRC=/src/leash"}
	p := leashproc.Start(t, binary, nil, append([]string{"LEASH_DEV_API_KEY=walk-key"}, walk...)...)
	if code, _ := leashproc.Call(t, "POST", "http://"+p.HTTP+"/v1/limit", "walk-key", `{"namespace":"d","key":"k","limit":1,"window_ms":1000}`); code != 200 {
		t.Fatalf("check = %d", code)
	}
	code, out, errOut := leashCLI(t, walk, "check-config")
	if code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("check-config with the walkthrough's variables: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = leashCLI(t, []string{"LEASH_HTTP_ADRR=:1"}, "check-config")
	if code != 1 || !strings.Contains(errOut, "did you mean LEASH_HTTP_ADDR?") {
		t.Fatalf("a mistyped variable: exit %d\n%s", code, errOut)
	}
}

// Without a key the command line sends nothing: it names the variable and the flag that
// give one, and exits 2 (spec §13.5). No server listens at the URL, so a request sent
// would end as exit 3, "unavailable".
func TestCLIRefusesToSendWithoutKey(t *testing.T) {
	env := []string{"LEASH_URL=http://127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"limit", "api", "u1"}, "no API key: set LEASH_API_KEY or pass --key"},
		{[]string{"keys", "list"}, "no API key: set LEASH_API_KEY or pass --key"},
		{[]string{"admin", "accounts", "list"}, "no operator key: set LEASH_OPERATOR_KEY or pass --key"},
	} {
		code, out, errOut := leashCLI(t, env, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s", tc.args, code, out, errOut)
		}
	}
	// An admin verb does not take the account's key, nor an account verb the operator's.
	code, _, errOut := leashCLI(t, append(env, "LEASH_API_KEY=lsh_x"), "admin", "accounts", "list")
	if code != 2 || !strings.Contains(errOut, "LEASH_OPERATOR_KEY") {
		t.Errorf("admin verb with only LEASH_API_KEY: exit %d\n%s", code, errOut)
	}
}

// Usage errors exit 2 and say what was probably meant: a mistyped verb, sub-verb, flag,
// or algorithm (spec §13.5).
func TestCLIUsageErrorsSuggest(t *testing.T) {
	env := []string{"LEASH_URL=http://127.0.0.1:1", "LEASH_API_KEY=lsh_x"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"limts", "api", "u1"}, `unknown command "limts": did you mean "limit"?`},
		{[]string{"sevre"}, `unknown command "sevre": did you mean "serve"?`},
		{[]string{"rules", "lst", "api"}, `unknown command "rules lst": did you mean "rules list"?`},
		{[]string{"keys", "neww"}, `unknown command "keys neww": did you mean "keys new"?`},
		{[]string{"limit", "api", "u1", "--algoritm", "token_bucket"}, "flag provided but not defined: -algoritm (did you mean --algorithm?)"},
		{[]string{"limit", "api", "u1", "--algorithm", "fixed-window"}, `unknown algorithm "fixed-window": did you mean fixed_window?`},
		{[]string{"reset", "api", "u1", "--algorithm", "leaky"}, `unknown algorithm "leaky" (fixed_window, sliding_window or token_bucket)`},
		{[]string{"rules", "set", "api", "--algorithm", "concurrent-limit", "--limit", "1", "--window-ms", "1000"}, "did you mean concurrent_limit?"},
		{[]string{"serve", "--confg", "x.yaml"}, "flag provided but not defined: -confg (did you mean --config?)"},
		{[]string{"check-config", "--confg", "x.yaml"}, "flag provided but not defined: -confg (did you mean --config?)"},
	} {
		code, _, errOut := leashCLI(t, env, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, want 2 and %q in stderr:\n%s", tc.args, code, tc.want, errOut)
		}
	}
}

// check-config names every problem with its file and line, a YAML syntax error at the
// line at fault and a bad value with the file that set it, and counts what it prints
// (spec §9.16, §10.3).
func TestCheckConfigEveryProblemWithFileAndLine(t *testing.T) {
	dir := t.TempDir()
	three := writeTestFile(t, dir, "three.yaml", "http:\n  addr: 5\nstore:\n  memory:\n    max_entries: 0\nlog:\n  level: loud\n")
	syntax := writeTestFile(t, dir, "syntax.yaml", "http:\n  addr: \":1\"\n- oops\n")
	first := writeTestFile(t, dir, "first.yaml", "http:\n  adr: \":1\"\n")
	second := writeTestFile(t, dir, "second.yaml", "log:\n  format: json\n  level: 3\n")
	timeout := writeTestFile(t, dir, "timeout.yaml", "log: {level: info}\nshutdown:\n  timeout: 1s\n")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"a type error and two bad values", nil, []string{"--config", three}, []string{
			three + `:2: http.addr: expected a string, got the integer 5`,
			three + `:5: store.memory.max_entries: must be 1 or more`,
			three + `:7: log.level: must be debug, info, warn or error, got "loud"`,
			"invalid (3 problems)\n"}},
		{"a syntax error at its line", nil, []string{"--config", syntax}, []string{
			syntax + ":3: did not find expected key", "invalid (1 problem)\n"}},
		{"every file's problems", nil, []string{"--config", first, "--config", second}, []string{
			first + ":2: http.adr: unknown key", second + ":3: log.level: expected a string", "invalid (2 problems)\n"}},
		{"a default at fault: the key that made it so", nil, []string{"--config", timeout}, []string{
			timeout + ":2: shutdown.drain_delay: must be below shutdown.timeout (1s)", "invalid (1 problem)\n"}},
		{"a variable at fault", []string{"LEASH_STORE_MEMORY_MAX_ENTRIES=0"}, nil, []string{
			"store.memory.max_entries (environment variable LEASH_STORE_MEMORY_MAX_ENTRIES): must be 1 or more", "invalid (1 problem)\n"}},
	} {
		code, out, errOut := leashCLI(t, tc.env, append([]string{"check-config"}, tc.args...)...)
		if code != 1 {
			t.Errorf("%s: exit %d\n%s%s", tc.name, code, out, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.name, w, errOut)
			}
		}
	}
}

// A taken port stops serve before it prints fresh dev keys (they would be dead at once),
// with the setting that moves the listener (spec §12.1).
func TestBusyPortNamesTheSetting(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct{ env, setting, variable string }{
		{"LEASH_HTTP_ADDR", "http.addr", "LEASH_HTTP_ADDR"},
		{"LEASH_ADMIN_ADDR", "admin.addr", "LEASH_ADMIN_ADDR"},
		{"LEASH_GRPC_ADDR", "grpc.addr", "LEASH_GRPC_ADDR"},
	} {
		env := map[string]string{"LEASH_HTTP_ADDR": "127.0.0.1:0", "LEASH_ADMIN_ADDR": "127.0.0.1:0", "LEASH_GRPC_ADDR": "127.0.0.1:0"}
		env[tc.env] = taken.Addr().String()
		var kv []string
		for k, v := range env {
			kv = append(kv, k+"="+v)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, binary, "serve")
		cmd.Env = append(leashproc.Environ(), kv...)
		cmd.Dir = t.TempDir() // the default disk store's leash-data goes there, not into the repository
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("%s taken: %v\n%s", tc.setting, err, errb.String())
		}
		if strings.Contains(out.String(), "lsh_") {
			t.Errorf("%s taken: keys printed before failing:\n%s", tc.setting, out.String())
		}
		for _, want := range []string{`"setting":"` + tc.setting + `"`, tc.variable, "in use"} {
			if !strings.Contains(errb.String(), want) {
				t.Errorf("%s taken: stderr lacks %q:\n%s", tc.setting, want, errb.String())
			}
		}
	}
}

// A webhook URL refused for a rule that a setting relaxes for local trials names that
// setting (spec §8.2).
func TestWebhookRejectionNamesTheTrialSettings(t *testing.T) {
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=hook-key")
	env := []string{"LEASH_URL=http://" + p.HTTP, "LEASH_API_KEY=hook-key"}
	for _, tc := range []struct{ url, want string }{
		{"http://127.0.0.1:9/hook", "webhooks.allow_http"},
		{"https://localhost:9/hook", "webhooks.allow_private_targets"},
		{"https://localhost:9/hook", "127.0.0.1"},
		{"https://127.0.0.1:9/hook", "webhooks.allow_private_targets"},
	} {
		code, _, errOut := leashCLI(t, env, "webhook", "set", tc.url)
		if code != 3 || !strings.Contains(errOut, "webhook_url_rejected") || !strings.Contains(errOut, tc.want) {
			t.Errorf("webhook set %s: exit %d, want the rejection naming %q:\n%s", tc.url, code, tc.want, errOut)
		}
	}
	// A URL no setting admits names none.
	code, _, errOut := leashCLI(t, env, "webhook", "set", "https://169.254.169.254/hook")
	if code != 3 || strings.Contains(errOut, "webhooks.") {
		t.Errorf("a link-local address: exit %d:\n%s", code, errOut)
	}
}

// Instances on one Redis share accounts but not generated dev keys: each prints its own,
// which the others refuse, and says how to share one (docs/redis.md); the same
// LEASH_DEV_OPERATOR_KEY on both is accepted by both.
func TestDevKeysOnSharedRedis(t *testing.T) {
	r := redistest.StartServer(t, false)
	store := []string{"LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL=" + r.URL()}
	a := leashproc.Start(t, binary, nil, store...)
	b := leashproc.Start(t, binary, nil, store...)
	keyRE := regexp.MustCompile(`LEASH_OPERATOR_KEY=(lsh_[A-Za-z0-9_-]{43}) leash admin`)
	ma, mb := keyRE.FindStringSubmatch(a.Stdout.String()), keyRE.FindStringSubmatch(b.Stdout.String())
	if ma == nil || mb == nil || ma[1] == mb[1] {
		t.Fatalf("each instance prints its own operator key:\n%s\n%s", a.Stdout.String(), b.Stdout.String())
	}
	for _, want := range []string{"this instance's own", "LEASH_DEV_OPERATOR_KEY", "LEASH_DEV_API_KEY"} {
		if !strings.Contains(a.Stdout.String(), want) {
			t.Errorf("the banner on Redis lacks %q:\n%s", want, a.Stdout.String())
		}
	}
	if code, _ := leashproc.Call(t, "GET", "http://"+b.HTTP+"/v1/admin/accounts", ma[1], ""); code != 401 {
		t.Errorf("the first instance's generated key on the second: %d, want 401", code)
	}
	shared := append(store, "LEASH_DEV_OPERATOR_KEY=lsh_shared_operator_key")
	c, d := leashproc.Start(t, binary, nil, shared...), leashproc.Start(t, binary, nil, shared...)
	for _, p := range []*leashproc.Proc{c, d} {
		if code, _ := leashproc.Call(t, "GET", "http://"+p.HTTP+"/v1/admin/accounts", "lsh_shared_operator_key", ""); code != 200 {
			t.Errorf("the shared operator key: %d", code)
		}
	}
}
