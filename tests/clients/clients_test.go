// Package clients runs the TypeScript and Python clients' suites, and the shared scenarios
// of clients/scenarios.json with the Go client, against real `leash serve` processes: one
// on the memory store and one on a Redis that a scenario can stop for a while (a real 503).
package clients

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
)

var bin string

func TestMain(m *testing.M) { os.Exit(leashproc.Main(m, &bin)) }

// root is the repository root.
func root() string { return leashproc.Root() }

// The keys of the test servers' accounts, by the names scenarios use ("as").
var keys = map[string]string{
	"scale":     "key-scale",     // plan scale: everything
	"free":      "key-free",      // plan free: no token_bucket, leases or webhooks
	"capped":    "key-capped",    // hard cap 3 decisions a month (the scenarios')
	"capped_2":  "key-capped-2",  // the same, for a suite's second run (Python's AsyncClient)
	"capped_mw": "key-capped-mw", // the same, for the middleware tests
	"operator":  "key-operator",  // the operator "ops"
	"unknown":   "lsh_nobody",    // no account has it
}

const config = `
plans:
  capped: {algorithms: [fixed_window, sliding_window, token_bucket], concurrent_limit: true, webhooks: true, monthly_quota: 2, hard_cap: 3}
accounts:
  - {id: scale, plan: scale, api_keys: [key-scale]}
  - {id: free, plan: free, api_keys: [key-free]}
  - {id: capped, plan: capped, api_keys: [key-capped]}
  - {id: capped-2, plan: capped, api_keys: [key-capped-2]}
  - {id: capped-mw, plan: capped, api_keys: [key-capped-mw]}
operators:
  - {id: ops, api_keys: [key-operator]}
webhooks: {allow_http: true, allow_private_targets: true}
`

// servers are the leash processes of one suite.
type servers struct {
	memory, redis string // the /v1 base URLs
	outage        string // POST <outage>?ms=N stops the Redis for N ms
}

// env is what a suite reads: LEASH_URL, LEASH_REDIS_URL, LEASH_OUTAGE_URL, LEASH_KEYS and
// LEASH_CLIENTS_DIR (clients/, for scenarios.json and api.json).
func (s servers) env() []string {
	k, _ := json.Marshal(keys)
	return append(leashproc.Environ(), "LEASH_URL="+s.memory, "LEASH_REDIS_URL="+s.redis,
		"LEASH_OUTAGE_URL="+s.outage, "LEASH_KEYS="+string(k), "LEASH_CLIENTS_DIR="+filepath.Join(root(), "clients"))
}

// start runs a leash on the memory store, a Redis, a leash on it, and the outage endpoint;
// all stop when the test ends.
func start(t *testing.T) servers {
	t.Helper()
	cfg := []string{"--config", leashproc.Config(t, config)}
	mem := leashproc.Start(t, bin, cfg, "LEASH_STORE_BACKEND=memory")
	r := redistest.StartServer(t, false)
	red := leashproc.Start(t, bin, cfg, "LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL="+r.URL(),
		"LEASH_STORE_REDIS_READ_TIMEOUT=300ms", "LEASH_STORE_REDIS_DIAL_TIMEOUT=300ms")
	var (
		mu     sync.Mutex
		timers []*time.Timer
		wg     sync.WaitGroup
	)
	out := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ms, err := strconv.Atoi(req.URL.Query().Get("ms"))
		if req.Method != http.MethodPost || err != nil || ms < 0 || ms > 10_000 {
			http.Error(w, "POST ?ms=0..10000", http.StatusBadRequest)
			return
		}
		r.Stop()
		wg.Add(1)
		mu.Lock()
		timers = append(timers, time.AfterFunc(time.Duration(ms)*time.Millisecond, func() {
			defer wg.Done()
			if err := r.Start(); err != nil {
				t.Errorf("restarting Redis after the outage: %v", err)
			}
		}))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() {
		out.Close()
		mu.Lock()
		for _, tm := range timers {
			if tm.Stop() {
				wg.Done()
			}
		}
		mu.Unlock()
		wg.Wait()
		mem.NoCrash(t)
		red.NoCrash(t)
	})
	return servers{memory: mem.URL, redis: red.URL, outage: out.URL}
}

// need returns the path of a tool, or skips the test (fails it in CI) when it is missing.
func need(t *testing.T, tool, install string) string {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err == nil {
		return path
	}
	msg := tool + " not found in PATH: " + install
	if os.Getenv("CI") == "true" {
		t.Fatal("CI: " + msg)
	}
	t.Skip("SKIPPED: " + msg)
	return ""
}

// run runs a suite's command in dir with the servers' environment, failing the test with
// its output when it fails.
func run(t *testing.T, s servers, dir string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, s.env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if err != nil {
		t.Fatalf("%s %v in %s: %v after %v\n%s", name, args, dir, err, time.Since(start).Round(time.Millisecond), out.String())
	}
	t.Logf("%s %v: passed in %v\n%s", name, args, time.Since(start).Round(time.Millisecond), tail(out.String(), 4000))
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}

// TestTypeScriptClient runs clients/typescript's suite (node --test, after tsc --strict)
// against the servers. Its dev dependencies come from `npm ci` (make clients-deps).
func TestTypeScriptClient(t *testing.T) {
	need(t, "node", "the TypeScript client's tests need Node.js 18 or later (apt-get install -y nodejs npm)")
	dir := filepath.Join(root(), "clients", "typescript")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "typescript")); err != nil {
		msg := "clients/typescript/node_modules is missing: run `make clients-deps` (npm ci)"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI: " + msg)
		}
		t.Skip("SKIPPED: " + msg)
	}
	s := start(t)
	// Compiled apart from dist/, which the README's example imports meanwhile (tests/doctest).
	out := t.TempDir()
	run(t, s, dir, "node", filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", ".", "--outDir", out)
	files, err := filepath.Glob(filepath.Join(out, "test", "*.test.js"))
	if err != nil || len(files) < 4 {
		t.Fatalf("the compiled tests: %v %v", files, err)
	}
	run(t, s, dir, "node", append([]string{"--test"}, files...)...)
}

// TestPythonClient runs clients/python's suite (python3 -m unittest) against the servers;
// LEASH_TEST_PYTHON names another interpreter (python3.9, say).
func TestPythonClient(t *testing.T) {
	interp := cmp.Or(os.Getenv("LEASH_TEST_PYTHON"), "python3")
	py := need(t, interp, "the Python client's tests need Python 3.9 or later (apt-get install -y python3)")
	s := start(t)
	run(t, s, filepath.Join(root(), "clients", "python"), py, "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-v")
}

// TestScenariosGo runs clients/scenarios.json with the Go client.
func TestScenariosGo(t *testing.T) {
	s := start(t)
	b, err := os.ReadFile(filepath.Join(root(), "clients", "scenarios.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f scenarioFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Scenarios) < 10 {
		t.Fatalf("only %d scenarios", len(f.Scenarios))
	}
	for i, sc := range f.Scenarios {
		t.Run(sc.Name, func(t *testing.T) { runScenario(t, s, fmt.Sprintf("go-%d", i), sc) })
	}
}
