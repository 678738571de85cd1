package rls_test

import (
	"os"
	"path/filepath"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/leashd/leash/adapter/domains"
)

// readmeFiles are envoyproxy/ratelimit's README examples, rewritten as test data in
// adapter/descriptors/testdata/readme; here they are decided end to end over gRPC.
func readmeFiles(t *testing.T, names ...string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("..", "descriptors", "testdata", "readme", n))
		if err != nil {
			t.Fatal(err)
		}
		files[n] = string(b)
	}
	return files
}

func TestReadmeDecisions(t *testing.T) {
	h := newHarness(t, scalePlan(), readmeFiles(t, "edge_proxy_per_ip.yaml", "example7.yaml", "mongo_cps.yaml"))
	h.svc.SetConfig(withDefaultAccount(h, "acme"))
	call := func(domain string, ds ...*rlcommon.RateLimitDescriptor) *rlsv3.RateLimitResponse {
		t.Helper()
		return h.call(&rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds})
	}

	// Per-IP: 10 per second for every address; 50.0.0.5 is blocked outright.
	for i := range 10 {
		h.want(call("edge_proxy_per_ip", desc("remote_address", "10.0.0.1")).Statuses[0], ok, 10, second, uint32(9-i))
	}
	h.want(call("edge_proxy_per_ip", desc("remote_address", "10.0.0.1")).Statuses[0], over, 10, second, 0)
	if r := call("edge_proxy_per_ip", desc("remote_address", "50.0.0.5")); r.OverallCode != over {
		t.Fatalf("blocked address: %v", r)
	}

	// mongo_cps: the named databases have 500 per second; any other database is unlimited.
	h.want(call("mongo_cps", desc("database", "users")).Statuses[0], ok, 500, second, 499)
	h.want(call("mongo_cps", desc("database", "other")).Statuses[0], ok, 0, 0, 0)

	// Example 7: when both descriptors match, the 10/s limit replaces the 5/s one.
	both := []*rlcommon.RateLimitDescriptor{
		desc("key_1", "value_1", "user", "bkthomps"),
		desc("key_2", "value_2", "user", "bkthomps"),
	}
	for i := range 10 {
		r := call("example7", both...)
		h.want(r.Statuses[0], ok, 0, 0, 0)
		h.want(r.Statuses[1], ok, 10, second, uint32(9-i))
	}
	r := call("example7", both...)
	if r.OverallCode != over || r.Statuses[1].Code != over {
		t.Fatalf("example 7, 11th request: %v", r)
	}
	// Alone, the 5/s limit applies.
	h.want(call("example7", desc("key_1", "value_1", "user", "bkthomps")).Statuses[0], ok, 5, second, 4)
}

// withDefaultAccount is the harness's config with every domain on account id.
func withDefaultAccount(h *harness, id string) *domains.Config {
	h.t.Helper()
	cfg := *h.cfg
	cfg.Routing.DefaultAccount = id
	return &cfg
}
