package reliability

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
	"github.com/leashd/leash/webhook"
)

// hookReceiver is a loopback webhook endpoint whose answer the test switches.
type hookReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	mode string // "hang", "fail" (503) or "ok" (200)
	got  []hookDelivery
	hung chan struct{} // closed to release hanging requests
}

type hookDelivery struct {
	id, sig string
	body    []byte
}

func newHookReceiver(t *testing.T, mode string) *hookReceiver {
	rc := &hookReceiver{mode: mode, hung: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, hookDelivery{id: r.Header.Get("Leash-Event-Id"), sig: r.Header.Get("Leash-Signature"), body: body})
		mode := rc.mode
		rc.mu.Unlock()
		switch mode {
		case "hang":
			select {
			case <-rc.hung:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		case "fail":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(func() {
		rc.setMode("ok")
		rc.srv.Close()
	})
	return rc
}

func (rc *hookReceiver) setMode(mode string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.mode == "hang" && mode != "hang" {
		close(rc.hung)
	}
	rc.mode = mode
}

func (rc *hookReceiver) deliveries() []hookDelivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hookDelivery(nil), rc.got...)
}

func (rc *hookReceiver) waitCount(t *testing.T, n int, within time.Duration) []hookDelivery {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ds := rc.deliveries()
		if len(ds) >= n {
			return ds
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver got %d requests within %v, want %d", len(ds), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWebhookSurvivesRestart, on the Redis store: an event whose delivery was cut off by a
// crash (SIGKILL mid-request) is delivered by the next leash once its visibility timeout
// passes; an event waiting for a retry when leash is stopped cleanly is delivered by the
// next leash. Each arrives signed with the secret PUT returned.
func TestWebhookSurvivesRestart(t *testing.T) {
	r := redistest.StartServer(t, false)
	rc := newHookReceiver(t, "hang")
	cfg := filepath.Join(t.TempDir(), "leash.yaml")
	err := os.WriteFile(cfg, fmt.Appendf(nil, `
store: {backend: redis, redis: {url: "%s"}}
accounts: [{id: acme, plan: pro, api_keys: [k-acme]}]
webhooks: {allow_http: true, allow_private_targets: true, timeout: 1s, backoff_base: 3s, backoff_max: 3s}
shutdown: {drain_delay: 100ms}
`, r.URL()), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", cfg}

	p1 := leashproc.Start(t, binary, args)
	base := "http://" + p1.HTTP
	code, out := leashproc.Call(t, "PUT", base+"/v1/webhook", "k-acme", `{"url":"`+rc.srv.URL+`/hook"}`)
	secret, _ := out["secret"].(string)
	if code != 200 || secret == "" {
		t.Fatalf("PUT webhook: %d %v", code, out)
	}
	code, out = leashproc.Call(t, "POST", base+"/v1/webhook/test", "k-acme", "")
	id1, _ := out["event_id"].(string)
	if code != 202 || id1 == "" {
		t.Fatalf("POST test: %d %v", code, out)
	}
	rc.waitCount(t, 1, 5*time.Second) // the first attempt hangs in the receiver ...
	if err := p1.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p1.Exited // ... and leash dies in the middle of it.
	rc.setMode("ok")

	p2 := leashproc.Start(t, binary, args)
	// Due again once the dead instance's claim expires: timeout (1s) + 5s.
	ds := rc.waitCount(t, 2, 15*time.Second)
	if ds[1].id != id1 {
		t.Fatalf("after the crash the receiver got %q, want %s", ds[1].id, id1)
	}
	if err := webhook.Verify(secret, ds[1].sig, ds[1].body, time.Minute); err != nil {
		t.Fatalf("redelivered event: %v", err)
	}

	// A failed attempt, then a clean stop before the retry (due 2.4-3.6 s later).
	rc.setMode("fail")
	code, out = leashproc.Call(t, "POST", "http://"+p2.HTTP+"/v1/webhook/test", "k-acme", "")
	id2, _ := out["event_id"].(string)
	if code != 202 || id2 == "" {
		t.Fatalf("POST test: %d %v", code, out)
	}
	ds = rc.waitCount(t, 3, 5*time.Second)
	if ds[2].id != id2 {
		t.Fatalf("third request %q, want %s", ds[2].id, id2)
	}
	if err := p2.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-p2.Exited; err != nil {
		var ee interface{ ExitCode() int }
		if errors.As(err, &ee) {
			t.Fatalf("leash exit code %d after SIGTERM", ee.ExitCode())
		}
		t.Fatal(err)
	}
	if n := len(rc.deliveries()); n != 3 {
		t.Fatalf("receiver got %d requests before the restart, want 3", n)
	}
	rc.setMode("ok")

	leashproc.Start(t, binary, args)
	ds = rc.waitCount(t, 4, 15*time.Second)
	if ds[3].id != id2 {
		t.Fatalf("after the restart the receiver got %q, want %s", ds[3].id, id2)
	}
	if err := webhook.Verify(secret, ds[3].sig, ds[3].body, time.Minute); err != nil {
		t.Fatalf("event delivered after the restart: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(rc.deliveries()); n != 4 {
		t.Fatalf("receiver got %d requests in all, want 4 (each event delivered once)", n)
	}
}
