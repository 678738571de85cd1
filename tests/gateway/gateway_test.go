package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
	"github.com/leashd/leash/testkit/testcert"
	"github.com/leashd/leash/testkit/xdstest"
)

// binary is the race-enabled leash the tests run.
var binary string

func TestMain(m *testing.M) { os.Exit(leashproc.Main(m, &binary)) }

// gatewayEnv is exactly the environment Envoy Gateway gives its ratelimit container with
// a Redis backend and the default telemetry (Prometheus on, no tracing): envoyproxy/gateway
// internal/infrastructure/kubernetes/ratelimit/resource.go, expectedRateLimitContainerEnv,
// at commit d32f28294245e454d20f81d323d626a90e660c1e. The values are the test's: the
// certificate files, the xDS server, the Redis, and PROMETHEUS_ADDR on a free loopback
// port instead of :19001.
func gatewayEnv(certs, xdsAddr, redisAddr string) []string {
	return []string{
		"RUNTIME_ROOT=/data",
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_IGNOREDOTFILES=true",
		"RUNTIME_WATCH_ROOT=false",
		"LOG_LEVEL=info",
		"USE_STATSD=false",
		"CONFIG_TYPE=GRPC_XDS_SOTW",
		"CONFIG_GRPC_XDS_SERVER_URL=" + xdsAddr,
		"CONFIG_GRPC_XDS_NODE_ID=envoy-ratelimit",
		"GRPC_SERVER_USE_TLS=true",
		"GRPC_SERVER_TLS_CERT=" + filepath.Join(certs, "tls.crt"),
		"GRPC_SERVER_TLS_KEY=" + filepath.Join(certs, "tls.key"),
		"GRPC_SERVER_TLS_CA_CERT=" + filepath.Join(certs, "ca.crt"),
		"CONFIG_GRPC_XDS_SERVER_USE_TLS=true",
		"CONFIG_GRPC_XDS_CLIENT_TLS_CERT=" + filepath.Join(certs, "tls.crt"),
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY=" + filepath.Join(certs, "tls.key"),
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT=" + filepath.Join(certs, "ca.crt"),
		"FORCE_START_WITHOUT_INITIAL_CONFIG=true",
		"REDIS_SOCKET_TYPE=tcp",
		"REDIS_URL=" + redisAddr,
		"USE_PROMETHEUS=true",
		"PROMETHEUS_ADDR=127.0.0.1:0",
		"PROMETHEUS_MAPPER_YAML=/etc/statsd-exporter/conf.yaml",
	}
}

// gatewayConfig is a RateLimitConfig as Envoy Gateway's translator builds one for a
// listener (internal/xds/translator/ratelimit.go): the domain is the listener's name,
// the route's descriptor wraps each rule's, here 3 requests a minute per x-user-id and a
// budget of 1000 tokens a minute per model.
func gatewayConfig() *rlconf.RateLimitConfig {
	route := "httproute/default/backend/rule/0/match/0"
	return &rlconf.RateLimitConfig{Name: "default/eg/http", Domain: "default/eg/http", Descriptors: []*rlconf.RateLimitDescriptor{{
		Key: route, Value: route,
		Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "rule-0-match-0", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_MINUTE, RequestsPerUnit: 3}},
			{Key: "rule-1-match-0", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_MINUTE, RequestsPerUnit: 1000}},
		},
	}}}
}

func TestRatelimitUnderEnvoyGatewayEnvironment(t *testing.T) {
	dir := t.TempDir()
	// The binary named ratelimit, as the image carries it at /bin/ratelimit.
	ratelimit := filepath.Join(dir, "ratelimit")
	if err := os.Symlink(binary, ratelimit); err != nil {
		t.Fatal(err)
	}
	// Envoy Gateway's envoy-rate-limit Secret: a CA, and one certificate for the gRPC
	// server and the xDS client.
	certs := filepath.Join(dir, "certs")
	if err := os.Mkdir(certs, 0o755); err != nil {
		t.Fatal(err)
	}
	ca, caKey := testcert.New(t, nil, nil, "envoy-gateway-ca", true)
	leaf, leafKey := testcert.New(t, ca, caKey, "envoy-rate-limit", false)
	testcert.WriteCert(t, certs, "ca.crt", ca)
	testcert.WriteCert(t, certs, "tls.crt", leaf)
	testcert.WriteKey(t, certs, "tls.key", leafKey)
	pool := x509.NewCertPool()
	pool.AddCert(ca)

	// The xDS server, as Envoy Gateway's: TLS, and a client certificate required.
	xdsCert, xdsKey := testcert.New(t, ca, caKey, "envoy-gateway", false)
	xds := xdstest.Start(t, "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
		Certificates: []tls.Certificate{{Certificate: [][]byte{xdsCert.Raw}, PrivateKey: xdsKey}}})
	xds.Set(t, "envoy-ratelimit", "v1", gatewayConfig())
	redis := redistest.StartServer(t, false)

	env := append(gatewayEnv(certs, xds.Addr, redis.Addr()),
		// Envoy Gateway leaves these at the peer's defaults (8080, 8081, 6070); a shared
		// test machine needs free ports, and Leash's /v1 listener one too.
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		"LEASH_HTTP_ADDR=127.0.0.1:0")
	p := leashproc.StartAs(t, ratelimit, nil, env...)
	xds.WaitACK(t, 10*time.Second, "v1")

	// GRPC_SERVER_TLS_CA_CERT is read by neither the peer nor Leash: a warning says so.
	warned := false
	for _, r := range p.Logs() {
		if m, _ := r["msg"].(string); r["level"] == "WARN" && strings.Contains(m, "GRPC_SERVER_TLS_CA_CERT") {
			warned = true
		}
	}
	if !warned {
		t.Error("no start-up warning for GRPC_SERVER_TLS_CA_CERT")
	}

	// ShouldRateLimit over TLS, verified against the CA.
	conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	route := "httproute/default/backend/rule/0/match/0"
	call := func(rule, value string, hits uint32) *rlsv3.RateLimitResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "default/eg/http", HitsAddend: hits,
			Descriptors: []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{
				{Key: route, Value: route}, {Key: rule, Value: value}}}}})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp
	}
	want := func(resp *rlsv3.RateLimitResponse, code rlsv3.RateLimitResponse_Code, remaining uint32) {
		t.Helper()
		st := resp.GetStatuses()[0]
		if resp.GetOverallCode() != code || st.GetCode() != code || st.GetLimitRemaining() != remaining {
			t.Fatalf("got %v, want %v with limit_remaining %d", resp, code, remaining)
		}
		if len(resp.GetResponseHeadersToAdd()) != 0 {
			t.Fatalf("RateLimit-* headers without LIMIT_RESPONSE_HEADERS_ENABLED: %v", resp.GetResponseHeadersToAdd())
		}
	}
	// 3 a minute per user: alice's fourth is over, bob has his own counter.
	want(call("rule-0-match-0", "alice", 0), rlsv3.RateLimitResponse_OK, 2)
	want(call("rule-0-match-0", "alice", 0), rlsv3.RateLimitResponse_OK, 1)
	want(call("rule-0-match-0", "alice", 0), rlsv3.RateLimitResponse_OK, 0)
	want(call("rule-0-match-0", "alice", 0), rlsv3.RateLimitResponse_OVER_LIMIT, 0)
	want(call("rule-0-match-0", "bob", 0), rlsv3.RateLimitResponse_OK, 2)
	// A token budget counts as the peer counts: the charge of 5000 exhausts it.
	want(call("rule-1-match-0", "gpt", 1), rlsv3.RateLimitResponse_OK, 999)
	want(call("rule-1-match-0", "gpt", 5000), rlsv3.RateLimitResponse_OVER_LIMIT, 0)
	want(call("rule-1-match-0", "gpt", 1), rlsv3.RateLimitResponse_OVER_LIMIT, 0)

	// The probes on PORT, the metrics on PROMETHEUS_ADDR.
	code, body := get(t, "http://"+p.JSON+"/healthcheck")
	if code != http.StatusOK || body != "OK" {
		t.Fatalf("/healthcheck: %d %q", code, body)
	}
	code, body = get(t, "http://"+p.Admin+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "leash_envoy_") {
		t.Fatalf("/metrics: %d, %d bytes", code, len(body))
	}
	p.NoCrash(t)
	if err := p.Stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
