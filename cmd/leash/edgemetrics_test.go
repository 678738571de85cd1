package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
)

// seriesValue is the value of one series of a /metrics page; 0 when the page lacks it (a
// labelled counter appears on its first count).
func seriesValue(t *testing.T, text, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// TestEnvoyCallPathsCounted: every way into the Envoy edges of a running leash is counted
// in /metrics (spec §12.2): a gRPC ShouldRateLimit call and a /json call each count their
// descriptors' decisions, and an RLQS stream counts as open while it is, with the bucket
// action sent to it and the requests it reported.
func TestEnvoyCallPathsCounted(t *testing.T) {
	dir := t.TempDir()
	desc := filepath.Join(dir, "edge.yaml")
	testkit.ReplaceFile(t, desc, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"+
		"  - key: quota\n    rate_limit: {unit: minute, requests_per_unit: 100}\n")
	cfg := filepath.Join(dir, "leash.yaml")
	testkit.ReplaceFile(t, cfg, fmt.Sprintf("accounts:\n  - {id: acme, plan: pro, api_keys: [k]}\nenvoy:\n  config_paths: [%s]\n  domains: {edge: {account: acme}}\n", desc))
	p := leashproc.Start(t, binary, []string{"--config", cfg}, "LEASH_ENVOY_JSON_ADDR=127.0.0.1:0")
	const (
		allowed = `leash_decisions_total{endpoint="envoy",outcome="allowed"}`
		denied  = `leash_decisions_total{endpoint="envoy",outcome="denied"}`
	)
	decisions := func(path string, wantAllowed, wantDenied float64) {
		t.Helper()
		text := metricsText(t, p)
		if a, d := seriesValue(t, text, allowed), seriesValue(t, text, denied); a != wantAllowed || d != wantDenied {
			t.Errorf("after %s: envoy decisions allowed %v denied %v, want %v and %v", path, a, d, wantAllowed, wantDenied)
		}
	}

	// gRPC: the first call of a counter is allowed, the second denied.
	c := leashproc.DialRLS(t, p.GRPC)
	c.Status(t, "edge", leashproc.Entry("user", "grpc"))
	c.Status(t, "edge", leashproc.Entry("user", "grpc"))
	decisions("two gRPC calls", 1, 1)

	// /json: the same, on its own counter.
	for _, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		resp, err := http.Post("http://"+p.JSON+"/json", "application/json",
			strings.NewReader(`{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"json"}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("/json answered %d, want %d", resp.StatusCode, want)
		}
	}
	decisions("two /json calls", 2, 2)

	// RLQS: a stream with one report.
	conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
		{BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"quota": "alice"}}, NumRequestsAllowed: 3, NumRequestsDenied: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := st.Recv(); err != nil || len(resp.GetBucketAction()) != 1 {
		t.Fatalf("RLQS answered %v, %v; want one bucket action", resp, err)
	}
	text := metricsText(t, p)
	for series, want := range map[string]float64{
		"leash_rlqs_streams": 1,
		`leash_rlqs_assignments_total{kind="token_bucket"}`:                   1,
		`leash_rlqs_reported_requests_total{domain="edge",outcome="allowed"}`: 3,
		`leash_rlqs_reported_requests_total{domain="edge",outcome="denied"}`:  1,
	} {
		if got := seriesValue(t, text, series); got != want {
			t.Errorf("with the stream open: %s = %v, want %v", series, got, want)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("the stream ended with %v, want its end", err)
	}
	// gRPC sends the stream's end once its handler and interceptors have returned.
	if got := seriesValue(t, metricsText(t, p), "leash_rlqs_streams"); got != 0 {
		t.Errorf("after the stream ended: leash_rlqs_streams = %v, want 0", got)
	}
}
