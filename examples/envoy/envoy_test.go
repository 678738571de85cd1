// Tests of the Envoy example: the bootstrap is valid Envoy v3 configuration (as far as
// go-control-plane can tell without an Envoy binary), broken copies of it are caught, and
// the descriptors its routes produce select the intended rules of ratelimit/config.yaml
// through Leash's own descriptor loader.
package envoy_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/config"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit/envoycheck"
	"github.com/leashd/leash/testkit/leashproc"
)

const (
	envoyFile      = "envoy.yaml"
	descriptorDir  = "ratelimit"
	descriptorFile = "ratelimit/config.yaml"
	leashFile      = "leash.yaml"
	composeFile    = "docker-compose.yaml"
)

// checkBootstrap reads a generic YAML document as a Bootstrap and validates it deeply.
func checkBootstrap(doc any) (*bootstrapv3.Bootstrap, error) {
	b := &bootstrapv3.Bootstrap{}
	if err := envoycheck.Unmarshal(doc, b); err != nil {
		return nil, err
	}
	return b, envoycheck.Validate(b)
}

func readDoc(t *testing.T, path string) any {
	t.Helper()
	docs, err := envoycheck.ReadYAML(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(docs) != 1 {
		t.Fatalf("%s: want one YAML document, got %d", path, len(docs))
	}
	return docs[0]
}

func bootstrap(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	b, err := checkBootstrap(readDoc(t, envoyFile))
	if err != nil {
		t.Fatalf("%s: %v", envoyFile, err)
	}
	return b
}

// TestEnvoyConfigsValid validates every Envoy bootstrap in this folder (any YAML document
// with static_resources or admin at the top).
func TestEnvoyConfigsValid(t *testing.T) {
	var found []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		docs, err := envoycheck.ReadYAML(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		for i, doc := range docs {
			m, ok := doc.(map[string]any)
			if !ok || (m["static_resources"] == nil && m["admin"] == nil) {
				continue
			}
			found = append(found, path)
			if _, err := checkBootstrap(doc); err != nil {
				t.Errorf("%s (document %d): %v", path, i, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(found, envoyFile) {
		t.Fatalf("no Envoy bootstrap found in %s (found %v)", envoyFile, found)
	}
}

// Paths into envoy.yaml used by the broken-copy cases.
var (
	hcmPath       = []any{"static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config"}
	rateLimitPath = append(slices.Clone(hcmPath), "http_filters", 0, "typed_config")
	apiRoutePath  = append(slices.Clone(hcmPath), "route_config", "virtual_hosts", 0, "routes", 1)
)

func path(base []any, more ...any) []any { return append(slices.Clone(base), more...) }

// TestBrokenCopiesFail proves the validation can fail: each case breaks a copy of
// envoy.yaml in one way and expects a specific error.
func TestBrokenCopiesFail(t *testing.T) {
	set := func(v any, p ...any) func(any) error {
		return func(doc any) error { return envoycheck.Set(doc, v, p...) }
	}
	del := func(p ...any) func(any) error {
		return func(doc any) error { return envoycheck.Delete(doc, p...) }
	}
	cases := []struct {
		name   string
		break_ func(any) error
		want   string
	}{
		{"unknown field", set(1, "static_resources", "listeners", 0, "bogus_field"), "unknown field"},
		{"unknown field inside typed_config", set("edge", path(rateLimitPath, "domian")...), "unknown field"},
		{"wrong enum", set("STRICT_DNZ", "static_resources", "clusters", 0, "type"), "invalid value for enum"},
		{"wrong scalar type", set("ten", "admin", "address", "socket_address", "port_value"), "invalid value for uint32"},
		{"unknown typed_config type", set("type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitz",
			path(rateLimitPath, "@type")...), "RateLimitz"},
		{"cluster without name", del("static_resources", "clusters", 1, "name"), "Name: value length must be at least 1"},
		{"ratelimit filter with empty domain", set("", path(rateLimitPath, "domain")...), "Domain: value length must be at least 1"},
		{"rate_limit_service without cluster name",
			del(path(rateLimitPath, "rate_limit_service", "grpc_service", "envoy_grpc", "cluster_name")...), "ClusterName"},
		{"rate_limit_service without grpc_service",
			del(path(rateLimitPath, "rate_limit_service", "grpc_service")...), "GrpcService: value is required"},
		{"request_headers action without header name",
			set("", path(apiRoutePath, "route", "rate_limits", 0, "actions", 1, "request_headers", "header_name")...), "HeaderName"},
		{"deprecated field", set(map[string]any{}, "static_resources", "clusters", 1, "http2_protocol_options"), "deprecated"},
	}
	base := readDoc(t, envoyFile)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := envoycheck.Clone(base)
			if err := tc.break_(doc); err != nil {
				t.Fatalf("cannot break the copy: %v", err)
			}
			_, err := checkBootstrap(doc)
			if err == nil {
				t.Fatalf("broken copy passed validation")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
			t.Logf("rejected as expected: %v", err)
		})
	}
	// The cases edit copies only: the original still passes.
	if _, err := checkBootstrap(base); err != nil {
		t.Fatalf("original after the cases: %v", err)
	}
}

func loadDescriptors(t *testing.T) *descriptors.Config {
	t.Helper()
	cfg, err := descriptors.Load(descriptorDir)
	if err != nil {
		t.Fatalf("descriptors.Load(%s): %v", descriptorDir, err)
	}
	return cfg
}

func descriptorDomain(t *testing.T) string {
	t.Helper()
	d, err := envoycheck.Get(readDoc(t, descriptorFile), "domain")
	s, _ := d.(string)
	if err != nil || s == "" {
		t.Fatalf("%s: no domain (%v)", descriptorFile, err)
	}
	return s
}

// TestFilterAndClusters checks how the pieces connect: the filter's domain is the
// descriptor file's, the rate-limit service is a defined HTTP/2 cluster, the filters are
// in a working order and every route's cluster exists.
func TestFilterAndClusters(t *testing.T) {
	b := bootstrap(t)
	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range b.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}

	var rls []*ratelimitv3.RateLimit
	envoycheck.Walk(b, func(rl *ratelimitv3.RateLimit) { rls = append(rls, rl) })
	if len(rls) != 1 {
		t.Fatalf("want one ratelimit filter, found %d", len(rls))
	}
	rl := rls[0]

	domain := descriptorDomain(t)
	if rl.GetDomain() != domain {
		t.Errorf("ratelimit filter domain %q, descriptor file domain %q", rl.GetDomain(), domain)
	}
	if got := loadDescriptors(t).Domains(); !slices.Equal(got, []string{domain}) {
		t.Errorf("Leash loads domains %v from %s, want [%s]", got, descriptorDir, domain)
	}
	if rl.GetFailureModeDeny() {
		t.Errorf("failure_mode_deny: the example documents fail-open (false)")
	}

	svc := rl.GetRateLimitService()
	if svc.GetTransportApiVersion() != corev3.ApiVersion_V3 {
		t.Errorf("rate_limit_service.transport_api_version = %v, want V3", svc.GetTransportApiVersion())
	}
	name := svc.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	c, ok := clusters[name]
	if !ok {
		t.Fatalf("rate_limit_service cluster %q is not defined (clusters: %v)", name, slices.Sorted(mapsKeys(clusters)))
	}
	opts, ok := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	if !ok {
		t.Fatalf("cluster %q: no HttpProtocolOptions; gRPC needs HTTP/2", name)
	}
	hpo := &upstreamhttpv3.HttpProtocolOptions{}
	if err := anypb.UnmarshalTo(opts, hpo, proto.UnmarshalOptions{}); err != nil {
		t.Fatal(err)
	}
	if hpo.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("cluster %q: HTTP/2 is not explicit", name)
	}
	if port := endpointPort(c); port != 8081 {
		t.Errorf("cluster %q: port %d, want Leash's grpc.addr port 8081", name, port)
	}

	var hcms []*hcmv3.HttpConnectionManager
	envoycheck.Walk(b, func(h *hcmv3.HttpConnectionManager) { hcms = append(hcms, h) })
	for _, h := range hcms {
		var names []string
		for _, f := range h.GetHttpFilters() {
			names = append(names, f.GetName())
		}
		if len(names) == 0 || names[len(names)-1] != "envoy.filters.http.router" {
			t.Errorf("HTTP filters %v: the router must be last", names)
		}
		if !slices.Contains(names, "envoy.filters.http.ratelimit") {
			t.Errorf("HTTP filters %v: no ratelimit filter", names)
		}
	}
	envoycheck.Walk(b, func(r *routev3.Route) {
		if cl := r.GetRoute().GetCluster(); clusters[cl] == nil {
			t.Errorf("route %q: cluster %q is not defined", r.GetName(), cl)
		}
	})
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func endpointPort(c *clusterv3.Cluster) uint32 {
	for _, e := range c.GetLoadAssignment().GetEndpoints() {
		for _, lb := range e.GetLbEndpoints() {
			return lb.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
		}
	}
	return 0
}

// TestLeashConfig loads leash.yaml with Leash's own config loader and checks that the
// descriptor domain counts against a defined account, and that docker-compose.yaml mounts
// the files where leash.yaml and envoy.yaml expect them.
func TestLeashConfig(t *testing.T) {
	cfg, err := config.Load([]string{leashFile}, nil)
	if err != nil {
		t.Fatalf("%s: %v", leashFile, err)
	}
	domain := descriptorDomain(t)
	account := cfg.Envoy.DefaultAccount
	if d, ok := cfg.Envoy.Domains[domain]; ok {
		account = d.Account
	}
	if !slices.ContainsFunc(cfg.Accounts, func(a config.Account) bool { return a.ID == account }) {
		t.Errorf("domain %q maps to account %q, which %s does not define", domain, account, leashFile)
	}
	if cfg.Store.Backend != "redis" {
		t.Errorf("store.backend = %q, the example runs on redis", cfg.Store.Backend)
	}
	if !cfg.Envoy.ResponseHeaders {
		t.Errorf("envoy.response_headers is off; the README shows the RateLimit-* headers")
	}

	compose := readDoc(t, composeFile)
	mounts := func(svc string) []string {
		v, err := envoycheck.Get(compose, "services", svc, "volumes")
		if err != nil {
			t.Fatalf("%s: %v", composeFile, err)
		}
		var out []string
		for _, m := range v.([]any) {
			out = append(out, strings.TrimSuffix(m.(string), ":ro"))
		}
		return out
	}
	leashMounts := mounts("leash")
	for _, p := range cfg.Envoy.ConfigPaths {
		if !slices.Contains(leashMounts, "./"+descriptorDir+":"+p) {
			t.Errorf("envoy.config_paths has %s, but compose mounts %v", p, leashMounts)
		}
	}
	if !slices.Contains(leashMounts, "./"+leashFile+":/etc/leash/leash.yaml") {
		t.Errorf("compose does not mount %s at /etc/leash/leash.yaml: %v", leashFile, leashMounts)
	}
	if !slices.Contains(mounts("envoy"), "./"+envoyFile+":/etc/envoy/envoy.yaml") {
		t.Errorf("compose does not mount %s at /etc/envoy/envoy.yaml", envoyFile)
	}
	if !strings.HasSuffix(cfg.GRPC.Addr, ":8081") {
		t.Errorf("grpc.addr = %q; envoy.yaml's leash cluster uses port 8081", cfg.GRPC.Addr)
	}
}

// TestCheckConfigCommand runs the README's check from the root of a checkout, outside the
// containers: the descriptor folder named on the command line stands in for leash.yaml's
// /etc/leash/ratelimit, and the Redis host of the compose network is never contacted.
func TestCheckConfigCommand(t *testing.T) {
	bin := leashproc.Plain(t)
	cmd := exec.Command(bin, "check-config", "--config", "examples/envoy/leash.yaml", "examples/envoy/ratelimit/")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = leashproc.Environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout: %s\nstderr: %s", err, out.String(), errb.String())
	}
	if want := "leash check-config: valid: 1 account, 1 domain: " + descriptorDomain(t) + "\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
}

// want is the rule a descriptor must select.
type want struct {
	entries   []envoycheck.Entry
	perMinute int64 // 0 with unlimited
	unlimited bool
	shadow    bool
}

var e = envoycheck.Entries

// TestRouteDescriptorsMatchRules computes, for sample requests, the descriptors Envoy
// sends from the matched route's rate_limits and checks that each selects the intended
// rule of ratelimit/config.yaml through Leash's loader; and that every rule is reached.
func TestRouteDescriptorsMatchRules(t *testing.T) {
	const ip = "203.0.113.7"
	ceiling := want{entries: e("remote_address", ip), perMinute: 300, shadow: true}
	cases := []struct {
		name  string
		req   envoycheck.Request
		route string
		want  []want
	}{
		{"known user", envoycheck.Request{Path: "/orders", Headers: map[string]string{"x-user-id": "alice"}, RemoteAddr: ip},
			"api", []want{{entries: e("generic_key", "api", "user_id", "alice"), perMinute: 20}, ceiling}},
		{"internal user is unlimited", envoycheck.Request{Path: "/orders?page=2", Headers: map[string]string{"x-user-id": "internal-batch"}, RemoteAddr: ip},
			"api", []want{{entries: e("generic_key", "api", "user_id", "internal-batch"), unlimited: true}, ceiling}},
		{"trial user by wildcard", envoycheck.Request{Method: "POST", Path: "/orders", Headers: map[string]string{"x-user-id": "trial-42"}, RemoteAddr: ip},
			"api", []want{{entries: e("generic_key", "api", "user_id", "trial-42"), perMinute: 5}, ceiling}},
		{"anonymous caller", envoycheck.Request{Path: "/", RemoteAddr: ip},
			"api", []want{{entries: e("generic_key", "api", "anonymous", "true", "remote_address", ip), perMinute: 10}, ceiling}},
		{"login", envoycheck.Request{Method: "POST", Path: "/login", RemoteAddr: ip},
			"login", []want{{entries: e("generic_key", "login", "remote_address", ip), perMinute: 5}, ceiling}},
		{"login subpath, with a user", envoycheck.Request{Method: "POST", Path: "/login/otp", Headers: map[string]string{"x-user-id": "alice"}, RemoteAddr: ip},
			"login", []want{{entries: e("generic_key", "login", "remote_address", ip), perMinute: 5}, ceiling}},
		{"a path that only starts like login", envoycheck.Request{Path: "/loginpage", RemoteAddr: ip},
			"api", []want{{entries: e("generic_key", "api", "anonymous", "true", "remote_address", ip), perMinute: 10}, ceiling}},
	}

	b := bootstrap(t)
	var hcms []*hcmv3.HttpConnectionManager
	envoycheck.Walk(b, func(h *hcmv3.HttpConnectionManager) { hcms = append(hcms, h) })
	if len(hcms) != 1 || hcms[0].GetRouteConfig() == nil {
		t.Fatalf("want one HTTP connection manager with an inline route_config")
	}
	rc := hcms[0].GetRouteConfig()
	domain := descriptorDomain(t)
	cfg := loadDescriptors(t)
	reached := map[*descriptors.Rule]bool{}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, route, err := envoycheck.SelectRoute(rc, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if route.GetName() != tc.route {
				t.Fatalf("route %q, want %q", route.GetName(), tc.route)
			}
			got, err := envoycheck.Descriptors(route.GetRoute().GetRateLimits(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("descriptors %v, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !slices.Equal(got[i], w.entries) {
					t.Errorf("descriptor %d = %v, want %v", i, got[i], w.entries)
					continue
				}
				entries := make([]descriptors.Entry, len(got[i]))
				for j, en := range got[i] {
					entries[j] = descriptors.Entry{Key: en.Key, Value: en.Value}
				}
				m, ok := cfg.Match(domain, entries)
				if !ok {
					t.Errorf("descriptor %v matches no rule of %s", got[i], descriptorFile)
					continue
				}
				reached[m.Rule] = true
				checkRule(t, got[i], m, w)
			}
		})
	}
	for _, r := range cfg.Rules(domain) {
		if !reached[r] {
			t.Errorf("rule %s (%v) is reached by no sample request", r.Path, r.Descriptor)
		}
	}
}

func checkRule(t *testing.T, d []envoycheck.Entry, m descriptors.Match, w want) {
	t.Helper()
	r := m.Rule
	if r.Unlimited != w.unlimited || r.ShadowMode != w.shadow {
		t.Errorf("%v: unlimited=%v shadow_mode=%v, want %v %v", d, r.Unlimited, r.ShadowMode, w.unlimited, w.shadow)
	}
	if w.unlimited {
		return
	}
	if len(r.Limits) != 1 {
		t.Errorf("%v: %d limits, want 1", d, len(r.Limits))
		return
	}
	l := r.Limits[0]
	if l.Algorithm != engine.FixedWindow {
		t.Errorf("%v: algorithm %v, want fixed_window (the default for Envoy descriptors)", d, l.Algorithm)
	}
	if l.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE || l.RequestsPerUnit != w.perMinute || l.WindowMS != 60_000 {
		t.Errorf("%v: %d per %v (window %d ms), want %d per minute", d, l.RequestsPerUnit, l.Unit, l.WindowMS, w.perMinute)
	}
	// Each distinct value has its own counter (no share_threshold in the example).
	if len(m.Entries) != len(d) {
		t.Errorf("%v: counter entries %v", d, m.Entries)
	}
	for i := range m.Entries {
		if m.Entries[i].Key != d[i].Key || m.Entries[i].Value != d[i].Value {
			t.Errorf("%v: counter entries %v", d, m.Entries)
		}
	}
}
