package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/leashd/leash/internal/devkeys"
	"github.com/leashd/leash/testkit/leashproc"
)

// TestDiskKeepsAccountsAndDevKeys is issue 33's `make run` check through the binary:
// `leash serve` with no store configured serves from the disk store (its directory's
// absolute path logged at start), an account and its key created with `leash admin`, the
// dev keys printed at the first start and a second process on the same directory refused
// with a clear error; after a stop and a start on the same directory, the account, its key
// and the dev keys still work, and no new dev key is printed.
func TestDiskKeepsAccountsAndDevKeys(t *testing.T) {
	data := filepath.Join(t.TempDir(), "leash-data")
	env := []string{"LEASH_STORE_DISK_PATH=" + data, "LEASH_SHUTDOWN_DRAIN_DELAY=0s"}
	p := leashproc.Start(t, binary, nil, env...)
	out := p.Stdout.String()
	api := regexp.MustCompile(`account "dev" \(plan scale\) uses API key\n\n    (lsh_\S+)\n`).FindStringSubmatch(out)
	op := regexp.MustCompile(`operator "dev" uses key\n\n    (lsh_\S+)\n`).FindStringSubmatch(out)
	if api == nil || op == nil || !strings.Contains(out, "On the disk store they are kept in "+data) {
		t.Fatalf("the first start printed no dev keys, or not where they are kept:\n%s", out)
	}
	if !diskOpenLogged(p, data) {
		t.Errorf("no \"disk store open\" record with path %s: %v", data, p.Logs())
	}
	admin := []string{"LEASH_URL=" + p.URL, "LEASH_OPERATOR_KEY=" + op[1]}
	if code, o, e := leashCLI(t, admin, "admin", "accounts", "create", "acme", "--plan", "pro"); code != 0 {
		t.Fatalf("accounts create: exit %d\n%s%s", code, o, e)
	}
	code, o, e := leashCLI(t, admin, "admin", "keys", "issue", "acme", "--name", "laptop", "--json")
	var k struct{ Key string }
	if code != 0 || json.Unmarshal([]byte(o), &k) != nil || k.Key == "" {
		t.Fatalf("keys issue: exit %d\n%s%s", code, o, e)
	}
	if code, body := leashproc.Call(t, "POST", p.URL+"/v1/limit", k.Key, limitJSON); code != 200 {
		t.Fatalf("acme's key answers %d %v before the restart", code, body)
	}

	// A second process on the same directory is refused, naming it and the setting.
	second := exec.Command(binary, "serve")
	second.Dir = t.TempDir()
	second.Env = append(leashproc.Environ(), append(env, "LEASH_HTTP_ADDR=127.0.0.1:0", "LEASH_ADMIN_ADDR=127.0.0.1:0", "LEASH_GRPC_ADDR=127.0.0.1:0")...)
	var stdout, stderr bytes.Buffer
	second.Stdout, second.Stderr = &stdout, &stderr
	err := second.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("a second leash on %s: %v, want exit 1\n%s", data, err, stderr.String())
	}
	for _, want := range []string{"in use by another leash process", data, "store.disk.path"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the second process's error lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stdout.String(), "lsh_") {
		t.Errorf("the refused process printed keys:\n%s", stdout.String())
	}

	if err := p.Stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	d, err := devkeys.Load(data)
	if err != nil || d.API == [32]byte{} || d.Operator == [32]byte{} {
		t.Fatalf("the dev keys' digests are not kept in %s: %+v, %v", data, d, err)
	}

	again := leashproc.Start(t, binary, nil, env...)
	out = again.Stdout.String()
	if strings.Contains(out, "lsh_") || !strings.Contains(out, "printed when "+data) {
		t.Errorf("the restart printed new keys, or does not say the first ones stay:\n%s", out)
	}
	if code, body := leashproc.Call(t, "POST", again.URL+"/v1/limit", api[1], limitJSON); code != 200 {
		t.Errorf("the dev API key printed at the first start answers %d %v after the restart", code, body)
	}
	if code, body := leashproc.Call(t, "POST", again.URL+"/v1/limit", k.Key, limitJSON); code != 200 {
		t.Errorf("acme's key answers %d %v after the restart", code, body)
	}
	admin[0] = "LEASH_URL=" + again.URL
	if code, o, e := leashCLI(t, admin, "admin", "accounts", "get", "acme"); code != 0 || !strings.Contains(o, "pro") {
		t.Errorf("accounts get acme with the first start's operator key after the restart: exit %d\n%s%s", code, o, e)
	}
	again.NoCrash(t)
}

// diskOpenLogged reports whether p logged the disk store's opening at path.
func diskOpenLogged(p *leashproc.Proc, path string) bool {
	for _, r := range p.Logs() {
		if r["msg"] == "disk store open" && r["path"] == path {
			return true
		}
	}
	return false
}

// TestBackupWhileServing: `leash backup DIR` copies the disk store while clients keep
// deciding on it; a second leash started on the copy serves the account, its key, the
// rule and the counter as they were when the copy was taken (at least what was answered
// before it began), and the dev keys. On the memory store the command exits 3 with
// backup_not_supported, and into an existing directory it exits 2.
func TestBackupWhileServing(t *testing.T) {
	data := filepath.Join(t.TempDir(), "leash-data")
	// The dev API key is generated (its digest kept in the directory, so in the copy); the
	// operator's comes from the environment, and is kept with it.
	env := []string{"LEASH_DEV_OPERATOR_KEY=op-key", "LEASH_SHUTDOWN_DRAIN_DELAY=0s"}
	p := leashproc.Start(t, binary, nil, append(env, "LEASH_STORE_DISK_PATH="+data)...)
	m := regexp.MustCompile(`uses API key\n\n    (lsh_\S+)\n`).FindStringSubmatch(p.Stdout.String())
	if m == nil {
		t.Fatalf("no dev API key printed:\n%s", p.Stdout.String())
	}
	devKey := m[1]
	admin := []string{"LEASH_URL=" + p.URL, "LEASH_OPERATOR_KEY=op-key"}
	if code, o, e := leashCLI(t, admin, "admin", "accounts", "create", "acme", "--plan", "pro"); code != 0 {
		t.Fatalf("accounts create: exit %d\n%s%s", code, o, e)
	}
	const rule = `{"algorithm":"fixed_window","limit":1000,"window_ms":3600000}`
	if code, body := leashproc.Call(t, "POST", p.URL+"/v1/namespaces/bk/rules", devKey, rule); code != 201 {
		t.Fatalf("set the rule: %d %v", code, body)
	}
	spend := func() bool {
		code, body := leashproc.Call(t, "POST", p.URL+"/v1/limit", devKey, `{"namespace":"bk","key":"k"}`)
		return code == 200 && body["allowed"] == true
	}
	const before = 25
	for i := range before {
		if !spend() {
			t.Fatalf("spend %d refused", i)
		}
	}
	// Clients keep spending while the copy is taken.
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
				if spend() {
					n++
				}
			}
		}
	}()
	copyDir := filepath.Join(t.TempDir(), "copy")
	code, o, e := leashCLI(t, admin, "backup", copyDir)
	close(stop)
	during := <-done
	if code != 0 || !strings.Contains(o, "backup written to "+copyDir) {
		t.Fatalf("leash backup: exit %d\n%s%s", code, o, e)
	}
	if code, _, e := leashCLI(t, admin, "backup", copyDir); code != 2 || !strings.Contains(e, "already exists") {
		t.Errorf("leash backup into an existing directory: exit %d, want 2\n%s", code, e)
	}

	// Serve from the copy, beside the original (which keeps its own directory).
	q := leashproc.Start(t, binary, nil, "LEASH_STORE_DISK_PATH="+copyDir)
	if strings.Contains(q.Stdout.String(), "lsh_") {
		t.Errorf("the copy generated new dev keys:\n%s", q.Stdout.String())
	}
	code, body := leashproc.Call(t, "POST", q.URL+"/v1/limit", devKey, `{"namespace":"bk","key":"k","cost":0}`)
	if code != 200 {
		t.Fatalf("the dev key on the copy: %d %v", code, body)
	}
	used := 1000 - int(body["remaining"].(float64))
	if used < before || used > before+during {
		t.Errorf("the copy's counter is at %d: want between %d (answered before the backup) and %d (and during it)", used, before, before+during)
	}
	qadmin := []string{"LEASH_URL=" + q.URL, "LEASH_OPERATOR_KEY=op-key"}
	if code, o, e := leashCLI(t, qadmin, "admin", "accounts", "get", "acme"); code != 0 {
		t.Errorf("acme on the copy: exit %d\n%s%s", code, o, e)
	}
	if code, body := leashproc.Call(t, "GET", q.URL+"/v1/namespaces/bk/rules", devKey, ""); code != 200 || len(body["rules"].([]any)) != 1 {
		t.Errorf("the rule on the copy: %d %v", code, body)
	}
	t.Logf("counter %d in the copy: %d answered before the backup, %d while it was taken", used, before, during)

	// The memory store has nothing to copy this way.
	mem := leashproc.Start(t, binary, nil, append(env, "LEASH_STORE_BACKEND=memory")...)
	code, _, e = leashCLI(t, []string{"LEASH_URL=" + mem.URL, "LEASH_OPERATOR_KEY=op-key"}, "backup", filepath.Join(t.TempDir(), "none"))
	if code != 3 || !strings.Contains(e, "backup_not_supported (409)") {
		t.Errorf("leash backup on the memory store: exit %d, want 3 and backup_not_supported\n%s", code, e)
	}
	p.NoCrash(t)
	q.NoCrash(t)
}
