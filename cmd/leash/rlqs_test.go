package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
)

// TestRLQSEndpoint: a leash process serves the Rate Limit Quota Service on its gRPC
// listener (spec §14): health reports it, a report is answered with an assignment and
// spends the counter /v1/limit sees, the metrics count it, and SIGTERM ends the stream
// with UNAVAILABLE so the proxy reconnects elsewhere.
func TestRLQSEndpoint(t *testing.T) {
	dir := t.TempDir()
	desc := filepath.Join(dir, "edge.yaml")
	testkit.ReplaceFile(t, desc, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100}\n")
	cfg := filepath.Join(dir, "leash.yaml")
	testkit.ReplaceFile(t, cfg, fmt.Sprintf("accounts:\n  - {id: acme, plan: pro, api_keys: [k]}\nenvoy:\n  config_paths: [%s]\n  domains: {edge: {account: acme}}\n", desc))
	p := leashproc.Start(t, binary, []string{"--config", cfg}, "LEASH_SHUTDOWN_DRAIN_DELAY=0s")
	conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if st, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"}); err != nil || st.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v %v", st, err)
	}
	st, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bucket := &rlqsv3.BucketId{Bucket: map[string]string{"user": "alice"}}
	if err := st.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
		{BucketId: bucket, NumRequestsAllowed: 40, NumRequestsDenied: 2},
	}}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	a := resp.GetBucketAction()[0]
	if a.GetBucketId().GetBucket()["user"] != "alice" || a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket() == nil {
		t.Fatalf("assignment %v", resp)
	}
	// The report spent 40 of the descriptor's counter, key "user=alice" in namespace edge.
	code, out := leashproc.Call(t, "POST", "http://"+p.HTTP+"/v1/limit", "k",
		`{"namespace":"edge","key":"user=alice","algorithm":"fixed_window","limit":100,"window_ms":60000}`)
	if code != 200 || out["remaining"] != float64(59) {
		t.Fatalf("/v1/limit after the report: %d %v", code, out)
	}
	mresp, err := http.Get("http://" + p.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{"leash_rlqs_streams 1", `leash_rlqs_assignments_total{kind="token_bucket"} 1`,
		`leash_rlqs_reported_requests_total{domain="edge",outcome="allowed"} 40`, `op="report_demand"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	start := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err = st.Recv(); err != nil {
			break
		}
	}
	if status.Code(err) != codes.Unavailable || time.Since(start) > 5*time.Second {
		t.Fatalf("the stream ended with %v after %v, want UNAVAILABLE at once", err, time.Since(start))
	}
	if err := <-p.Exited; err != nil {
		t.Fatalf("exit: %v", err)
	}
}
