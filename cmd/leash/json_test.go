package main

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
)

// The built binary serves the peer's /json and /healthcheck on envoy.json_addr
// (spec §9.15; the peer's src/server/server_impl.go).
func TestServeJSONListener(t *testing.T) {
	dir := t.TempDir()
	rl := writeTestFile(t, dir, "rl.yaml", "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=dev-key-json", "LEASH_ENVOY_JSON_ADDR=127.0.0.1:0", "LEASH_ENVOY_CONFIG_PATHS="+rl, "LEASH_SHUTDOWN_DRAIN_DELAY=1s")
	addr := p.JSON
	if addr == "" {
		t.Fatal(`no "json" address in the "leash serving" log`)
	}
	post := func() (int, string) {
		resp, err := http.Post("http://"+addr+"/json", "application/json",
			strings.NewReader(`{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u1"}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i, want := range []struct {
		code    int
		overall rlsv3.RateLimitResponse_Code
	}{{200, rlsv3.RateLimitResponse_OK}, {429, rlsv3.RateLimitResponse_OVER_LIMIT}} {
		code, body := post()
		var resp rlsv3.RateLimitResponse
		if err := protojson.Unmarshal([]byte(body), &resp); err != nil || code != want.code || resp.GetOverallCode() != want.overall {
			t.Errorf("call %d: %d %s (%v), want %d %v", i, code, body, err, want.code, want.overall)
		}
	}
	resp, err := http.Get("http://" + addr + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "OK" {
		t.Errorf("/healthcheck: %d %q", resp.StatusCode, b)
	}

	// Shutting down: /healthcheck fails during the drain delay, as the peer's does.
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The listener closes once the 1 s drain delay is over, so a 500 must be seen within it.
	testkit.Eventually(t, "/healthcheck 500 while draining", 5*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/healthcheck")
		if err != nil {
			t.Fatalf("/healthcheck unreachable before it answered 500 while draining: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode == 500
	})
	if err := p.Wait(t); err != nil {
		t.Errorf("exit: %v", err)
	}
}
