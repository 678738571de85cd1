package xds_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/leashd/leash/adapter/rls"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/adapter/xds"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/testcert"
	"github.com/leashd/leash/testkit/xdstest"
)

const node = "leash-test"

// rig is a Leash Envoy endpoint whose descriptors come from one file (domain "files")
// and from xDS, served over gRPC on loopback; domains "edge" and "files" map to account
// acme, and nothing else maps to an account.
type rig struct {
	t      *testing.T
	client rlsv3.RateLimitServiceClient
	svc    *rls.Service
	stop   func()

	applied, refused atomic.Int64 // Options.Updated
	connected        atomic.Bool  // Options.Connected
}

func newRig(t *testing.T, address string, tc *tls.Config) *rig {
	t.Helper()
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = ms.Close() })
	dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: engine.BuiltinPlans()["scale"]}})
	if err != nil {
		t.Fatal(err)
	}
	eng := wiring.New(engine.RolesOf(ms), dir, wiring.Options{})
	path := filepath.Join(t.TempDir(), "files.yaml")
	if err := os.WriteFile(path, []byte("domain: files\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := descriptors.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	routing := domains.Routing{Domains: map[string]string{"edge": "acme", "files": "acme"}}
	cfg, err := domains.Compose(files, nil, routing, dir)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t}
	r.svc = rls.NewService(cfg, rls.Options{Engine: eng, Accounts: eng.Accounts.Account})
	srv, _ := rls.NewServer(r.svc, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r.client = rlsv3.NewRateLimitServiceClient(conn)

	// Apply, as `leash serve` does: the files and the xDS domains together.
	var mu sync.Mutex
	apply := func(x *descriptors.Config) error {
		mu.Lock()
		defer mu.Unlock()
		next, err := domains.Compose(files, x, routing, dir)
		if err != nil {
			return err
		}
		r.svc.SetConfig(next)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		xds.Run(ctx, xds.Options{Address: address, NodeID: node, TLS: tc, Apply: apply,
			Updated: func(ok bool) {
				if ok {
					r.applied.Add(1)
				} else {
					r.refused.Add(1)
				}
			},
			Connected:   r.connected.Store,
			BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, NackDelay: 100 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)})
	}()
	r.stop = func() { cancel(); <-done }
	t.Cleanup(r.stop)
	return r
}

// code asks for one descriptor and returns the overall code and the reported limit.
func (r *rig) code(domain, key, value string) (rlsv3.RateLimitResponse_Code, uint32) {
	r.t.Helper()
	resp, err := r.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain,
		Descriptors: []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: key, Value: value}}}}})
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.GetOverallCode(), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
}

// wantLimit checks that a fresh counter of edge/user is limited at n per minute: n calls
// pass and the next is over the limit (n 0: no limit at all).
func (r *rig) wantLimit(value string, n uint32) {
	r.t.Helper()
	for i := uint32(0); i <= n; i++ {
		code, limit := r.code("edge", "user", value)
		want := rlsv3.RateLimitResponse_OK
		if i == n && n > 0 {
			want = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if code != want || limit != n {
			r.t.Fatalf("edge user=%s call %d: %v with limit %d; want %v with limit %d", value, i+1, code, limit, want, n)
		}
	}
}

func edge(name string, perMinute uint32) *rlconf.RateLimitConfig {
	return &rlconf.RateLimitConfig{Name: name, Domain: "edge", Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: "user", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_MINUTE, RequestsPerUnit: perMinute}}}}
}

// Updates apply without a restart and are ACKed; invalid ones are NACKed with the error
// and change nothing; a domain from the files or one that maps to no account is refused.
// Mirrors the peer's test/provider/xds_grpc_sotw_provider_test.go.
func TestUpdatesACKAndNACK(t *testing.T) {
	mgmt := xdstest.Start(t, "127.0.0.1:0", nil)
	mgmt.Set(t, node, "1", edge("edge-config", 2))
	r := newRig(t, mgmt.Addr, nil)
	mgmt.WaitACK(t, 5*time.Second, "1")
	r.wantLimit("a", 2)

	start := time.Now()
	mgmt.Set(t, node, "2", edge("edge-config", 3))
	mgmt.WaitACK(t, time.Second, "2")
	if d := time.Since(start); d > time.Second {
		t.Errorf("update applied after %v, want within 1 s", d)
	}
	r.wantLimit("b", 3)

	for _, tc := range []struct {
		name    string
		version string
		rcs     []*rlconf.RateLimitConfig
		msg     string
	}{
		{"invalid resource", "3", []*rlconf.RateLimitConfig{{Name: "bad", Domain: "edge", Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "user", RateLimit: &rlconf.RateLimitPolicy{RequestsPerUnit: 1}}}}},
			"xds:bad: descriptors[0].rate_limit: unit is required"},
		{"a domain of the files", "4", []*rlconf.RateLimitConfig{edge("edge-config", 3), {Name: "mine", Domain: "files"}},
			`xds:mine: domain: duplicate domain "files": `},
		{"a domain with no account", "5", []*rlconf.RateLimitConfig{edge("edge-config", 3), {Name: "stray", Domain: "stray"}},
			`xds:stray: domain "stray" maps to no account`},
		{"two resources, one domain", "6", []*rlconf.RateLimitConfig{edge("a", 3), edge("b", 3)},
			`xds:b: domain: duplicate domain "edge": xds:a defines it too`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mgmt.Set(t, node, tc.version, tc.rcs...)
			nack := mgmt.WaitNACK(t, time.Second, tc.msg)
			if nack.GetVersionInfo() != "2" {
				t.Errorf("NACK carries version %q, want the version in force, 2", nack.GetVersionInfo())
			}
			r.wantLimit("c"+tc.version, 3) // the running config stays
			if code, _ := r.code("files", "k", "x"+tc.version); code != rlsv3.RateLimitResponse_OK {
				t.Errorf("the files' domain: %v", code)
			}
		})
	}

	// A valid update after refused ones applies; an empty one removes the xDS domains.
	mgmt.Set(t, node, "7", edge("edge-config", 4))
	mgmt.WaitACK(t, 2*time.Second, "7")
	r.wantLimit("d", 4)
	mgmt.Set(t, node, "8")
	mgmt.WaitACK(t, 2*time.Second, "8")
	r.wantLimit("e", 0)
	if a, n := r.applied.Load(), r.refused.Load(); a != 4 || n < 4 || !r.connected.Load() {
		t.Errorf("Updated: %d applied, %d refused (want 4 and at least 4); connected %v", a, n, r.connected.Load())
	}
}

// With the server away the last good config stays; the client reconnects to the
// restarted server and applies its config.
func TestServerRestart(t *testing.T) {
	mgmt := xdstest.Start(t, "127.0.0.1:0", nil)
	mgmt.Set(t, node, "1", edge("edge-config", 2))
	r := newRig(t, mgmt.Addr, nil)
	mgmt.WaitACK(t, 5*time.Second, "1")
	mgmt.Stop()
	testkit.Eventually(t, "Connected(false) reported with the server away", 5*time.Second, func() bool { return !r.connected.Load() })
	r.wantLimit("a", 2)

	again := xdstest.Start(t, mgmt.Addr, nil)
	again.Set(t, node, "2", edge("edge-config", 5))
	first := again.WaitRequest(t, 5*time.Second, "the first request", func(*discoveryv3.DiscoveryRequest) bool { return true })
	if first.GetVersionInfo() != "1" || first.GetNode().GetId() != node {
		t.Errorf("first request after reconnecting: version %q node %q, want 1 and %s", first.GetVersionInfo(), first.GetNode().GetId(), node)
	}
	again.WaitACK(t, 5*time.Second, "2")
	r.wantLimit("b", 5)
	if !r.connected.Load() {
		t.Error("Connected(true) not reported after reconnecting")
	}
}

// envoy.xds.tls: the server is verified against the CA and the client presents its
// certificate.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := testcert.New(t, nil, nil, "test CA", true)
	srvCert, srvKey := testcert.New(t, ca, caKey, "xds server", false)
	cliCert, cliKey := testcert.New(t, ca, caKey, "leash", false)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	serverTLS := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}},
		ClientCAs:    pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}
	mgmt := xdstest.Start(t, "127.0.0.1:0", serverTLS)
	mgmt.Set(t, node, "1", edge("edge-config", 2))
	tc, err := xds.TLSConfig(testcert.WriteCert(t, dir, "ca.pem", ca), testcert.WriteCert(t, dir, "cert.pem", cliCert),
		testcert.WriteKey(t, dir, "key.pem", cliKey), "")
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, mgmt.Addr, tc)
	mgmt.WaitACK(t, 5*time.Second, "1")
	r.wantLimit("a", 2)

	if _, err := xds.TLSConfig(filepath.Join(dir, "missing.pem"), "", "", ""); err == nil || !strings.Contains(err.Error(), "envoy.xds.tls.ca_file") {
		t.Errorf("missing CA file: %v", err)
	}
}
