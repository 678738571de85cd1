package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestEnvoyEndpoint: a leash process with descriptor files serves gRPC; a /v1/limit call
// and a gRPC call spend the same counter; descriptor edits apply without a restart and a
// broken edit keeps the running config.
func TestEnvoyEndpoint(t *testing.T) {
	dir := t.TempDir()
	descDir := filepath.Join(dir, "ratelimit")
	if err := os.Mkdir(descDir, 0o755); err != nil {
		t.Fatal(err)
	}
	descFile := filepath.Join(descDir, "edge.yaml")
	testkit.ReplaceFile(t, descFile, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	cfgFile := filepath.Join(dir, "leash.yaml")
	testkit.ReplaceFile(t, cfgFile, fmt.Sprintf(`accounts:
  - {id: acme, plan: pro, api_keys: [k]}
envoy:
  config_paths: [%s]
  domains: {edge: {account: acme}}
`, descDir))
	p := leashproc.Start(t, binary, []string{"--config", cfgFile})
	if p.GRPC == "" {
		t.Fatal("no gRPC address in the start-up log")
	}
	c := leashproc.DialRLS(t, p.GRPC)
	if st, err := c.Health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"}); err != nil || st.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v %v", st, err)
	}

	// One counter, two endpoints: the descriptor user=alice is key "user=alice" in namespace "edge".
	if st := c.Status(t, "edge", leashproc.Entry("user", "alice")); st.Code != rlsv3.RateLimitResponse_OK || st.LimitRemaining != 1 {
		t.Fatalf("first gRPC call: %v", st)
	}
	code, out := leashproc.Call(t, "POST", "http://"+p.HTTP+"/v1/limit", "k",
		`{"namespace":"edge","key":"user=alice","algorithm":"fixed_window","limit":2,"window_ms":60000}`)
	if code != 200 || out["allowed"] != true || out["remaining"] != float64(0) {
		t.Fatalf("/v1/limit on the descriptor's counter: %d %v", code, out)
	}
	if st := c.Status(t, "edge", leashproc.Entry("user", "alice")); st.Code != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("gRPC after /v1/limit spent the counter: %v", st)
	}

	limitOf := func() uint32 {
		return c.Status(t, "edge", leashproc.Entry("user", "probe")).GetCurrentLimit().GetRequestsPerUnit()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testkit.Eventually(t, what, 3*time.Second, cond)
	}
	// refused waits until a descriptor reload logged since the record before is refused.
	refused := func(before int) {
		t.Helper()
		waitFor("the descriptor edit refused", func() bool {
			for _, r := range p.Logs()[before:] {
				if m, _ := r["msg"].(string); strings.HasPrefix(m, "descriptors: config not ") && strings.HasSuffix(m, "; the previous one stays in force") {
					return true
				}
			}
			return false
		})
	}
	// A valid edit applies without a restart.
	testkit.ReplaceFile(t, descFile, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 500}\n")
	waitFor("new limit served", func() bool { return limitOf() == 500 })
	// A broken edit is logged and the running config stays.
	before := len(p.Logs())
	testkit.ReplaceFile(t, descFile, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	refused(before)
	if got := limitOf(); got != 500 {
		t.Fatalf("a broken descriptor file changed the limit to %d", got)
	}
	// An algorithm the account's plan lacks is rejected on reload too (pro has token_bucket; free does not).
	testkit.ReplaceFile(t, cfgFile, fmt.Sprintf(`accounts:
  - {id: acme, plan: free, api_keys: [k]}
envoy:
  config_paths: [%s]
  domains: {edge: {account: acme}}
`, descDir))
	waitFor("plan free applied", func() bool {
		code, _ := leashproc.Call(t, "POST", "http://"+p.HTTP+"/v1/limit", "k", `{"namespace":"n","key":"k","algorithm":"token_bucket","limit":5,"window_ms":1000}`)
		return code == 403
	})
	before = len(p.Logs())
	testkit.ReplaceFile(t, descFile, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 7, algorithm: token_bucket}\n")
	refused(before)
	if got := limitOf(); got != 500 {
		t.Fatalf("a descriptor file whose algorithm is not on the plan was applied: limit %d", got)
	}
}

// TestBadDescriptorFileStopsStart: an invalid descriptor file is a start-up error that
// names the file (spec §9.2).
func TestBadDescriptorFileStopsStart(t *testing.T) {
	dir := t.TempDir()
	desc := filepath.Join(dir, "bad.yaml")
	testkit.ReplaceFile(t, desc, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	cfg := filepath.Join(dir, "leash.yaml")
	testkit.ReplaceFile(t, cfg, fmt.Sprintf("accounts:\n  - {id: acme, plan: pro, api_keys: [k]}\nenvoy:\n  config_paths: [%s]\n  default_account: acme\n", desc))
	cmd := exec.Command(binary, "serve", "--config", cfg)
	cmd.Env = append(leashproc.Environ(), "LEASH_HTTP_ADDR=127.0.0.1:0", "LEASH_ADMIN_ADDR=127.0.0.1:0", "LEASH_GRPC_ADDR=127.0.0.1:0")
	cmd.Dir = t.TempDir() // the default disk store's leash-data goes there, not into the repository
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("exit 0 with a bad descriptor file: %s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "bad.yaml") || !strings.Contains(stderr.String(), "fortnight") {
		t.Fatalf("error does not name the file and the problem: %s", stderr.String())
	}
}

// checkEnvoyUnavailable asserts the gRPC endpoint answers UNAVAILABLE promptly and health
// turns NOT_SERVING while the store is down.
func checkEnvoyUnavailable(t *testing.T, c leashproc.RLSClient) {
	t.Helper()
	start := time.Now()
	_, err := c.ShouldRateLimit(context.Background(), leashproc.Request("n", leashproc.Counted()))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("gRPC with the store down: %v, want UNAVAILABLE", err)
	}
	if strings.Contains(strings.ToLower(status.Convert(err).Message()), "redis") {
		t.Fatalf("driver detail leaked: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("UNAVAILABLE took %v", d)
	}
	testkit.Eventually(t, "health NOT_SERVING with the store down", 5*time.Second, func() bool {
		st, err := c.Health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err == nil && st.Status == healthpb.HealthCheckResponse_NOT_SERVING
	})
}
