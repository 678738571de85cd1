package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/xdstest"
)

func xdsDomain(name, domain string, perMinute uint32) *rlconf.RateLimitConfig {
	return &rlconf.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: "user", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_MINUTE, RequestsPerUnit: perMinute}}}}
}

// The built binary takes descriptor configs from go-control-plane's management server
// (spec §9.14): an update changes the next answers without a restart, a refused one (here
// a domain the files define) changes nothing, /readyz stays 200 while the server is away,
// the restarted server's config applies, and SIGTERM stops the client with the process.
// The peer's counterpart is test/integration/xds_sotw_integration_test.go.
func TestServeXDS(t *testing.T) {
	dir := t.TempDir()
	files := writeTestFile(t, dir, "rl/files.yaml", "domain: files\n")
	mgmt := xdstest.Start(t, "127.0.0.1:0", nil)
	mgmt.Set(t, "leash-e2e", "1", xdsDomain("edge-config", "edge", 2))
	p := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=dev-key-xds", "LEASH_ENVOY_XDS_ADDRESS="+mgmt.Addr,
		"LEASH_ENVOY_XDS_NODE_ID=leash-e2e", "LEASH_ENVOY_CONFIG_PATHS="+files, "LEASH_SHUTDOWN_DRAIN_DELAY=100ms")
	mgmt.WaitACK(t, 10*time.Second, "1")
	c := leashproc.DialRLS(t, p.GRPC)
	limit := func(user string) uint32 {
		t.Helper()
		resp, err := c.ShouldRateLimit(context.Background(), leashproc.Request("edge", leashproc.Entry("user", user)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
	}
	if n := limit("a"); n != 2 {
		t.Fatalf("limit %d, want 2 from xDS version 1", n)
	}

	mgmt.Set(t, "leash-e2e", "2", xdsDomain("edge-config", "edge", 7))
	mgmt.WaitACK(t, time.Second, "2")
	if n := limit("b"); n != 7 {
		t.Fatalf("limit %d after version 2, want 7", n)
	}

	mgmt.Set(t, "leash-e2e", "3", xdsDomain("edge-config", "edge", 9), xdsDomain("mine", "files", 1))
	mgmt.WaitNACK(t, time.Second, `xds:mine: domain: duplicate domain "files": `+files+" defines it too")
	if n := limit("c"); n != 7 {
		t.Fatalf("limit %d after a refused update, want 7 still", n)
	}

	mgmt.Stop()
	testkit.Eventually(t, "leash sees the management server gone", 5*time.Second, func() bool {
		return p.HasLog("xds: stream to the management server ended; keeping the last good config and reconnecting")
	})
	if n := limit("d"); n != 7 {
		t.Fatalf("limit %d with the server away, want 7 still", n)
	}
	resp, err := http.Get("http://" + p.Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/readyz with the xDS server away: %d, want 200", resp.StatusCode)
	}

	again := xdstest.Start(t, mgmt.Addr, nil)
	again.Set(t, "leash-e2e", "4", xdsDomain("edge-config", "edge", 11))
	again.WaitACK(t, 10*time.Second, "4")
	if n := limit("e"); n != 11 {
		t.Fatalf("limit %d after reconnecting, want 11", n)
	}
	if code := limitCode(t, c, "files"); code != rlsv3.RateLimitResponse_OK {
		t.Fatalf("files domain: %v", code)
	}
	resp, err = http.Get("http://" + p.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"leash_xds_connected 1\n", `leash_envoy_rule_hits_total{domain="edge",rule="user"} `, `leash_xds_updates_total{result="applied"} 3` + "\n", `leash_xds_updates_total{result="refused"} `} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	if err := p.Stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

func limitCode(t *testing.T, c leashproc.RLSClient, domain string) rlsv3.RateLimitResponse_Code {
	t.Helper()
	resp, err := c.ShouldRateLimit(context.Background(), leashproc.Request(domain, leashproc.Entry("user", "z")))
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetOverallCode()
}
