package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestServeOnRedis: leash serve on the Redis store answers, turns 503 (no driver text)
// when Redis stops, and recovers without a restart when it returns.
func TestServeOnRedis(t *testing.T) {
	r := redistest.StartServer(t, false)
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=k", "LEASH_STORE_BACKEND=redis",
		"LEASH_STORE_REDIS_URL="+r.URL(),
		"LEASH_STORE_REDIS_READ_TIMEOUT=300ms", "LEASH_STORE_REDIS_DIAL_TIMEOUT=300ms")
	base := "http://" + p.HTTP
	body := `{"namespace":"n","key":"k","algorithm":"fixed_window","limit":2,"window_ms":60000}`
	for i, want := range []bool{true, true, false} {
		code, out := leashproc.Call(t, "POST", base+"/v1/limit", "k", body)
		if code != 200 || out["allowed"] != want {
			t.Fatalf("check %d = %d %v", i, code, out)
		}
	}

	c := leashproc.DialRLS(t, p.GRPC)
	if _, err := c.ShouldRateLimit(context.Background(), leashproc.Request("n", leashproc.Counted())); err != nil {
		t.Fatalf("gRPC on Redis: %v", err)
	}

	r.Stop()
	checkEnvoyUnavailable(t, c)
	start := time.Now()
	req, _ := http.NewRequest("POST", base+"/v1/limit", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(b), `"code":"unavailable"`) {
		t.Fatalf("with Redis down: %d %s", resp.StatusCode, b)
	}
	if strings.Contains(strings.ToLower(string(b)), "redis") || strings.Contains(string(b), "127.0.0.1") || strings.Contains(string(b), "dial") {
		t.Fatalf("driver detail leaked: %s", b)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("503 took %v", d)
	}
	if resp, err := http.Get("http://" + p.Admin + "/readyz"); err != nil || resp.StatusCode != 503 {
		t.Fatalf("readyz with Redis down: %v %v", resp.StatusCode, err)
	}

	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	testkit.Eventually(t, "/v1/limit serves again after Redis returned", 10*time.Second, func() bool {
		code, out := leashproc.Call(t, "POST", base+"/v1/limit", "k", `{"namespace":"n","key":"fresh","limit":2,"window_ms":60000}`)
		return code == 200 && out["allowed"] == true
	})
	if resp, err := http.Get("http://" + p.Admin + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz after recovery: %v %v", resp.StatusCode, err)
	}
	testkit.Eventually(t, "gRPC health SERVING after recovery", time.Until(deadline), func() bool {
		st, err := c.Health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err == nil && st.Status == healthpb.HealthCheckResponse_SERVING
	})
	if _, err := c.ShouldRateLimit(context.Background(), leashproc.Request("n", leashproc.Counted())); err != nil {
		t.Fatalf("gRPC after recovery: %v", err)
	}
}
