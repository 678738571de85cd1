package peerenv_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leashd/leash/cmd/leash/peerenv"
	"github.com/leashd/leash/config"
	"github.com/leashd/leash/testkit"
)

// peerVariables are the variables of envoyproxy/ratelimit's src/settings/settings.go
// (commit f2fb15770f7fd1c88ca6c3a1b58ee513917ace96), in its order.
var peerVariables = strings.Fields(`HOST PORT DEBUG_HOST DEBUG_PORT GRPC_UDS GRPC_HOST GRPC_PORT
GRPC_MAX_CONNECTION_AGE GRPC_MAX_CONNECTION_AGE_GRACE GRPC_SERVER_USE_TLS GRPC_SERVER_TLS_CERT
GRPC_SERVER_TLS_KEY GRPC_CLIENT_TLS_CACERT GRPC_CLIENT_TLS_SAN LOG_LEVEL LOG_FORMAT CONFIG_TYPE
FORCE_START_WITHOUT_INITIAL_CONFIG CONFIG_GRPC_XDS_NODE_ID CONFIG_GRPC_XDS_NODE_METADATA
CONFIG_GRPC_XDS_SERVER_URL CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL
CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS CONFIG_GRPC_XDS_SERVER_USE_TLS CONFIG_GRPC_XDS_CLIENT_TLS_CERT
CONFIG_GRPC_XDS_CLIENT_TLS_KEY CONFIG_GRPC_XDS_SERVER_TLS_CACERT CONFIG_GRPC_XDS_SERVER_TLS_SAN
XDS_CLIENT_BACKOFF_INITIAL_INTERVAL XDS_CLIENT_BACKOFF_MAX_INTERVAL XDS_CLIENT_BACKOFF_RANDOM_FACTOR
XDS_CLIENT_BACKOFF_JITTER XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES USE_DOG_STATSD USE_DOG_STATSD_MOGRIFIERS
USE_STATSD STATSD_HOST STATSD_PORT EXTRA_TAGS STATS_FLUSH_INTERVAL DISABLE_STATS USE_PROMETHEUS
PROMETHEUS_ADDR PROMETHEUS_PATH PROMETHEUS_MAPPER_YAML PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS
RUNTIME_ROOT RUNTIME_SUBDIRECTORY RUNTIME_APPDIRECTORY RUNTIME_IGNOREDOTFILES RUNTIME_WATCH_ROOT
EXPIRATION_JITTER_MAX_SECONDS LOCAL_CACHE_SIZE_IN_BYTES NEAR_LIMIT_RATIO CACHE_KEY_PREFIX BACKEND_TYPE
STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT LIMIT_RESPONSE_HEADERS_ENABLED LIMIT_LIMIT_HEADER
LIMIT_REMAINING_HEADER LIMIT_RESET_HEADER HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED REDIS_SOCKET_TYPE
REDIS_TYPE REDIS_URL REDIS_POOL_SIZE REDIS_AUTH REDIS_TLS REDIS_TLS_CLIENT_CERT REDIS_TLS_CLIENT_KEY
REDIS_TLS_CACERT REDIS_TLS_SKIP_HOSTNAME_VERIFICATION REDIS_PIPELINE_WINDOW REDIS_PIPELINE_LIMIT
REDIS_CLUSTER_PIPELINE_PARALLELISM REDIS_PERSECOND REDIS_PERSECOND_SOCKET_TYPE REDIS_PERSECOND_TYPE
REDIS_PERSECOND_URL REDIS_PERSECOND_POOL_SIZE REDIS_PERSECOND_AUTH REDIS_PERSECOND_TLS REDIS_SENTINEL_AUTH
REDIS_PERSECOND_SENTINEL_AUTH REDIS_PERSECOND_PIPELINE_WINDOW REDIS_PERSECOND_PIPELINE_LIMIT
REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM REDIS_HEALTH_CHECK_ACTIVE_CONNECTION REDIS_TIMEOUT
REDIS_PERSECOND_TIMEOUT REDIS_POOL_ON_EMPTY_BEHAVIOR REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR
REDIS_STARTUP_INITIAL_INTERVAL REDIS_STARTUP_MAX_INTERVAL REDIS_STARTUP_MAX_ELAPSED_TIME
MEMCACHE_HOST_PORT MEMCACHE_MAX_IDLE_CONNS MEMCACHE_SRV MEMCACHE_SRV_REFRESH MEMCACHE_TLS
MEMCACHE_TLS_CLIENT_CERT MEMCACHE_TLS_CLIENT_KEY MEMCACHE_TLS_CACERT MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION
SHADOW_MODE QUOTA_MODE RESPONSE_DYNAMIC_METADATA MERGE_DOMAIN_CONFIG TRACING_ENABLED TRACING_SERVICE_NAME
TRACING_SERVICE_NAMESPACE TRACING_SERVICE_INSTANCE_ID TRACING_EXPORTER_PROTOCOL TRACING_SAMPLING_RATE`)

// gatewayEnv is what Envoy Gateway's ratelimit Deployment sets, with a Redis backend,
// Prometheus on and tracing configured (envoyproxy/gateway
// internal/infrastructure/kubernetes/ratelimit/resource.go, expectedRateLimitContainerEnv,
// commit d32f28294245e454d20f81d323d626a90e660c1e).
var gatewayEnv = map[string]string{
	"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_IGNOREDOTFILES": "true",
	"RUNTIME_WATCH_ROOT": "false", "LOG_LEVEL": "info", "USE_STATSD": "false", "CONFIG_TYPE": "GRPC_XDS_SOTW",
	"CONFIG_GRPC_XDS_SERVER_URL": "envoy-gateway:18001", "CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit",
	"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/certs/tls.crt", "GRPC_SERVER_TLS_KEY": "/certs/tls.key",
	"GRPC_SERVER_TLS_CA_CERT": "/certs/ca.crt", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true",
	"CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/certs/tls.crt", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/certs/tls.key",
	"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/certs/ca.crt", "FORCE_START_WITHOUT_INITIAL_CONFIG": "true",
	"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis.redis-system.svc.cluster.local:6379",
	"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": ":19001", "PROMETHEUS_MAPPER_YAML": "/etc/statsd-exporter/conf.yaml",
	"TRACING_ENABLED": "true", "TRACING_SERVICE_NAME": "envoy-ratelimit", "TRACING_SERVICE_NAMESPACE": "envoy-gateway-system",
	"TRACING_SERVICE_INSTANCE_ID": "envoy-ratelimit-5b9f7c-x2x", "TRACING_SAMPLING_RATE": "0.5",
	"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.monitoring:4318",
}

func environ(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func TestGatewayEnvironment(t *testing.T) {
	pe, err := peerenv.Environ(environ(gatewayEnv))
	if err != nil {
		t.Fatal(err)
	}
	warnings := pe.Warnings
	cfg, err := config.Load(nil, pe.Environ)
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Envoy
	checks := []struct {
		what      string
		got, want any
	}{
		{"grpc.addr", cfg.GRPC.Addr, "0.0.0.0:8081"},
		{"grpc.tls.cert_file", cfg.GRPC.TLS.CertFile, "/certs/tls.crt"},
		{"grpc.tls.key_file", cfg.GRPC.TLS.KeyFile, "/certs/tls.key"},
		{"grpc.tls.client_ca_file", cfg.GRPC.TLS.ClientCAFile, ""},
		{"envoy.json_addr", e.JSONAddr, "0.0.0.0:8080"},
		{"admin.addr", cfg.Admin.Addr, ":19001"},
		{"http.addr", cfg.HTTP.Addr, peerenv.HTTPAddr},
		{"envoy.xds.address", e.XDS.Address, "envoy-gateway:18001"},
		{"envoy.xds.node_id", e.XDS.NodeID, "envoy-ratelimit"},
		{"envoy.xds.tls.ca_file", e.XDS.TLS.CAFile, "/certs/ca.crt"},
		{"envoy.xds.tls.cert_file", e.XDS.TLS.CertFile, "/certs/tls.crt"},
		{"envoy.xds.tls.key_file", e.XDS.TLS.KeyFile, "/certs/tls.key"},
		{"envoy.config_paths", len(e.ConfigPaths), 0},
		{"envoy.default_account", e.DefaultAccount, config.DevAccountID},
		{"envoy.overdraft", e.Overdraft, true},
		{"envoy.response_headers", e.ResponseHeaders, false},
		{"envoy.response_dynamic_metadata", e.ResponseDynamicMetadata, false},
		{"store.backend", cfg.Store.Backend, "redis"},
		{"store.redis.url", cfg.Store.Redis.URL, "redis://redis.redis-system.svc.cluster.local:6379"},
		{"log.level", cfg.Log.Level, "info"},
		{"tracing.exporter", cfg.Tracing.Exporter, "otlp_http"},
		{"tracing.endpoint", cfg.Tracing.Endpoint, "http://otel-collector.monitoring:4318"},
		{"tracing.insecure", cfg.Tracing.Insecure, true},
		{"tracing.service_name", cfg.Tracing.ServiceName, "envoy-ratelimit"},
		{"tracing.sampling_ratio", cfg.Tracing.SamplingRatio, 0.5},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	want := []string{"GRPC_SERVER_TLS_CA_CERT", "TRACING_SERVICE_NAMESPACE", "TRACING_SERVICE_INSTANCE_ID"}
	if len(warnings) != len(want) {
		t.Errorf("warnings %q, want one for each of %v", warnings, want)
	}
	for _, w := range want {
		if !slices.ContainsFunc(warnings, func(s string) bool { return strings.HasPrefix(s, w+"=") }) {
			t.Errorf("no warning for %s in %q", w, warnings)
		}
	}
}

func TestDefaultsAndFiles(t *testing.T) {
	res, err := peerenv.Translate(map[string]string{"REDIS_URL": "127.0.0.1:6379", "RUNTIME_ROOT": "/srv/rt",
		"RUNTIME_SUBDIRECTORY": "ratelimit", "REDIS_AUTH": "user:secret", "REDIS_TLS": "true",
		"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true", "LIMIT_RESPONSE_HEADERS_ENABLED": "true",
		"LOCAL_CACHE_SIZE_IN_BYTES": "1048576", "CACHE_KEY_PREFIX": "rl", "REDIS_TIMEOUT": "2s"})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"envoy.config_paths": "/srv/rt/ratelimit/config", "admin.addr": "0.0.0.0:6070", "grpc.addr": "0.0.0.0:8081",
		"store.redis.url": "rediss://127.0.0.1:6379", "store.redis.username": "user", "store.redis.password": "secret",
		"envoy.overdraft": "false", "envoy.response_headers": "true", "envoy.local_cache.max_entries": "8192",
		"store.redis.prefix": "rl", "store.redis.read_timeout": "2s",
	} {
		if res.Keys[k] != v {
			t.Errorf("%s = %q, want %q", k, res.Keys[k], v)
		}
	}
	if _, ok := res.Keys["envoy.xds.address"]; ok {
		t.Error("CONFIG_TYPE FILE sets envoy.xds.address")
	}
	// Envoy Gateway's Redis TLS with a client certificate (redis-tls-settings).
	res, err = peerenv.Translate(map[string]string{"REDIS_URL": "redis:6379", "REDIS_TLS": "true",
		"REDIS_TLS_CLIENT_CERT": "/redis-certs/tls.crt", "REDIS_TLS_CLIENT_KEY": "/redis-certs/tls.key"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Keys["store.redis.url"] != "rediss://redis:6379" || res.Keys["store.redis.tls.cert_file"] != "/redis-certs/tls.crt" ||
		res.Keys["store.redis.tls.key_file"] != "/redis-certs/tls.key" {
		t.Errorf("redis TLS: %v", res.Keys)
	}
	// Cluster over TLS needs the nodes' CA.
	if _, err := peerenv.Translate(map[string]string{"REDIS_TYPE": "CLUSTER", "REDIS_URL": "a:1", "REDIS_TLS": "true"}); err == nil ||
		!strings.Contains(err.Error(), "REDIS_TLS_CACERT") {
		t.Errorf("cluster TLS without a CA: %v", err)
	}
	res, err = peerenv.Translate(map[string]string{"REDIS_TYPE": "CLUSTER", "REDIS_URL": "a:1", "REDIS_TLS": "true", "REDIS_TLS_CACERT": "/ca.pem"})
	if err != nil || res.Keys["store.redis.tls.ca_file"] != "/ca.pem" {
		t.Errorf("cluster TLS: %v %v", res.Keys, err)
	}
	// Cluster and sentinel.
	res, _ = peerenv.Translate(map[string]string{"REDIS_TYPE": "cluster", "REDIS_URL": "a:1,b:2"})
	if res.Keys["store.redis.cluster_addrs"] != "a:1,b:2" {
		t.Errorf("cluster: %v", res.Keys)
	}
	res, _ = peerenv.Translate(map[string]string{"REDIS_TYPE": "SENTINEL", "REDIS_URL": "mymaster,a:1,b:2"})
	if res.Keys["store.redis.sentinel.master"] != "mymaster" || res.Keys["store.redis.sentinel.addrs"] != "a:1,b:2" {
		t.Errorf("sentinel: %v", res.Keys)
	}
	// A LEASH_ variable wins over the peer's.
	pe, err := peerenv.Environ([]string{"REDIS_URL=127.0.0.1:1", "GRPC_PORT=9", "LEASH_GRPC_ADDR=127.0.0.1:7",
		"LEASH_CONFIG=/etc/leash/a.yaml, /etc/leash/b.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pe.Environ, "LEASH_GRPC_ADDR=127.0.0.1:7") || slices.Contains(pe.Environ, "LEASH_GRPC_ADDR=0.0.0.0:9") {
		t.Errorf("environ %q", pe.Environ)
	}
	// LEASH_CONFIG names configuration files, and leaves the environment.
	if !slices.Equal(pe.ConfigFiles, []string{"/etc/leash/a.yaml", "/etc/leash/b.yaml"}) ||
		slices.ContainsFunc(pe.Environ, func(kv string) bool { return strings.HasPrefix(kv, "LEASH_CONFIG=") }) {
		t.Errorf("config files %q, environ %q", pe.ConfigFiles, pe.Environ)
	}
	// LEASH_STORE_BACKEND leaves the store to Leash.
	if _, err := peerenv.Translate(map[string]string{"LEASH_STORE_BACKEND": "memory"}); err != nil {
		t.Errorf("memory store: %v", err)
	}
}

// TestRefusedAndIgnored: a value Leash cannot honour stops start-up, naming the variable
// and what to use instead; an ignored one is a warning.
func TestRefusedAndIgnored(t *testing.T) {
	base := map[string]string{"REDIS_URL": "127.0.0.1:6379"}
	for name, value := range map[string]string{
		"USE_STATSD": "true", "REDIS_SOCKET_TYPE": "unix", "BACKEND_TYPE": "memcache", "CONFIG_TYPE": "GRPC_XDS_DELTA",
		"GRPC_UDS": "/tmp/rl.sock", "MERGE_DOMAIN_CONFIG": "true", "GRPC_CLIENT_TLS_SAN": "envoy", "REDIS_SENTINEL_AUTH": "x",
		"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION": "true", "PROMETHEUS_PATH": "/stats",
		"LOG_LEVEL": "loud", "SHADOW_MODE": "maybe",
	} {
		env := map[string]string{name: value, "REDIS_URL": base["REDIS_URL"], "USE_PROMETHEUS": "true"}
		_, err := peerenv.Translate(env)
		if err == nil || !strings.Contains(err.Error(), name+"=") {
			t.Errorf("%s=%s: error %v, want one naming it", name, value, err)
		}
	}
	if _, err := peerenv.Translate(map[string]string{}); err == nil || !strings.Contains(err.Error(), "REDIS_URL") {
		t.Errorf("no REDIS_URL: %v", err)
	}
	res, err := peerenv.Translate(map[string]string{"REDIS_URL": "h:1", "STATSD_PORT": "9125", "EXPIRATION_JITTER_MAX_SECONDS": "300",
		"GRPC_MAX_CONNECTION_AGE": "1h", "RUNTIME_IGNOREDOTFILES": "false", "PROMETHEUS_MAPPER_YAML": "/x.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"STATSD_PORT", "EXPIRATION_JITTER_MAX_SECONDS", "GRPC_MAX_CONNECTION_AGE", "RUNTIME_IGNOREDOTFILES"} {
		if !slices.ContainsFunc(res.Warnings, func(s string) bool { return strings.HasPrefix(s, w+"=") }) {
			t.Errorf("no warning for %s in %q", w, res.Warnings)
		}
	}
	if len(res.Warnings) != 4 {
		t.Errorf("warnings %q: PROMETHEUS_MAPPER_YAML is accepted silently", res.Warnings)
	}
}

// TestTableMatchesSpec: Settings names every variable of the peer once, and spec §9.17 and
// docs/envoy.md list the same rows, with the same use under the peer's environment.
func TestTableMatchesSpec(t *testing.T) {
	var names []string
	use := map[string]string{}
	for _, s := range peerenv.Settings {
		for _, n := range s.Names {
			names = append(names, n)
			use[n] = s.Use.String()
		}
	}
	extra := []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "GRPC_SERVER_TLS_CA_CERT"}
	if got, want := sorted(names), sorted(append(slices.Clone(peerVariables), extra...)); !slices.Equal(got, want) {
		t.Errorf("Settings names\n%v\nwant the peer's variables\n%v", got, want)
	}
	spec := testkit.TableRows(t, "../../../docs/spec.md", "### §9.17 ", "| the peer's variable |")
	doc := testkit.TableRows(t, "../../../docs/envoy.md", "## Migrating from envoyproxy/ratelimit", "| the peer's variable |")
	if !slices.Equal(spec, doc) {
		t.Error("the tables of docs/spec.md §9.17 and docs/envoy.md differ")
	}
	code := regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
	seen := 0
	for _, line := range spec {
		cells := strings.Split(line, "|")
		if len(cells) != 6 {
			t.Errorf("row %q: want 4 columns", line)
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			seen++
			if got := strings.TrimSpace(cells[4]); got != use[m[1]] {
				t.Errorf("%s: spec says %q under the peer's environment, Settings %q", m[1], got, use[m[1]])
			}
		}
	}
	if seen != len(names) {
		t.Errorf("spec §9.17 names %d variables, Settings %d", seen, len(names))
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
