// Package leashproc builds the leash binary and runs `leash serve` on loopback ports for
// tests outside cmd/leash (the client, the CLI and the examples test against a real
// process).
package leashproc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Build compiles cmd/leash into dir and returns the binary's path.
func Build(dir string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	bin := filepath.Join(dir, "leash")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/leash")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build leash: %v\n%s", err, out)
	}
	return bin, nil
}

// Proc is a running `leash serve`.
type Proc struct {
	// HTTP and Admin are the /v1 and admin listeners' host:port.
	HTTP, Admin string
	// URL is "http://" + HTTP.
	URL string

	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr []string
	exited chan error
}

// Start runs `bin serve args...` with env added to the environment, on loopback ports with
// gRPC disabled unless env sets LEASH_GRPC_ADDR, and stops it when the test ends.
func Start(t testing.TB, bin string, args []string, env ...string) *Proc {
	t.Helper()
	p := &Proc{exited: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	p.cmd.Env = append(os.Environ(), append([]string{"LEASH_HTTP_ADDR=127.0.0.1:0",
		"LEASH_ADMIN_ADDR=127.0.0.1:0", "LEASH_GRPC_ADDR=127.0.0.1:0"}, env...)...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr = append(p.stderr, sc.Text())
			p.mu.Unlock()
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "leash serving" {
				p.HTTP, _ = rec["http"].(string)
				p.Admin, _ = rec["admin"].(string)
				close(ready)
			}
		}
	}()
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("leash stderr:\n%s", p.Stderr())
		}
	})
	select {
	case <-ready:
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("leash exited at start: %v\n%s", err, p.Stderr())
	case <-time.After(30 * time.Second):
		t.Fatal("leash did not start within 30 s")
	}
	p.URL = "http://" + p.HTTP
	return p
}

// Config writes body to a config file in t's temporary directory and returns its path.
func Config(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "leash.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Stderr returns what the process wrote to stderr so far (its log).
func (p *Proc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.stderr, "\n")
}
