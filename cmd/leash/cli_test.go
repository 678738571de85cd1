package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
)

// leashCLI runs the built binary with args and env (plus PATH and GORACE only) and returns
// its exit status, stdout and stderr.
func leashCLI(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "GORACE=" + os.Getenv("GORACE")}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// TestCLI drives every verb of the command line against a running server as a user
// would: exit statuses, text and --json output, flags before and after the arguments,
// the URL and key from flags or the environment.
func TestCLI(t *testing.T) {
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=cli-key", "LEASH_WEBHOOKS_ALLOW_HTTP=true", "LEASH_WEBHOOKS_ALLOW_PRIVATE_TARGETS=true")
	env := []string{"LEASH_URL=http://" + p.HTTP, "LEASH_API_KEY=cli-key"}
	run := func(args ...string) (int, string, string) { t.Helper(); return leashCLI(t, env, args...) }
	jsonOf := func(s string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("not one JSON object: %q", s)
		}
		return m
	}
	expect := func(what string, code, want int, out, errOut string) {
		t.Helper()
		if code != want {
			t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, code, want, out, errOut)
		}
	}

	// limit: allowed (flags after, then before the arguments), denied = exit 1. A token bucket,
	// so that no window boundary can fall between the checks.
	code, out, eo := run("limit", "api", "u1", "--algorithm", "token_bucket", "--limit", "2", "--window-ms", "60000")
	expect("first check", code, 0, out, eo)
	if !strings.HasPrefix(out, "allowed: 1 of 2 remaining") {
		t.Fatalf("text output %q", out)
	}
	code, out, eo = run("limit", "--json", "--limit=2", "api", "--window-ms", "60000", "--algorithm", "token_bucket", "u1")
	expect("second check", code, 0, out, eo)
	if m := jsonOf(out); m["allowed"] != true || m["remaining"] != 0.0 || m["limit"] != 2.0 {
		t.Fatalf("--json %v", m)
	}
	code, out, eo = run("limit", "api", "u1", "--algorithm", "token_bucket", "--limit", "2", "--window-ms", "60000", "--json")
	expect("denied check", code, 1, out, eo)
	if m := jsonOf(out); m["allowed"] != false || m["reset_ms"].(float64) <= 0 {
		t.Fatalf("denied --json %v", m)
	}
	// cost 0 looks without spending: a counter at its limit answers allowed, 0 remaining.
	code, out, eo = run("limit", "api", "u1", "--algorithm", "token_bucket", "--limit", "2", "--window-ms", "60000", "--cost", "0")
	expect("peek at a full counter", code, 0, out, eo)
	if !strings.HasPrefix(out, "allowed: 0 of 2 remaining") {
		t.Fatalf("peek printed %q", out)
	}

	// reset: then the counter is fresh; a second reset finds nothing (still exit 0).
	code, out, eo = run("reset", "api", "u1", "--algorithm", "token_bucket", "--window-ms", "60000", "--json")
	expect("reset", code, 0, out, eo)
	if m := jsonOf(out); m["reset"] != true {
		t.Fatalf("reset --json %v", m)
	}
	code, out, _ = run("reset", "api", "u1", "--algorithm", "token_bucket", "--window-ms", "60000")
	expect("second reset", code, 0, out, "")
	if !strings.Contains(out, "nothing to reset") {
		t.Fatalf("second reset printed %q", out)
	}

	// rules set / list / delete.
	code, out, eo = run("rules", "set", "jobs", "--algorithm", "concurrent_limit", "--limit", "1", "--window-ms", "30000", "--name", "exports", "--json")
	expect("rules set", code, 0, out, eo)
	if m := jsonOf(out); m["namespace"] != "jobs" || m["name"] != "exports" || m["limit"] != 1.0 {
		t.Fatalf("rules set --json %v", m)
	}
	code, out, eo = run("rules", "list", "jobs")
	expect("rules list", code, 0, out, eo)
	if !regexp.MustCompile(`(?m)^concurrent\s+concurrent_limit\s+1\s+30s\s+exports`).MatchString(out) {
		t.Fatalf("rules list printed\n%s", out)
	}
	// Per-key overrides (spec §6.7): --override KEY=LIMIT[:WINDOW_MS], shown by rules list.
	code, out, eo = run("rules", "set", "tiers", "--algorithm", "fixed_window", "--limit", "1", "--window-ms", "60000",
		"--override", "big=3", "--override", "slow=2:120000", "--override", "client=gold=4", "--json")
	expect("rules set with overrides", code, 0, out, eo)
	if ovs, _ := jsonOf(out)["overrides"].([]any); len(ovs) != 3 || ovs[1].(map[string]any)["window_ms"] != 120000.0 ||
		ovs[2].(map[string]any)["key"] != "client=gold" {
		t.Fatalf("rules set --override --json %s", out)
	}
	code, out, _ = run("rules", "list", "tiers")
	expect("rules list with overrides", code, 0, out, "")
	if !strings.Contains(out, `"big"=3,"slow"=2/2m0s,"client=gold"=4`) {
		t.Fatalf("rules list printed\n%s", out)
	}
	code, out, _ = run("limit", "tiers", "big", "--json")
	expect("check on an overridden key", code, 0, out, "")
	if m := jsonOf(out); m["limit"] != 3.0 {
		t.Fatalf("overridden check --json %v", m)
	}

	code, out, _ = run("rules", "list", "empty", "--json")
	expect("rules list of nothing", code, 0, out, "")
	if m := jsonOf(out); m["namespace"] != "empty" || len(m["rules"].([]any)) != 0 {
		t.Fatalf("empty rules --json %v", m)
	}

	// lease acquire (limit from the rule) / denied = 1 / renew / release / renew again = 1.
	code, out, eo = run("lease", "acquire", "jobs", "export", "--json")
	expect("acquire", code, 0, out, eo)
	lease := jsonOf(out)
	id, _ := lease["lease_id"].(string)
	if !strings.HasPrefix(id, "l1.") || lease["limit"] != 1.0 || lease["reset_ms"] != 30000.0 {
		t.Fatalf("acquire --json %v", lease)
	}
	code, out, eo = run("lease", "acquire", "jobs", "export")
	expect("refused lease", code, 1, out, eo)
	if !strings.HasPrefix(out, "denied: 1 of 1 held") {
		t.Fatalf("refused lease printed %q", out)
	}
	code, out, eo = run("lease", "renew", id, "--window-ms", "60000", "--json")
	expect("renew", code, 0, out, eo)
	if m := jsonOf(out); m["renewed"] != true || m["reset_ms"] != 60000.0 {
		t.Fatalf("renew --json %v", m)
	}
	// A --window-ms given is sent, even 0, and the service refuses it (spec §5.5, §13.5).
	code, out, eo = run("lease", "renew", id, "--window-ms", "0")
	expect("renew --window-ms 0", code, 3, out, eo)
	if !strings.Contains(eo, "invalid_request (400)") {
		t.Fatalf("renew --window-ms 0 printed %q on stderr", eo)
	}
	code, out, eo = run("lease", "release", id)
	expect("release", code, 0, out, eo)
	if !strings.HasPrefix(out, "released: 0 still held") {
		t.Fatalf("release printed %q", out)
	}
	code, _, _ = run("lease", "renew", id)
	expect("renew of a released lease", code, 1, "", "")

	code, out, _ = run("rules", "delete", "jobs", "concurrent", "--json")
	expect("rules delete", code, 0, out, "")
	if m := jsonOf(out); m["deleted"] != true {
		t.Fatalf("rules delete --json %v", m)
	}

	// Service errors: exit 3 with the code on stderr.
	for _, tc := range []struct {
		args []string
		code string
	}{
		{[]string{"limit", "api", "u1"}, "missing_limit"},
		{[]string{"lease", "release", "nonsense"}, "invalid_lease_id"},
		{[]string{"stats", "api", "--key", "wrong"}, "unauthorized"},
		{[]string{"webhook", "get"}, "webhook_not_found"},
		{[]string{"webhook", "set", "ftp://example.com/"}, "webhook_url_rejected"},
		{[]string{"rules", "set", "api", "--algorithm", "fixed_window", "--limit", "0", "--window-ms", "1"}, "invalid_rule"},
	} {
		code, out, eo := run(tc.args...)
		expect(strings.Join(tc.args, " "), code, 3, out, eo)
		if !strings.Contains(eo, tc.code) {
			t.Fatalf("%v: stderr %q lacks %s", tc.args, eo, tc.code)
		}
	}
	code, _, eo = leashCLI(t, []string{"LEASH_API_KEY=cli-key", "LEASH_URL=http://127.0.0.1:1"}, "limit", "a", "b", "--limit", "1", "--window-ms", "1")
	expect("unreachable service", code, 3, "", eo)
	if !strings.Contains(eo, "unavailable") {
		t.Fatalf("unreachable: %q", eo)
	}
	// --url and --key flags win over the environment.
	code, _, eo = leashCLI(t, []string{"LEASH_URL=http://127.0.0.1:1", "LEASH_API_KEY=wrong"}, "limit", "a", "b",
		"--url", "http://"+p.HTTP, "--key", "cli-key", "--limit", "1", "--window-ms", "1000")
	expect("flags over env", code, 0, "", eo)

	// Usage errors: exit 2.
	for _, args := range [][]string{
		{"limit", "api"},
		{"limit", "api", "k", "extra"},
		{"limit", "api", "k", "--bogus"},
		{"limit", "api", "k", "--limit", "many"},
		{"lease"},
		{"lease", "steal", "x"},
		{"rules", "set", "api", "--limit", "1"},
		{"rules", "delete", "api", "everything"},
		{"rules", "set", "api", "--algorithm", "fixed_window", "--limit", "1", "--window-ms", "1", "--override", "nolimit"},
		{"webhook", "set"},
		{"limit", "a", "b", "--url", "localhost:8080"},
	} {
		code, out, eo := run(args...)
		expect(strings.Join(args, " "), code, 2, out, eo)
		if !strings.Contains(eo, "usage:") {
			t.Fatalf("%v: no usage on stderr: %q", args, eo)
		}
	}

	// webhook set / get / test (a delivery arrives) / delete.
	got := make(chan string, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
	}))
	defer recv.Close()
	code, out, eo = run("webhook", "set", recv.URL+"/hook", "--json")
	expect("webhook set", code, 0, out, eo)
	if m := jsonOf(out); m["url"] != recv.URL+"/hook" || !strings.HasPrefix(m["secret"].(string), "whsec_") {
		t.Fatalf("webhook set --json %v", m)
	}
	code, out, _ = run("webhook", "get")
	expect("webhook get", code, 0, out, "")
	if strings.TrimSpace(out) != recv.URL+"/hook" {
		t.Fatalf("webhook get printed %q", out)
	}
	code, out, _ = run("webhook", "test", "--json")
	expect("webhook test", code, 0, out, "")
	evt, _ := jsonOf(out)["event_id"].(string)
	select {
	case b := <-got:
		if !strings.Contains(b, evt) {
			t.Fatalf("delivery %s is not event %s", b, evt)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery of the test event")
	}
	code, out, _ = run("webhook", "delete")
	expect("webhook delete", code, 0, out, "")

	// stats: 30 bars and the month against quota and hard cap (usage appears within 2 s).
	testkit.Eventually(t, "stats shows the 4 decisions", 5*time.Second, func() bool {
		code, out, eo = run("stats", "api")
		expect("stats", code, 0, out, eo)
		return strings.HasPrefix(out, "api: 4 decisions in 30 days, 1 blocked")
	})
	days := regexp.MustCompile(`(?m)^\d{4}-\d{2}-\d{2} `).FindAllString(out, -1)
	if !strings.HasPrefix(out, "api: 4 decisions in 30 days, 1 blocked") || len(days) != 30 ||
		!regexp.MustCompile(`(?m)^\d{4}-\d{2}-\d{2} █+░+ +4 \(1 blocked\)$`).MatchString(out) ||
		!regexp.MustCompile(`month \d{4}-\d{2} \(all namespaces\): \d+ of quota 1,000,000,000`).MatchString(out) ||
		!strings.Contains(out, "hard cap: none") {
		t.Fatalf("stats printed\n%s", out)
	}
	code, out, _ = run("stats", "api", "--json")
	expect("stats --json", code, 0, out, "")
	if m := jsonOf(out); m["total"] != 4.0 || len(m["days"].([]any)) != 30 {
		t.Fatalf("stats --json %v", m)
	}
}
