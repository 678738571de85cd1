package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
)

// TestAccountsWalkthrough is the walkthrough a newcomer follows: `leash serve` with no
// configuration prints a dev operator key (saying accounts last as long as the process on
// the memory store); with it the CLI creates an account and issues a key, and the key
// serves at once. Then every admin and key verb, with the exit statuses of spec §13.5.
func TestAccountsWalkthrough(t *testing.T) {
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=dev-key", "LEASH_STORE_BACKEND=memory")
	out := p.Stdout.String() // all printed before "leash serving" (leashproc waits for it)
	m := regexp.MustCompile(`operator "dev" uses key\n\n    (lsh_[A-Za-z0-9_-]{43})\n`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "On the memory store they last as long as this process.") {
		t.Fatalf("serve's output names no dev operator key, or not how long accounts last:\n%s", out)
	}
	if console := "The web console is at http://localhost" + p.HTTP[strings.LastIndex(p.HTTP, ":"):] + "/console/"; !strings.Contains(out, console) {
		t.Errorf("serve's output lacks %q:\n%s", console, out)
	}
	opKey := m[1]
	admin := []string{"LEASH_URL=" + p.URL, "LEASH_OPERATOR_KEY=" + opKey}
	expect := func(env []string, want int, args ...string) string {
		t.Helper()
		code, out, errOut := leashCLI(t, env, args...)
		if code != want {
			t.Fatalf("leash %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out + errOut
	}

	out = expect(admin, 0, "admin", "accounts", "create", "acme", "--plan", "pro")
	if !strings.Contains(out, "acme") || !strings.Contains(out, "pro") || !strings.Contains(out, "active") {
		t.Errorf("create printed %q", out)
	}
	out = expect(admin, 0, "admin", "keys", "issue", "acme", "--name", "laptop", "--json")
	var k struct{ ID, Key string }
	if err := json.Unmarshal([]byte(out), &k); err != nil || !strings.HasPrefix(k.Key, "lsh_") {
		t.Fatalf("issue --json printed %q", out)
	}
	acme := []string{"LEASH_URL=" + p.URL, "LEASH_API_KEY=" + k.Key}
	if out = expect(acme, 0, "limit", "demo", "user-1", "--limit", "5", "--window-ms", "60000"); !strings.HasPrefix(out, "allowed") {
		t.Errorf("limit with the new key printed %q", out)
	}
	if out = expect(acme, 0, "keys", "list"); !strings.Contains(out, k.ID) || !strings.Contains(out, "laptop") || strings.Contains(out, k.Key) {
		t.Errorf("keys list printed %q", out)
	}
	out = expect(acme, 0, "keys", "create", "--name", "ci")
	rotated := regexp.MustCompile(`key:  (lsh_\S+)`).FindStringSubmatch(out)
	if rotated == nil {
		t.Fatalf("keys create printed %q", out)
	}
	acme2 := []string{"LEASH_URL=" + p.URL, "LEASH_API_KEY=" + rotated[1]}
	expect(acme2, 0, "keys", "revoke", k.ID)
	if out = expect(acme, 3, "keys", "list"); !strings.Contains(out, "unauthorized (401)") {
		t.Errorf("the revoked key printed %q", out)
	}

	if out = expect(admin, 0, "admin", "accounts", "list"); !strings.Contains(out, "acme") || !strings.Contains(out, "dev") {
		t.Errorf("list printed %q", out)
	}
	if out = expect(admin, 0, "admin", "accounts", "list", "--limit", "1"); !strings.Contains(out, "more: --cursor acme") {
		t.Errorf("list --limit 1 printed %q", out)
	}
	expect(admin, 0, "admin", "accounts", "set-plan", "acme", "free")
	if out = expect(admin, 0, "admin", "accounts", "suspend", "acme"); !strings.Contains(out, "suspended") {
		t.Errorf("suspend printed %q", out)
	}
	if out = expect(acme2, 3, "limit", "demo", "user-1", "--limit", "5", "--window-ms", "60000"); !strings.Contains(out, "account_suspended (403)") {
		t.Errorf("limit while suspended printed %q", out)
	}
	expect(admin, 0, "admin", "accounts", "resume", "acme")
	if out = expect(admin, 0, "admin", "accounts", "get", "acme"); !strings.Contains(out, "free") || !strings.Contains(out, "active") {
		t.Errorf("get printed %q", out)
	}
	if out = expect(admin, 0, "admin", "keys", "list", "acme"); !strings.Contains(out, "ci") {
		t.Errorf("admin keys list printed %q", out)
	}
	expect(admin, 3, "admin", "keys", "revoke", "acme", "key_nope")
	expect(admin, 0, "admin", "accounts", "delete", "acme")
	if out = expect(admin, 3, "admin", "accounts", "get", "acme"); !strings.Contains(out, "account_not_found (404)") {
		t.Errorf("get after delete printed %q", out)
	}
	expect(admin, 2, "admin", "accounts", "create", "acme")                 // no --plan
	expect(admin, 2, "admin", "accounts")                                   // no subcommand
	expect(admin, 2, "admin", "accounts", "rename", "acme", "b")            // no such verb
	expect(admin, 3, "admin", "accounts", "create", "dev", "--plan", "pro") // exists
	if out = expect(admin, 3, "admin", "accounts", "list", "--key", "dev-key"); !strings.Contains(out, "operator_key_required (403)") {
		t.Errorf("an account key on admin printed %q", out)
	}
	if out = expect(nil, 0, "keys", "--help"); !strings.Contains(out, "leash keys new") || !strings.Contains(out, "leash keys list") {
		t.Errorf("keys --help printed %q", out)
	}
	p.NoCrash(t)
}

// TestAPIAccountClashesWithConfig: an account created through the admin API whose id a
// configuration then defines is refused on reload (the running accounts stay, the log
// names it) and at start-up (exit 1, the log names it) (spec §15.2).
func TestAPIAccountClashesWithConfig(t *testing.T) {
	r := redistest.StartServer(t, false)
	redis := []string{"LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL=" + r.URL()}
	path := filepath.Join(t.TempDir(), "leash.yaml")
	base := "operators: [{id: ops, api_keys: [op-key]}]\naccounts:\n  - {id: cfg, plan: pro, api_keys: [cfg-key]}\n"
	testkit.ReplaceFile(t, path, base)
	p := leashproc.Start(t, binary, []string{"--config", path}, redis...)
	admin := []string{"LEASH_URL=" + p.URL, "LEASH_OPERATOR_KEY=op-key"}
	if code, out, errOut := leashCLI(t, admin, "admin", "accounts", "create", "acme", "--plan", "free"); code != 0 {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	testkit.ReplaceFile(t, path, base+"  - {id: acme, plan: pro, api_keys: [other-key]}\n")
	testkit.Eventually(t, "the clashing reload refused", 3*time.Second, func() bool {
		return p.HasLog("config reload: accounts rejected; keeping the running config")
	})
	named := false
	for _, rec := range p.Logs() {
		if err, _ := rec["err"].(string); rec["msg"] == "config reload: accounts rejected; keeping the running config" && strings.Contains(err, `"acme"`) {
			named = true
		}
	}
	if !named {
		t.Error("the refusal does not name the account")
	}
	if code, _ := leashproc.Call(t, "POST", p.URL+"/v1/limit", "other-key", limitJSON); code != 401 {
		t.Errorf("the refused config's key answers %d", code)
	}
	if code, _ := leashproc.Call(t, "POST", p.URL+"/v1/limit", "cfg-key", limitJSON); code != 200 {
		t.Errorf("the running config's key answers %d", code)
	}

	// A second instance started with the clashing configuration does not start.
	clash := filepath.Join(t.TempDir(), "clash.yaml")
	testkit.ReplaceFile(t, clash, base+"  - {id: acme, plan: pro, api_keys: [other-key]}\n")
	cmd := exec.Command(binary, "serve", "--config", clash)
	cmd.Env = append(leashproc.Environ(), append(redis, "LEASH_HTTP_ADDR=127.0.0.1:0", "LEASH_ADMIN_ADDR=127.0.0.1:0", "LEASH_GRPC_ADDR=")...)
	cmd.Dir = t.TempDir() // the default disk store's leash-data goes there, not into the repository
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), `account \"acme\"`) {
		t.Fatalf("start-up with a clashing config: %v\n%s", err, out)
	}
}

const limitJSON = `{"namespace":"n","key":"k","limit":100,"window_ms":1000}`
