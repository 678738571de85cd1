package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leashd/leash/store/redisstore"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
)

var binary string

func TestMain(m *testing.M) {
	// The tests' own go-redis clients (samplers) must not print every failed dial.
	redisstore.RouteDriverLogs(slog.New(slog.DiscardHandler))
	os.Exit(leashproc.Main(m, &binary))
}

func TestVersionAndKeys(t *testing.T) {
	out, err := exec.Command(binary, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "leash ") {
		t.Fatalf("leash version = %q, %v", out, err)
	}
	out, err = exec.Command(binary, "keys", "new").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(lsh_[A-Za-z0-9_-]{43})[\s\S]*api_key_sha256: \["([0-9a-f]{64})"\]`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("leash keys new printed %q", out)
	}
	sum := sha256.Sum256([]byte(m[1]))
	if hex.EncodeToString(sum[:]) != m[2] {
		t.Fatalf("printed hash %s is not the SHA-256 of the key %s", m[2], m[1])
	}
	if err := exec.Command(binary, "bogus").Run(); err == nil {
		t.Fatal("unknown command exited 0")
	}
}

func TestBadConfigFailsBeforeListening(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"unknown key": "http:\n  adr: \":1\"\n",
		"bad value":   "store:\n  memory:\n    max_entries: lots\n",
		"bad backend": "store:\n  backend: etcd\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
			os.WriteFile(path, []byte(body), 0o600)
			cmd := exec.Command(binary, "serve", "--config", path)
			cmd.Env = append(leashproc.Environ(), "LEASH_HTTP_ADDR=127.0.0.1:0", "LEASH_ADMIN_ADDR=127.0.0.1:0")
			cmd.Dir = t.TempDir() // the default disk store's leash-data goes there, not into the repository
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatalf("exit 0 with a bad config; stderr %s", stderr.String())
				}
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatal("leash kept running with a bad config")
			}
			key := map[string]string{"unknown key": "adr", "bad value": "max_entries", "bad backend": "store.backend"}[name]
			if !strings.Contains(stderr.String(), key) {
				t.Fatalf("error does not name %q: %s", key, stderr.String())
			}
		})
	}
}

func TestServeWithoutConfig(t *testing.T) {
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=dev-key-123")
	base := "http://" + p.HTTP
	code, out := leashproc.Call(t, "POST", base+"/v1/limit", "dev-key-123", `{"namespace":"demo","key":"u1","limit":1,"window_ms":60000,"algorithm":"token_bucket"}`)
	if code != 200 || out["allowed"] != true {
		t.Fatalf("first check = %d %v", code, out)
	}
	code, out = leashproc.Call(t, "POST", base+"/v1/limit", "dev-key-123", `{"namespace":"demo","key":"u1","limit":1,"window_ms":60000,"algorithm":"token_bucket"}`)
	if code != 200 || out["allowed"] != false {
		t.Fatalf("second check = %d %v", code, out)
	}
	if code, _ := leashproc.Call(t, "POST", base+"/v1/leases", "dev-key-123", `{"namespace":"demo","key":"u1","limit":1,"window_ms":1000}`); code != 200 {
		t.Fatalf("dev account (plan scale) must have leases: %d", code)
	}
	if code, _ := leashproc.Call(t, "POST", base+"/v1/limit", "wrong", `{}`); code != 401 {
		t.Fatalf("wrong key = %d", code)
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200} {
		resp, err := http.Get("http://" + p.Admin + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s = %d", path, resp.StatusCode)
		}
		if path == "/metrics" && !strings.Contains(string(b), `leash_decisions_total{endpoint="limit",outcome="denied"} 1`) {
			t.Fatalf("metrics lack the denied decision:\n%s", b)
		}
	}
	if strings.Contains(p.Stdout.String(), "dev-key-123") {
		t.Fatal("a key taken from the environment must not be printed")
	}
}

func TestServePrintsGeneratedDevKeyOnce(t *testing.T) {
	p := leashproc.Start(t, binary, nil)
	m := regexp.MustCompile(`lsh_[A-Za-z0-9_-]{43}`).FindAllString(p.Stdout.String(), -1)
	if len(m) == 0 {
		t.Fatalf("no dev key printed: %q", p.Stdout.String())
	}
	if code, _ := leashproc.Call(t, "POST", "http://"+p.HTTP+"/v1/limit", m[0], `{"namespace":"d","key":"k","limit":1,"window_ms":1000}`); code != 200 {
		t.Fatalf("printed key rejected: %d", code)
	}
	for _, r := range p.Logs() {
		if b, _ := json.Marshal(r); strings.Contains(string(b), m[0]) {
			t.Fatalf("the key appears in a log line: %s", b)
		}
	}
}

// TestGracefulShutdown: a request in flight when SIGTERM arrives completes, /readyz turns
// 503 during the drain delay, and the process exits 0 after flushing usage.
func TestGracefulShutdown(t *testing.T) {
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=k", "LEASH_SHUTDOWN_DRAIN_DELAY=700ms")
	body := `{"namespace":"demo","key":"slow","limit":5,"window_ms":60000}`
	conn, err := net.Dial("tcp", p.HTTP)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/limit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:10])
	// Wall time for the server to accept the connection: it offers no sign of that, and a
	// connection still in the listen backlog at SIGTERM would be reset, not drained.
	time.Sleep(100 * time.Millisecond)
	sent := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "readyz 503 while draining", 5*time.Second, func() bool {
		resp, err := http.Get("http://" + p.Admin + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == 503
	})
	// Past the drain delay the listener is closed.
	testkit.Eventually(t, "new connections refused after the drain delay", 5*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", p.HTTP, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if d := time.Since(sent); d < 700*time.Millisecond {
		t.Fatalf("the listener closed %v after SIGTERM, before the drain delay (700 ms)", d)
	}
	fmt.Fprint(conn, body[10:])
	r, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("in-flight request lost: %v", err)
	}
	if r.StatusCode != 200 {
		t.Fatalf("in-flight request = %d", r.StatusCode)
	}
	if err := p.Wait(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if time.Since(sent) > 10*time.Second {
		t.Fatal("shutdown took longer than 10 s")
	}
	if !p.HasLog("stopped") {
		t.Fatal("no final log line")
	}
	// Durations in the log name their unit.
	if !slices.ContainsFunc(p.Logs(), func(r map[string]any) bool {
		return r["msg"] == "shutting down" && r["drain_delay_ms"] == float64(700)
	}) {
		t.Fatalf("no shutting down line with drain_delay_ms 700: %v", p.Logs())
	}
	// Every goroutine has stopped before the store closed: nothing logs after "stopped".
	if logs := p.Logs(); logs[len(logs)-1]["msg"] != "stopped" {
		t.Fatalf("logged after \"stopped\": %v", logs[len(logs)-1])
	}
}

// TestConfigReloadAppliesAccounts: a key added to the config file works and a removed one
// stops working within 2 s, without a restart (spec §10.4); an invalid edit is ignored.
func TestConfigReloadAppliesAccounts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leash.yaml")
	write := func(body string) { testkit.ReplaceFile(t, path, body) }
	write("accounts:\n  - {id: acme, plan: pro, api_keys: [key-one]}\n")
	p := leashproc.Start(t, binary, []string{"--config", path})
	check := func(key string) int {
		code, _ := leashproc.Call(t, "POST", "http://"+p.HTTP+"/v1/limit", key, `{"namespace":"n","key":"k","limit":100,"window_ms":1000}`)
		return code
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testkit.Eventually(t, what, 2500*time.Millisecond, cond)
	}
	if check("key-one") != 200 || check("key-two") != 401 {
		t.Fatal("initial keys wrong")
	}
	write("accounts:\n  - {id: acme, plan: pro, api_keys: [key-two]}\n")
	waitFor("key-two accepted", func() bool { return check("key-two") == 200 })
	waitFor("key-one refused", func() bool { return check("key-one") == 401 })
	write("accounts:\n  - {id: acme, plan: nosuchplan, api_keys: [key-three]}\n")
	waitFor("the invalid edit rejected", func() bool { return p.HasLog("config reload rejected; the running config stays") })
	if check("key-two") != 200 || check("key-three") != 401 {
		t.Fatal("an invalid config edit changed the running accounts")
	}
}
