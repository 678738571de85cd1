// Package leashproc builds the leash binary and runs `leash serve` as a child process for
// tests that use Leash as its users do: over its listeners, with its logs on stderr.
package leashproc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"
)

// Root is the repository's root folder, found from this file's own path.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// cmdDir is the folder of package main (cmd/leash).
func cmdDir() string { return filepath.Join(Root(), "cmd", "leash") }

// Build compiles cmd/leash into dir and returns the binary's path; race builds it with the
// race detector.
func Build(dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "leash")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = cmdDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build leash: %v\n%s", err, out)
	}
	return bin, nil
}

// BinEnv and PlainBinEnv name the environment variables that hand the tests a leash binary
// built beforehand: BinEnv's with the race detector, PlainBinEnv's without. make test
// builds each once for every package that runs the binary, instead of one link a package.
const (
	BinEnv      = "LEASH_TEST_BIN"
	PlainBinEnv = "LEASH_TEST_PLAIN_BIN"
)

// prebuilt returns the binary the environment variable env names, "" when it is unset.
func prebuilt(env string) (string, error) {
	bin := os.Getenv(env)
	if bin == "" {
		return "", nil
	}
	st, err := os.Stat(bin)
	if err != nil {
		return "", fmt.Errorf("%s: %w", env, err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("%s=%s is a folder, not the leash binary", env, bin)
	}
	return bin, nil
}

// quickRaceExit sets GORACE=atexit_sleep_ms=0 for the children this test process starts,
// unless GORACE is set already: a binary built with -race otherwise sleeps a second before
// it exits, which every `leash` command a test runs would wait for. Races are still
// reported when they happen.
func quickRaceExit() {
	if _, set := os.LookupEnv("GORACE"); !set {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
}

// Main stores the race-enabled binary's path in *bin, runs the package's tests and returns
// their exit code; a test package's TestMain returns through it:
// `func TestMain(m *testing.M) { os.Exit(leashproc.Main(m, &binary)) }`. The binary is
// BinEnv's when set, otherwise built into a temporary folder removed afterwards.
func Main(m *testing.M, bin *string) int {
	quickRaceExit()
	var err error
	if *bin, err = prebuilt(BinEnv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if *bin != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "leash-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Build(dir, true); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// Plain builds leash without -race into the test's temporary folder, for figures a
// production build would show (the race detector slows every request several times).
// PlainBinEnv's binary is used when set.
func Plain(t testing.TB) string {
	t.Helper()
	bin, err := prebuilt(PlainBinEnv)
	if err != nil {
		t.Fatal(err)
	}
	if bin != "" {
		return bin
	}
	bin, err = Build(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Proc is a running `leash serve`.
type Proc struct {
	// Cmd is the child process.
	Cmd *exec.Cmd
	// Stdout is everything the process printed on standard output.
	Stdout *testkit.SyncBuffer
	// HTTP, Admin and GRPC are the listeners' addresses from the "leash serving" log
	// record; GRPC is "" when the gRPC listener is off. JSON is envoy.json_addr's listener,
	// "" when off.
	HTTP, Admin, GRPC, JSON string
	// URL is "http://" + HTTP.
	URL string
	// Exited receives the process's exit once.
	Exited chan error

	mu   sync.Mutex
	logs []map[string]any
	raw  []string // stderr lines that are not JSON log records (panics, race reports)
}

// Environ is the test's environment without its LEASH_* variables (a developer's or CI's
// own settings), so that a child's configuration is the test's alone.
func Environ() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "LEASH_") })
}

// Start runs `bin serve args...` with env added to the test's environment (less its
// LEASH_* variables), every listener on a free loopback port, and waits for it to serve;
// the process is killed when the test ends.
func Start(t testing.TB, bin string, args []string, env ...string) *Proc {
	t.Helper()
	return StartAs(t, bin, append([]string{"serve"}, args...),
		append([]string{"LEASH_HTTP_ADDR=127.0.0.1:0", "LEASH_ADMIN_ADDR=127.0.0.1:0", "LEASH_GRPC_ADDR=127.0.0.1:0"}, env...)...)
}

// StartAs runs bin with exactly args (bin may be a link named ratelimit, say) and env
// added to the test's environment (less its LEASH_* variables), and waits for it to
// serve; the listeners are where env puts them. The disk store, when the configuration
// leaves it the default, is in a folder of the test's own (env may name another with
// LEASH_STORE_DISK_PATH), so no test writes into the repository and parallel tests never
// share one. The process is killed when the test ends.
func StartAs(t testing.TB, bin string, args []string, env ...string) *Proc {
	t.Helper()
	p := &Proc{Stdout: new(testkit.SyncBuffer), Exited: make(chan error, 1)}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Env = append(append(Environ(), "LEASH_STORE_DISK_PATH="+filepath.Join(t.TempDir(), "leash-data")), env...)
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.Cmd.Stdout = stdoutW
	stderr, err := p.Cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = stdoutW.Close()
	quiet := p.readStdout(stdout)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				p.mu.Lock()
				p.raw = append(p.raw, sc.Text())
				p.mu.Unlock()
				continue
			}
			p.mu.Lock()
			p.logs = append(p.logs, rec)
			p.mu.Unlock()
			if rec["msg"] == "leash serving" {
				p.HTTP, p.Admin, p.GRPC = rec["http"].(string), rec["admin"].(string), rec["grpc"].(string)
				p.JSON, _ = rec["json"].(string)
				close(ready)
			}
		}
	}()
	go func() { p.Exited <- p.Cmd.Wait() }()
	t.Cleanup(func() {
		p.Cmd.Process.Kill()
		if t.Failed() {
			var warn []string
			for _, r := range p.Logs() {
				if r["level"] == "WARN" || r["level"] == "ERROR" {
					b, _ := json.Marshal(r)
					warn = append(warn, string(b))
				}
			}
			t.Logf("leash warnings and errors:\n%s\nleash stderr (non-JSON lines):\n%s", strings.Join(warn, "\n"), strings.Join(p.Raw(), "\n"))
		}
	})
	select {
	case <-ready:
		p.URL = "http://" + p.HTTP
		// What leash printed before it logged "leash serving" is in the pipe: wait until
		// it has been read, so that Stdout holds it.
		quiet()
	case err := <-p.Exited:
		t.Fatalf("leash exited at start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("leash did not start")
	}
	return p
}

// readStdout copies the process's standard output into p.Stdout until it ends. It returns
// a function that waits until every byte written to it so far has been copied: a read
// that times out empty proves the pipe held nothing during the whole read, so the first
// one to end after the call began came after everything written before the call.
func (p *Proc) readStdout(r *os.File) (drained func()) {
	var timeouts atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer r.Close()
		buf := make([]byte, 32<<10)
		for {
			_ = r.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			n, err := r.Read(buf)
			if n > 0 {
				_, _ = p.Stdout.Write(buf[:n])
			}
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				timeouts.Add(1)
			case err != nil:
				return
			}
		}
	}()
	return func() {
		seen := timeouts.Load()
		for timeouts.Load() == seen {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

// Stop sends SIGTERM and waits for the process to exit, failing the test when it has not
// within 10 s; it returns the exit error (nil for exit status 0).
func (p *Proc) Stop(t testing.TB) error {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return p.Wait(t)
}

// Wait waits for the process to exit, failing the test when it has not within 10 s; it
// returns the exit error (nil for exit status 0). Call it after a signal sent meanwhile.
func (p *Proc) Wait(t testing.TB) error {
	t.Helper()
	select {
	case err := <-p.Exited:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("leash did not exit within 10 s of SIGTERM")
		return nil
	}
}

// HasLog reports whether the process logged a record with message msg.
func (p *Proc) HasLog(msg string) bool {
	return slices.ContainsFunc(p.Logs(), func(r map[string]any) bool { return r["msg"] == msg })
}

// Logs returns the JSON log records read from stderr so far.
func (p *Proc) Logs() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.logs)
}

// Raw returns the stderr lines that were not JSON log records (a panic, a race report).
func (p *Proc) Raw() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.raw)
}

// Call sends a JSON request with the API key (none when key is "") and decodes the JSON
// answer; a transport error fails the test.
func Call(t testing.TB, method, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// NoCrash fails the test if the process printed a panic or a race report, or has exited.
func (p *Proc) NoCrash(t testing.TB) {
	t.Helper()
	raw := p.Raw()
	for _, line := range raw {
		if strings.Contains(line, "panic") || strings.Contains(line, "DATA RACE") {
			t.Fatalf("leash printed %q:\n%s", line, strings.Join(raw, "\n"))
		}
	}
	select {
	case err := <-p.Exited:
		t.Fatalf("leash exited: %v", err)
	default:
	}
}

// Config writes body to a config file in the test's temporary folder and returns its path.
func Config(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "leash.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
