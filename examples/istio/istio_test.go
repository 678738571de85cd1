// Tests of the Istio example: every EnvoyFilter patch value is valid Envoy v3
// configuration of the type it patches, broken copies are caught, the objects refer to
// each other correctly, and the descriptors the route patches produce select the intended
// rules of the leash-ratelimit ConfigMap through Leash's own descriptor loader.
package istio_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/config"
	"github.com/leashd/leash/testkit/envoycheck"
)

// object is one Kubernetes object of the example.
type object struct {
	file string
	doc  map[string]any
}

func (o object) kind() string { s, _ := o.doc["kind"].(string); return s }

func (o object) meta(key string) string {
	s, _ := get(o.doc, "metadata", key).(string)
	return s
}

func (o object) String() string {
	return fmt.Sprintf("%s %s/%s (%s)", o.kind(), o.meta("namespace"), o.meta("name"), o.file)
}

func get(v any, path ...any) any {
	out, _ := envoycheck.Get(v, path...)
	return out
}

func objects(t *testing.T) []object {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no YAML files: %v", err)
	}
	var out []object
	for _, f := range files {
		docs, err := envoycheck.ReadYAML(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, d := range docs {
			m, ok := d.(map[string]any)
			if !ok || m["kind"] == nil || m["apiVersion"] == nil {
				t.Fatalf("%s: document %d is not a Kubernetes object", f, i)
			}
			out = append(out, object{f, m})
		}
	}
	return out
}

func find(t *testing.T, objs []object, kind, namespace, name string) object {
	t.Helper()
	for _, o := range objs {
		if o.kind() == kind && o.meta("namespace") == namespace && o.meta("name") == name {
			return o
		}
	}
	t.Fatalf("no %s %s/%s in the example", kind, namespace, name)
	return object{}
}

func ofKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// patchTypes is the Envoy type each EnvoyFilter applyTo patches.
var patchTypes = map[string]func() proto.Message{
	"LISTENER":            func() proto.Message { return &listenerv3.Listener{} },
	"FILTER_CHAIN":        func() proto.Message { return &listenerv3.FilterChain{} },
	"NETWORK_FILTER":      func() proto.Message { return &listenerv3.Filter{} },
	"HTTP_FILTER":         func() proto.Message { return &hcmv3.HttpFilter{} },
	"ROUTE_CONFIGURATION": func() proto.Message { return &routev3.RouteConfiguration{} },
	"VIRTUAL_HOST":        func() proto.Message { return &routev3.VirtualHost{} },
	"HTTP_ROUTE":          func() proto.Message { return &routev3.Route{} },
	"CLUSTER":             func() proto.Message { return &clusterv3.Cluster{} },
	"EXTENSION_CONFIG":    func() proto.Message { return &corev3.TypedExtensionConfig{} },
}

// mergeBases are minimal valid objects like those Istio generates; a MERGE patch is
// merged into one (proto merge, as Istio does) and the result validated, since a partial
// value alone lacks the required fields of the object it patches.
var mergeBases = map[string]func() proto.Message{
	"HTTP_ROUTE": func() proto.Message {
		return &routev3.Route{
			Name:  "base",
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "outbound|80||echo.demo.svc.cluster.local"},
			}},
		}
	},
	"VIRTUAL_HOST":        func() proto.Message { return &routev3.VirtualHost{Name: "base:80", Domains: []string{"*"}} },
	"ROUTE_CONFIGURATION": func() proto.Message { return &routev3.RouteConfiguration{Name: "http.8080"} },
	"CLUSTER":             func() proto.Message { return &clusterv3.Cluster{Name: "outbound|80||base.default.svc.cluster.local"} },
	"HTTP_FILTER":         func() proto.Message { return &hcmv3.HttpFilter{Name: "base"} },
	"NETWORK_FILTER":      func() proto.Message { return &listenerv3.Filter{Name: "base"} },
}

// checkPatch reads one configPatches entry's value as the type it patches and validates it.
func checkPatch(patch any) (proto.Message, error) {
	applyTo, _ := get(patch, "applyTo").(string)
	op, _ := get(patch, "patch", "operation").(string)
	newMsg, ok := patchTypes[applyTo]
	if !ok {
		return nil, fmt.Errorf("applyTo %q: unknown", applyTo)
	}
	if op == "REMOVE" {
		return nil, nil
	}
	value := get(patch, "patch", "value")
	if value == nil {
		return nil, fmt.Errorf("%s %s: no patch.value", applyTo, op)
	}
	msg := newMsg()
	if err := envoycheck.Unmarshal(value, msg); err != nil {
		return nil, fmt.Errorf("%s %s: %w", applyTo, op, err)
	}
	switch op {
	case "MERGE":
		newBase, ok := mergeBases[applyTo]
		if !ok {
			return nil, fmt.Errorf("MERGE into %s: no base object to merge into", applyTo)
		}
		base := newBase()
		proto.Merge(base, msg)
		msg = base
	case "ADD", "INSERT_BEFORE", "INSERT_AFTER", "INSERT_FIRST", "REPLACE":
	default:
		return nil, fmt.Errorf("%s: unknown operation %q", applyTo, op)
	}
	if err := envoycheck.Validate(msg); err != nil {
		return nil, fmt.Errorf("%s %s: %w", applyTo, op, err)
	}
	return msg, nil
}

// checkEnvoyFilter validates every patch of one EnvoyFilter and returns the patched values.
func checkEnvoyFilter(doc any) ([]proto.Message, error) {
	if v := get(doc, "apiVersion"); v != "networking.istio.io/v1alpha3" {
		return nil, fmt.Errorf("apiVersion %v: EnvoyFilter is served as networking.istio.io/v1alpha3", v)
	}
	patches, _ := get(doc, "spec", "configPatches").([]any)
	if len(patches) == 0 {
		return nil, fmt.Errorf("no configPatches")
	}
	var out []proto.Message
	for i, p := range patches {
		m, err := checkPatch(p)
		if err != nil {
			return nil, fmt.Errorf("configPatches[%d]: %w", i, err)
		}
		out = append(out, m)
	}
	return out, nil
}

func TestEnvoyFilterPatchesValid(t *testing.T) {
	efs := ofKind(objects(t), "EnvoyFilter")
	if len(efs) < 2 {
		t.Fatalf("want the filter and the route EnvoyFilters, found %d", len(efs))
	}
	for _, ef := range efs {
		if _, err := checkEnvoyFilter(ef.doc); err != nil {
			t.Errorf("%s: %v", ef, err)
		}
	}
}

// TestBrokenPatchesFail proves the patch validation can fail.
func TestBrokenPatchesFail(t *testing.T) {
	objs := objects(t)
	filter := find(t, objs, "EnvoyFilter", "istio-system", "leash-ratelimit-filter")
	routes := find(t, objs, "EnvoyFilter", "istio-system", "leash-ratelimit-routes")
	rl := []any{"spec", "configPatches", 0, "patch", "value", "typed_config"}
	route := []any{"spec", "configPatches", 1, "patch", "value", "route"}
	at := func(base []any, more ...any) []any { return append(slices.Clone(base), more...) }

	cases := []struct {
		name   string
		obj    object
		break_ func(doc any) error
		want   string
	}{
		{"empty domain", filter, func(d any) error { return envoycheck.Set(d, "", at(rl, "domain")...) }, "Domain"},
		{"no rate-limit cluster", filter, func(d any) error {
			return envoycheck.Delete(d, at(rl, "rate_limit_service", "grpc_service", "envoy_grpc", "cluster_name")...)
		}, "ClusterName"},
		{"wrong enum", filter, func(d any) error {
			return envoycheck.Set(d, "V4", at(rl, "rate_limit_service", "transport_api_version")...)
		}, "invalid value for enum"},
		{"filter without name", filter, func(d any) error {
			return envoycheck.Delete(d, "spec", "configPatches", 0, "patch", "value", "name")
		}, "Name: value length must be at least 1"},
		{"misspelt field in a route patch", routes, func(d any) error {
			return envoycheck.Set(d, get(d, at(route, "rate_limits")...), at(route, "rate_limit")...)
		}, "unknown field"},
		{"action without header name", routes, func(d any) error {
			return envoycheck.Set(d, "", at(route, "rate_limits", 0, "actions", 1, "request_headers", "header_name")...)
		}, "HeaderName"},
		{"empty actions", routes, func(d any) error { return envoycheck.Set(d, []any{}, at(route, "rate_limits", 1, "actions")...) }, "Actions"},
		{"deprecated field", routes, func(d any) error { return envoycheck.Set(d, true, at(route, "include_vh_rate_limits")...) }, "deprecated"},
		{"unknown applyTo", routes, func(d any) error { return envoycheck.Set(d, "HTTP_ROUTES", "spec", "configPatches", 0, "applyTo") }, "unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := envoycheck.Clone(tc.obj.doc)
			if err := tc.break_(doc); err != nil {
				t.Fatalf("cannot break the copy: %v", err)
			}
			_, err := checkEnvoyFilter(doc)
			if err == nil {
				t.Fatal("broken copy passed validation")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
			t.Logf("rejected as expected: %v", err)
		})
	}
}

// example gathers what the other tests need from the objects.
type example struct {
	objs       []object
	rateLimit  *ratelimitv3.RateLimit
	routes     map[string][]*routev3.RateLimit // Envoy route name → rate_limits
	vhosts     []string                        // vhost names the route patches match
	domain     string                          // of the descriptor ConfigMap
	descriptor string                          // the descriptor file's text
}

func load(t *testing.T) example {
	t.Helper()
	ex := example{objs: objects(t), routes: map[string][]*routev3.RateLimit{}}
	for _, ef := range ofKind(ex.objs, "EnvoyFilter") {
		msgs, err := checkEnvoyFilter(ef.doc)
		if err != nil {
			t.Fatalf("%s: %v", ef, err)
		}
		patches := get(ef.doc, "spec", "configPatches").([]any)
		for i, m := range msgs {
			envoycheck.Walk(m, func(rl *ratelimitv3.RateLimit) {
				if ex.rateLimit != nil {
					t.Fatalf("more than one ratelimit filter")
				}
				ex.rateLimit = rl
			})
			if r, ok := m.(*routev3.Route); ok {
				name, _ := get(patches[i], "match", "routeConfiguration", "vhost", "route", "name").(string)
				vhost, _ := get(patches[i], "match", "routeConfiguration", "vhost", "name").(string)
				if name == "" || vhost == "" {
					t.Fatalf("%s: configPatches[%d] must match a virtual host and route by name", ef, i)
				}
				ex.routes[name] = r.GetRoute().GetRateLimits()
				ex.vhosts = append(ex.vhosts, vhost)
			}
		}
	}
	if ex.rateLimit == nil {
		t.Fatal("no ratelimit filter in any EnvoyFilter")
	}
	cm := find(t, ex.objs, "ConfigMap", "leash", "leash-ratelimit")
	ex.descriptor, _ = get(cm.doc, "data", "config.yaml").(string)
	docs, err := envoycheck.ParseYAML([]byte(ex.descriptor))
	if err != nil || len(docs) != 1 {
		t.Fatalf("%s: data.config.yaml: %v", cm, err)
	}
	ex.domain, _ = get(docs[0], "domain").(string)
	return ex
}

func loadDescriptors(t *testing.T, ex example) *descriptors.Config {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(ex.descriptor), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := descriptors.Load(dir)
	if err != nil {
		t.Fatalf("leash-ratelimit ConfigMap: %v", err)
	}
	return cfg
}

// TestWiring checks that the objects refer to each other correctly.
func TestWiring(t *testing.T) {
	ex := load(t)

	if ex.rateLimit.GetDomain() != ex.domain {
		t.Errorf("ratelimit filter domain %q, descriptor ConfigMap domain %q", ex.rateLimit.GetDomain(), ex.domain)
	}
	if got := loadDescriptors(t, ex).Domains(); !slices.Equal(got, []string{ex.domain}) {
		t.Errorf("Leash loads domains %v, want [%s]", got, ex.domain)
	}
	if ex.rateLimit.GetRateLimitService().GetTransportApiVersion() != corev3.ApiVersion_V3 {
		t.Errorf("rate_limit_service.transport_api_version is not V3")
	}

	// The filter's cluster is the one Istio builds for the leash Service's gRPC port.
	svc := find(t, ex.objs, "Service", "leash", "leash")
	var grpcPort int
	for _, p := range get(svc.doc, "spec", "ports").([]any) {
		name, _ := get(p, "name").(string)
		if get(p, "appProtocol") == "grpc" || name == "grpc" || strings.HasPrefix(name, "grpc-") {
			grpcPort, _ = get(p, "port").(int)
		}
	}
	if grpcPort == 0 {
		t.Fatalf("%s: no gRPC port (appProtocol: grpc or a name starting with grpc)", svc)
	}
	fqdn := fmt.Sprintf("%s.%s.svc.cluster.local", svc.meta("name"), svc.meta("namespace"))
	wantCluster := fmt.Sprintf("outbound|%d||%s", grpcPort, fqdn)
	eg := ex.rateLimit.GetRateLimitService().GetGrpcService().GetEnvoyGrpc()
	if eg.GetClusterName() != wantCluster {
		t.Errorf("rate_limit_service cluster %q, want %q", eg.GetClusterName(), wantCluster)
	}
	if a := eg.GetAuthority(); a != "" && a != fqdn {
		t.Errorf("authority %q, want the Service's name %q", a, fqdn)
	}

	// Leash's config loads, maps the domain to an account and reads the descriptor
	// ConfigMap where the Deployment mounts it.
	cfgMap := find(t, ex.objs, "ConfigMap", "leash", "leash-config")
	leashYAML, _ := get(cfgMap.doc, "data", "leash.yaml").(string)
	file := filepath.Join(t.TempDir(), "leash.yaml")
	if err := os.WriteFile(file, []byte(leashYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load([]string{file}, nil)
	if err != nil {
		t.Fatalf("%s data.leash.yaml: %v", cfgMap, err)
	}
	account := cfg.Envoy.DefaultAccount
	if d, ok := cfg.Envoy.Domains[ex.domain]; ok {
		account = d.Account
	}
	if !slices.ContainsFunc(cfg.Accounts, func(a config.Account) bool { return a.ID == account }) {
		t.Errorf("domain %q maps to account %q, which the Leash config does not define", ex.domain, account)
	}
	if cfg.Store.Backend == "memory" {
		dep := find(t, ex.objs, "Deployment", "leash", "leash")
		if r, _ := get(dep.doc, "spec", "replicas").(int); r != 1 {
			t.Errorf("memory store with %d replicas: counters would be per pod", r)
		}
	}

	dep := find(t, ex.objs, "Deployment", "leash", "leash")
	mounts := map[string]string{} // mountPath → ConfigMap name
	volumes := map[string]string{}
	for _, v := range get(dep.doc, "spec", "template", "spec", "volumes").([]any) {
		if cm, ok := get(v, "configMap", "name").(string); ok {
			volumes[get(v, "name").(string)] = cm
		}
	}
	for _, vm := range get(dep.doc, "spec", "template", "spec", "containers", 0, "volumeMounts").([]any) {
		mounts[get(vm, "mountPath").(string)] = volumes[get(vm, "name").(string)]
	}
	for _, p := range cfg.Envoy.ConfigPaths {
		if mounts[p] != "leash-ratelimit" {
			t.Errorf("envoy.config_paths has %s, where the Deployment mounts %q", p, mounts[p])
		}
	}
	args := get(dep.doc, "spec", "template", "spec", "containers", 0, "args").([]any)
	i := slices.Index(args, any("--config"))
	if i < 0 || i+1 >= len(args) || mounts[filepath.Dir(args[i+1].(string))] != "leash-config" ||
		filepath.Base(args[i+1].(string)) != "leash.yaml" {
		t.Errorf("args %v: --config must name leash.yaml in the mounted leash-config ConfigMap", args)
	}

	// The route patches match virtual hosts and routes that app.yaml creates.
	vs := find(t, ex.objs, "VirtualService", "demo", "api")
	gw := find(t, ex.objs, "Gateway", "demo", "api")
	var vhostNames []string
	for _, s := range get(gw.doc, "spec", "servers").([]any) {
		port, _ := get(s, "port", "number").(int)
		for _, h := range get(vs.doc, "spec", "hosts").([]any) {
			vhostNames = append(vhostNames, fmt.Sprintf("%s:%d", h, port))
		}
	}
	for _, v := range ex.vhosts {
		if !slices.Contains(vhostNames, v) {
			t.Errorf("route patch matches virtual host %q; the Gateway and VirtualService make %v", v, vhostNames)
		}
	}
	var routeNames []string
	for _, r := range get(vs.doc, "spec", "http").([]any) {
		n, _ := get(r, "name").(string)
		routeNames = append(routeNames, n)
	}
	for name := range ex.routes {
		if !slices.Contains(routeNames, name) {
			t.Errorf("route patch matches route %q; the VirtualService names %v", name, routeNames)
		}
	}
}

type want struct {
	entries   []envoycheck.Entry
	perMinute int64
	unlimited bool
}

var e = envoycheck.Entries

// TestRouteDescriptorsMatchRules computes the descriptors the patched routes send for
// sample requests and checks each selects the intended rule, and that every rule is used.
func TestRouteDescriptorsMatchRules(t *testing.T) {
	const ip = "198.51.100.20"
	cases := []struct {
		name  string
		route string
		req   envoycheck.Request
		want  []want
	}{
		{"login", "login", envoycheck.Request{Method: "POST", Path: "/login", RemoteAddr: ip},
			[]want{{entries: e("generic_key", "login", "remote_address", ip), perMinute: 5}}},
		{"user", "api", envoycheck.Request{Path: "/orders", Headers: map[string]string{"x-user-id": "alice"}, RemoteAddr: ip},
			[]want{{entries: e("generic_key", "api", "user_id", "alice"), perMinute: 60},
				{entries: e("generic_key", "api", "remote_address", ip), perMinute: 100}}},
		{"in-house service", "api", envoycheck.Request{Path: "/orders", Headers: map[string]string{"x-user-id": "svc-billing"}, RemoteAddr: ip},
			[]want{{entries: e("generic_key", "api", "user_id", "svc-billing"), unlimited: true},
				{entries: e("generic_key", "api", "remote_address", ip), perMinute: 100}}},
		{"anonymous", "api", envoycheck.Request{Path: "/", RemoteAddr: ip},
			[]want{{entries: e("generic_key", "api", "remote_address", ip), perMinute: 100}}},
	}
	ex := load(t)
	cfg := loadDescriptors(t, ex)
	reached := map[*descriptors.Rule]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			limits, ok := ex.routes[tc.route]
			if !ok {
				t.Fatalf("no route patch for %q", tc.route)
			}
			got, err := envoycheck.Descriptors(limits, tc.req)
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
				m, ok := cfg.Match(ex.domain, entries)
				if !ok {
					t.Errorf("descriptor %v matches no rule", got[i])
					continue
				}
				reached[m.Rule] = true
				r := m.Rule
				if r.Unlimited != w.unlimited {
					t.Errorf("%v: unlimited = %v, want %v", got[i], r.Unlimited, w.unlimited)
				}
				if w.unlimited {
					continue
				}
				if len(r.Limits) != 1 || r.Limits[0].Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE ||
					r.Limits[0].RequestsPerUnit != w.perMinute {
					t.Errorf("%v: limits %+v, want %d per minute", got[i], r.Limits, w.perMinute)
				}
			}
		})
	}
	for _, r := range cfg.Rules(ex.domain) {
		if !reached[r] {
			t.Errorf("rule %s (%v) is reached by no sample request", r.Path, r.Descriptor)
		}
	}
}
