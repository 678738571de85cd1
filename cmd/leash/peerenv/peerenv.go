// Package peerenv reads the environment variables envoyproxy/ratelimit (the peer) is
// configured by, so that Leash can run where the peer's image is expected: as the
// container Envoy Gateway starts with the command /bin/ratelimit (spec §9.18).
//
// Translate turns the peer's variables into Leash configuration keys; Environ adds them to
// a process environment as LEASH_ variables, so config.Load reads them like any other
// (a LEASH_ variable the environment already has wins, and configuration files still
// apply underneath). Settings is the one table of every peer variable and what Leash does
// with it: uses it, ignores it with a warning at start-up, or refuses to start with a
// message saying what to use instead. spec §9.17 lists the same table, and a test holds
// the two equal.
package peerenv

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Use is what Leash does with one of the peer's variables.
type Use uint8

// The uses, as spec §9.17 names them.
const (
	// Used: the variable sets a Leash key (some values are refused, each saying why).
	Used Use = iota
	// Ignored: Leash has nothing to set; a value that would make the peer behave
	// otherwise than Leash is logged as a warning at start-up.
	Ignored
	// Refused: Leash cannot do what the variable asks; a value that asks for it stops
	// start-up with a message naming what to use instead.
	Refused
)

// String is the use's word in spec §9.17.
func (u Use) String() string {
	return [...]string{"used", "ignored", "refused"}[u]
}

// Setting is one row of the table: the peer's variables and what Leash does with them.
type Setting struct {
	Names []string
	Use   Use
}

// Settings is every variable of the peer's settings (its src/settings/settings.go, plus
// OTEL_EXPORTER_OTLP_ENDPOINT, read by its tracing SDK, and GRPC_SERVER_TLS_CA_CERT,
// which Envoy Gateway sets), in the order of spec §9.17.
var Settings = []Setting{
	{[]string{"HOST", "PORT"}, Used},
	{[]string{"DEBUG_HOST", "DEBUG_PORT"}, Used},
	{[]string{"GRPC_HOST", "GRPC_PORT"}, Used},
	{[]string{"GRPC_UDS"}, Refused},
	{[]string{"GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE"}, Ignored},
	{[]string{"GRPC_SERVER_USE_TLS", "GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY"}, Used},
	{[]string{"GRPC_CLIENT_TLS_CACERT"}, Used},
	{[]string{"GRPC_SERVER_TLS_CA_CERT"}, Ignored},
	{[]string{"GRPC_CLIENT_TLS_SAN"}, Refused},
	{[]string{"LOG_LEVEL"}, Used},
	{[]string{"LOG_FORMAT"}, Used},
	{[]string{"CONFIG_TYPE"}, Used},
	{[]string{"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"}, Used},
	{[]string{"RUNTIME_WATCH_ROOT", "RUNTIME_IGNOREDOTFILES"}, Ignored},
	{[]string{"FORCE_START_WITHOUT_INITIAL_CONFIG"}, Ignored},
	{[]string{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED"}, Ignored},
	{[]string{"MERGE_DOMAIN_CONFIG"}, Refused},
	{[]string{"CONFIG_GRPC_XDS_SERVER_URL"}, Used},
	{[]string{"CONFIG_GRPC_XDS_NODE_ID"}, Used},
	{[]string{"CONFIG_GRPC_XDS_NODE_METADATA"}, Ignored},
	{[]string{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"}, Refused},
	{[]string{"CONFIG_GRPC_XDS_SERVER_USE_TLS"}, Used},
	{[]string{"CONFIG_GRPC_XDS_SERVER_TLS_CACERT"}, Used},
	{[]string{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY"}, Used},
	{[]string{"CONFIG_GRPC_XDS_SERVER_TLS_SAN"}, Used},
	{[]string{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "XDS_CLIENT_BACKOFF_MAX_INTERVAL", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "XDS_CLIENT_BACKOFF_JITTER"}, Ignored},
	{[]string{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"}, Ignored},
	{[]string{"LOCAL_CACHE_SIZE_IN_BYTES"}, Used},
	{[]string{"SHADOW_MODE"}, Used},
	{[]string{"QUOTA_MODE"}, Used},
	{[]string{"RESPONSE_DYNAMIC_METADATA"}, Used},
	{[]string{"LIMIT_RESPONSE_HEADERS_ENABLED"}, Used},
	{[]string{"LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"}, Used},
	{[]string{"NEAR_LIMIT_RATIO"}, Used},
	{[]string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"}, Used},
	{[]string{"EXPIRATION_JITTER_MAX_SECONDS"}, Ignored},
	{[]string{"BACKEND_TYPE"}, Used},
	{[]string{"CACHE_KEY_PREFIX"}, Used},
	{[]string{"REDIS_TYPE", "REDIS_URL"}, Used},
	{[]string{"REDIS_SOCKET_TYPE"}, Used},
	{[]string{"REDIS_AUTH"}, Used},
	{[]string{"REDIS_SENTINEL_AUTH"}, Refused},
	{[]string{"REDIS_TLS"}, Used},
	{[]string{"REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY", "REDIS_TLS_CACERT"}, Used},
	{[]string{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"}, Refused},
	{[]string{"REDIS_POOL_SIZE"}, Used},
	{[]string{"REDIS_TIMEOUT"}, Used},
	{[]string{"REDIS_POOL_ON_EMPTY_BEHAVIOR"}, Ignored},
	{[]string{"REDIS_PIPELINE_WINDOW", "REDIS_PIPELINE_LIMIT", "REDIS_CLUSTER_PIPELINE_PARALLELISM"}, Ignored},
	{[]string{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION"}, Ignored},
	{[]string{"REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME"}, Ignored},
	{[]string{"REDIS_PERSECOND", "REDIS_PERSECOND_SOCKET_TYPE", "REDIS_PERSECOND_TYPE", "REDIS_PERSECOND_URL", "REDIS_PERSECOND_POOL_SIZE", "REDIS_PERSECOND_AUTH", "REDIS_PERSECOND_TLS", "REDIS_PERSECOND_SENTINEL_AUTH", "REDIS_PERSECOND_PIPELINE_WINDOW", "REDIS_PERSECOND_PIPELINE_LIMIT", "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "REDIS_PERSECOND_TIMEOUT", "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR"}, Ignored},
	{[]string{"MEMCACHE_HOST_PORT", "MEMCACHE_MAX_IDLE_CONNS", "MEMCACHE_SRV", "MEMCACHE_SRV_REFRESH", "MEMCACHE_TLS", "MEMCACHE_TLS_CLIENT_CERT", "MEMCACHE_TLS_CLIENT_KEY", "MEMCACHE_TLS_CACERT", "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION"}, Ignored},
	{[]string{"USE_PROMETHEUS", "PROMETHEUS_ADDR", "PROMETHEUS_PATH"}, Used},
	{[]string{"PROMETHEUS_MAPPER_YAML", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS"}, Ignored},
	{[]string{"USE_STATSD"}, Used},
	{[]string{"STATSD_HOST", "STATSD_PORT", "USE_DOG_STATSD", "USE_DOG_STATSD_MOGRIFIERS", "EXTRA_TAGS", "STATS_FLUSH_INTERVAL", "DISABLE_STATS"}, Ignored},
	{[]string{"TRACING_ENABLED", "TRACING_EXPORTER_PROTOCOL"}, Used},
	{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT"}, Used},
	{[]string{"TRACING_SERVICE_NAME"}, Used},
	{[]string{"TRACING_SERVICE_NAMESPACE", "TRACING_SERVICE_INSTANCE_ID"}, Ignored},
	{[]string{"TRACING_SAMPLING_RATE"}, Used},
}

// HTTPAddr is http.addr (the /v1 API) under the peer's environment: the peer's own
// listeners take 8080 and 8081, so /v1 moves to 8082, on loopback unless LEASH_HTTP_ADDR
// says otherwise.
const HTTPAddr = "127.0.0.1:8082"

// Result is what the peer's environment asks of Leash.
type Result struct {
	// Keys are Leash configuration keys and their values, as LEASH_ variables take them.
	Keys map[string]string
	// Warnings name the variables Leash ignores whose values ask for something it does not
	// do, one sentence each.
	Warnings []string
}

// Translate reads the peer's variables from env (name → value) and returns the Leash
// keys they set and the warnings. The error joins every refused value, one per line,
// each naming the variable and what to use instead. Variables the environment does not
// set take the peer's defaults where they differ from Leash's (a reply without RateLimit-*
// headers, hits of over-limit descriptors counted, the listeners on 8080, 8081 and 6070).
// A LEASH_STORE_BACKEND variable in env leaves the store to Leash's own keys.
func Translate(env map[string]string) (Result, error) {
	t := &translator{env: env, keys: map[string]string{}}
	t.listeners()
	t.grpcTLS()
	t.logs()
	t.descriptors()
	t.replies()
	if _, own := env["LEASH_STORE_BACKEND"]; !own {
		t.store()
	}
	t.telemetry()
	t.ignored()
	return Result{Keys: t.keys, Warnings: t.warns}, errors.Join(t.errs...)
}

// ConfigEnv names the configuration files to read, comma-separated, under the peer's
// environment: where the command line cannot be changed (Envoy Gateway runs
// /bin/ratelimit without arguments), they are read as `--config` files, before any given on
// the command line.
const ConfigEnv = "LEASH_CONFIG"

// Env is a process environment with the peer's variables translated.
type Env struct {
	// Environ is the environment with the LEASH_ variables of Translate's keys added
	// (except those it already had) and ConfigEnv removed.
	Environ []string
	// ConfigFiles are the files ConfigEnv names.
	ConfigFiles []string
	// Warnings are Translate's.
	Warnings []string
}

// Environ translates the peer's variables of environ (Translate); the error is
// Translate's, and Warnings are set also with it.
func Environ(environ []string) (Env, error) {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	res, err := Translate(env)
	out := Env{Warnings: res.Warnings}
	if err != nil {
		return out, err
	}
	for _, f := range strings.Split(env[ConfigEnv], ",") {
		if f = strings.TrimSpace(f); f != "" {
			out.ConfigFiles = append(out.ConfigFiles, f)
		}
	}
	out.Environ = slices.DeleteFunc(slices.Clone(environ), func(kv string) bool { return strings.HasPrefix(kv, ConfigEnv+"=") })
	for _, key := range slices.Sorted(maps.Keys(res.Keys)) {
		name := EnvName(key)
		if _, own := env[name]; !own {
			out.Environ = append(out.Environ, name+"="+res.Keys[key])
		}
	}
	return out, nil
}

// EnvName is the LEASH_ variable of a configuration key (spec §10.1).
func EnvName(key string) string {
	return "LEASH_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

type translator struct {
	env   map[string]string
	keys  map[string]string
	warns []string
	errs  []error
}

func (t *translator) get(name, def string) string {
	if v, ok := t.env[name]; ok {
		return v
	}
	return def
}

func (t *translator) set(name string) bool {
	_, ok := t.env[name]
	return ok
}

func (t *translator) refuse(name, format string, args ...any) {
	t.errs = append(t.errs, fmt.Errorf("%s=%q: %s", name, t.env[name], fmt.Sprintf(format, args...)))
}

func (t *translator) warn(name, format string, args ...any) {
	t.warns = append(t.warns, fmt.Sprintf("%s=%q is ignored: %s", name, t.env[name], fmt.Sprintf(format, args...)))
}

// boolean reads a boolean variable (strconv.ParseBool, as the peer's envconfig does).
func (t *translator) boolean(name string, def bool) bool {
	v, ok := t.env[name]
	if !ok || v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		t.refuse(name, "not a boolean")
		return def
	}
	return b
}

// integer reads a non-negative integer variable.
func (t *translator) integer(name string) (int64, bool) {
	v, ok := t.env[name]
	if !ok || v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		t.refuse(name, "not a non-negative integer")
		return 0, false
	}
	return n, true
}

func (t *translator) hostPort(hostVar, hostDef, portVar, portDef string) string {
	return net.JoinHostPort(t.get(hostVar, hostDef), t.get(portVar, portDef))
}

func (t *translator) listeners() {
	t.keys["envoy.json_addr"] = t.hostPort("HOST", "0.0.0.0", "PORT", "8080")
	t.keys["grpc.addr"] = t.hostPort("GRPC_HOST", "0.0.0.0", "GRPC_PORT", "8081")
	t.keys["http.addr"] = HTTPAddr
	if t.get("GRPC_UDS", "") != "" {
		t.refuse("GRPC_UDS", "Leash listens on TCP only: unset it and use GRPC_HOST and GRPC_PORT")
	}
	// Metrics: with USE_PROMETHEUS the admin listener (/metrics, /healthz, /readyz) is
	// PROMETHEUS_ADDR; without, the peer's debug listener.
	if t.boolean("USE_PROMETHEUS", false) {
		t.keys["admin.addr"] = t.get("PROMETHEUS_ADDR", ":9090")
		if p := t.get("PROMETHEUS_PATH", "/metrics"); p != "/metrics" {
			t.refuse("PROMETHEUS_PATH", "Leash serves metrics at /metrics: unset it and scrape /metrics")
		}
	} else {
		t.keys["admin.addr"] = t.hostPort("DEBUG_HOST", "0.0.0.0", "DEBUG_PORT", "6070")
	}
}

func (t *translator) grpcTLS() {
	files := []string{"GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY", "GRPC_CLIENT_TLS_CACERT"}
	if !t.boolean("GRPC_SERVER_USE_TLS", false) {
		for _, f := range files {
			if t.get(f, "") != "" {
				t.warn(f, "GRPC_SERVER_USE_TLS is not true, so gRPC is served without TLS, as the peer does")
			}
		}
	} else {
		cert, key := t.get("GRPC_SERVER_TLS_CERT", ""), t.get("GRPC_SERVER_TLS_KEY", "")
		if cert == "" || key == "" {
			t.errs = append(t.errs, errors.New("GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"))
		}
		t.keys["grpc.tls.cert_file"], t.keys["grpc.tls.key_file"] = cert, key
		if ca := t.get("GRPC_CLIENT_TLS_CACERT", ""); ca != "" {
			t.keys["grpc.tls.client_ca_file"] = ca
		}
	}
	if t.get("GRPC_SERVER_TLS_CA_CERT", "") != "" {
		t.warn("GRPC_SERVER_TLS_CA_CERT", "the peer does not read it either; clients are asked for a certificate only with GRPC_CLIENT_TLS_CACERT")
	}
	if t.get("GRPC_CLIENT_TLS_SAN", "") != "" {
		t.refuse("GRPC_CLIENT_TLS_SAN", "Leash verifies client certificates against GRPC_CLIENT_TLS_CACERT only: unset it and use a CA that signs only the clients to admit")
	}
}

func (t *translator) logs() {
	if v, ok := t.env["LOG_LEVEL"]; ok && v != "" {
		switch strings.ToLower(v) {
		case "trace", "debug":
			t.keys["log.level"] = "debug"
		case "info":
			t.keys["log.level"] = "info"
		case "warn", "warning":
			t.keys["log.level"] = "warn"
		case "error", "fatal", "panic":
			t.keys["log.level"] = "error"
		default:
			t.refuse("LOG_LEVEL", "use debug, info, warn or error")
		}
	}
	if v, ok := t.env["LOG_FORMAT"]; ok && v != "" {
		switch strings.ToLower(v) {
		case "json", "text":
			t.keys["log.format"] = strings.ToLower(v)
		default:
			t.refuse("LOG_FORMAT", "use json or text")
		}
	}
}

func (t *translator) descriptors() {
	switch ct := strings.ToUpper(t.get("CONFIG_TYPE", "FILE")); ct {
	case "FILE":
		t.keys["envoy.config_paths"] = filepath.Join(t.get("RUNTIME_ROOT", "/srv/runtime_data/current"),
			t.get("RUNTIME_SUBDIRECTORY", ""), t.get("RUNTIME_APPDIRECTORY", "config"))
		if t.set("RUNTIME_IGNOREDOTFILES") && !t.boolean("RUNTIME_IGNOREDOTFILES", false) {
			t.warn("RUNTIME_IGNOREDOTFILES", "files whose names start with '.' are always skipped")
		}
	case "GRPC_XDS_SOTW":
		url := t.get("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000")
		t.keys["envoy.xds.address"] = url
		t.keys["envoy.xds.node_id"] = t.get("CONFIG_GRPC_XDS_NODE_ID", "default")
		if t.set("FORCE_START_WITHOUT_INITIAL_CONFIG") && !t.boolean("FORCE_START_WITHOUT_INITIAL_CONFIG", false) {
			t.warn("FORCE_START_WITHOUT_INITIAL_CONFIG", "Leash serves before the first xDS update, its domains unknown until then")
		}
		files := [][2]string{{"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "ca_file"}, {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "cert_file"},
			{"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "key_file"}, {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "server_name"}}
		if t.boolean("CONFIG_GRPC_XDS_SERVER_USE_TLS", false) {
			some := false
			for _, nk := range files {
				if v := t.get(nk[0], ""); v != "" {
					t.keys["envoy.xds.tls."+nk[1]], some = v, true
				}
			}
			if !some { // TLS verified against the system's roots, under the address's host
				host, _, _ := net.SplitHostPort(url)
				t.keys["envoy.xds.tls.server_name"] = host
			}
		} else {
			for _, nk := range files {
				if t.get(nk[0], "") != "" {
					t.warn(nk[0], "CONFIG_GRPC_XDS_SERVER_USE_TLS is not true, so the xDS connection has no TLS, as the peer's")
				}
			}
		}
		if t.get("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "") != "" {
			t.refuse("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "Leash sends no extra headers to the xDS server: authenticate it with a client certificate (CONFIG_GRPC_XDS_CLIENT_TLS_CERT)")
		}
		if t.get("CONFIG_GRPC_XDS_NODE_METADATA", "") != "" {
			t.warn("CONFIG_GRPC_XDS_NODE_METADATA", "the node carries its id only")
		}
	default:
		t.refuse("CONFIG_TYPE", "use FILE or GRPC_XDS_SOTW")
	}
	if t.boolean("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false) {
		t.warn("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "/healthcheck follows the store, not the descriptor configuration")
	}
	if t.boolean("MERGE_DOMAIN_CONFIG", false) {
		t.refuse("MERGE_DOMAIN_CONFIG", "Leash reads each domain from one file or resource: merge the files")
	}
}

func (t *translator) replies() {
	if n, ok := t.integer("LOCAL_CACHE_SIZE_IN_BYTES"); ok {
		entries := n / 128 // about one over-limit counter per 128 bytes of the peer's cache
		if n > 0 && entries == 0 {
			entries = 1
		}
		t.keys["envoy.local_cache.max_entries"] = strconv.FormatInt(entries, 10)
	}
	for _, nk := range [][2]string{{"SHADOW_MODE", "envoy.shadow_mode"}, {"QUOTA_MODE", "envoy.quota_mode"},
		{"RESPONSE_DYNAMIC_METADATA", "envoy.response_dynamic_metadata"}, {"LIMIT_RESPONSE_HEADERS_ENABLED", "envoy.response_headers"}} {
		t.keys[nk[1]] = strconv.FormatBool(t.boolean(nk[0], false))
	}
	for _, nk := range [][2]string{{"LIMIT_LIMIT_HEADER", "envoy.header_names.limit"},
		{"LIMIT_REMAINING_HEADER", "envoy.header_names.remaining"}, {"LIMIT_RESET_HEADER", "envoy.header_names.reset"}} {
		if v := t.get(nk[0], ""); v != "" {
			t.keys[nk[1]] = v
		}
	}
	if v := t.get("NEAR_LIMIT_RATIO", ""); v != "" {
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			t.refuse("NEAR_LIMIT_RATIO", "not a number")
		} else {
			t.keys["metrics.near_limit_ratio"] = v
		}
	}
	// The peer counts the hits of an over-limit request unless told to stop (spec §4.12).
	t.keys["envoy.overdraft"] = strconv.FormatBool(!t.boolean("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", false))
	if t.get("EXPIRATION_JITTER_MAX_SECONDS", "") != "" {
		t.warn("EXPIRATION_JITTER_MAX_SECONDS", "counters expire when they stop mattering, with no jitter")
	}
}

// store translates the peer's Redis backend: the node, Cluster or Sentinel, and TLS.
func (t *translator) store() {
	if bt := strings.ToLower(t.get("BACKEND_TYPE", "redis")); bt != "redis" {
		t.refuse("BACKEND_TYPE", "Leash stores counters in Redis (BACKEND_TYPE=redis), or in memory for one instance (LEASH_STORE_BACKEND=memory)")
		return
	}
	t.keys["store.backend"] = "redis"
	if p := t.get("CACHE_KEY_PREFIX", ""); p != "" {
		t.keys["store.redis.prefix"] = p
	}
	switch st := strings.ToLower(t.get("REDIS_SOCKET_TYPE", "tcp")); st {
	case "tcp":
	default:
		t.refuse("REDIS_SOCKET_TYPE", "Leash connects to Redis over TCP: use tcp and REDIS_URL=host:port")
	}
	url := t.get("REDIS_URL", "")
	if url == "" {
		t.errs = append(t.errs, errors.New("REDIS_URL is not set: the peer's default is a unix socket, which Leash cannot use; set REDIS_URL=host:port (or LEASH_STORE_BACKEND=memory for one instance)"))
		return
	}
	tlsOn := t.boolean("REDIS_TLS", false)
	tlsFiles := false
	for _, nk := range [][2]string{{"REDIS_TLS_CACERT", "ca_file"}, {"REDIS_TLS_CLIENT_CERT", "cert_file"}, {"REDIS_TLS_CLIENT_KEY", "key_file"}} {
		switch v := t.get(nk[0], ""); {
		case v == "":
		case tlsOn:
			t.keys["store.redis.tls."+nk[1]], tlsFiles = v, true
		default:
			t.warn(nk[0], "REDIS_TLS is not true, so Redis is reached without TLS, as the peer does")
		}
	}
	switch rt := strings.ToUpper(t.get("REDIS_TYPE", "SINGLE")); rt {
	case "SINGLE":
		if !strings.Contains(url, "://") {
			url = "redis://" + url
		}
		if tlsOn {
			url = strings.Replace(url, "redis://", "rediss://", 1)
		}
		t.keys["store.redis.url"] = url
	case "CLUSTER", "SENTINEL":
		if tlsOn && !tlsFiles {
			t.refuse("REDIS_TLS", "TLS to Redis Cluster or Sentinel nodes needs their CA: set REDIS_TLS_CACERT")
		}
		parts := strings.Split(url, ",")
		if rt == "CLUSTER" {
			t.keys["store.redis.cluster_addrs"] = strings.Join(parts, ",")
		} else if len(parts) < 2 {
			t.refuse("REDIS_URL", "with REDIS_TYPE=SENTINEL use master-name,host:port[,host:port...]")
		} else {
			t.keys["store.redis.sentinel.master"] = parts[0]
			t.keys["store.redis.sentinel.addrs"] = strings.Join(parts[1:], ",")
		}
	default:
		t.refuse("REDIS_TYPE", "use SINGLE, SENTINEL or CLUSTER")
	}
	t.redisClient()
}

// redisClient translates the peer's Redis credentials, pool size and timeout.
func (t *translator) redisClient() {
	if auth := t.get("REDIS_AUTH", ""); auth != "" {
		if user, pass, ok := strings.Cut(auth, ":"); ok {
			t.keys["store.redis.username"], t.keys["store.redis.password"] = user, pass
		} else {
			t.keys["store.redis.password"] = auth
		}
	}
	if t.get("REDIS_SENTINEL_AUTH", "") != "" {
		t.refuse("REDIS_SENTINEL_AUTH", "Leash reaches sentinels without a password: unset it")
	}
	if t.boolean("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false) {
		t.refuse("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "Leash always verifies the Redis server's name")
	}
	if n, ok := t.integer("REDIS_POOL_SIZE"); ok {
		t.keys["store.redis.pool_size"] = strconv.FormatInt(n, 10)
	}
	if v := t.get("REDIS_TIMEOUT", ""); v != "" {
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			t.refuse("REDIS_TIMEOUT", "not a positive duration")
		} else {
			for _, k := range []string{"dial_timeout", "read_timeout", "write_timeout"} {
				t.keys["store.redis."+k] = v
			}
		}
	}
}

func (t *translator) telemetry() {
	if t.boolean("USE_STATSD", false) {
		t.refuse("USE_STATSD", "Leash has no statsd: set USE_STATSD=false, USE_PROMETHEUS=true and scrape PROMETHEUS_ADDR/metrics")
	}
	if t.boolean("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", false) {
		t.warn("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "Leash's durations are in seconds")
	}
	if !t.boolean("TRACING_ENABLED", false) {
		return
	}
	endpoint := t.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	switch p := strings.ToLower(t.get("TRACING_EXPORTER_PROTOCOL", "http")); p {
	case "http":
		t.keys["tracing.exporter"] = "otlp_http"
		if endpoint == "" {
			endpoint = "http://localhost:4318"
		}
	case "grpc":
		t.keys["tracing.exporter"] = "otlp_grpc"
		if endpoint == "" {
			endpoint = "http://localhost:4317"
		}
		endpoint = strings.TrimPrefix(strings.TrimPrefix(endpoint, "https://"), "http://")
	default:
		t.refuse("TRACING_EXPORTER_PROTOCOL", "use http or grpc")
	}
	if strings.HasPrefix(t.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"), "http://") {
		t.keys["tracing.insecure"] = "true"
	}
	t.keys["tracing.endpoint"] = endpoint
	if v := t.get("TRACING_SERVICE_NAME", ""); v != "" {
		t.keys["tracing.service_name"] = v
	}
	if v := t.get("TRACING_SAMPLING_RATE", ""); v != "" {
		t.keys["tracing.sampling_ratio"] = v
	}
	for _, name := range []string{"TRACING_SERVICE_NAMESPACE", "TRACING_SERVICE_INSTANCE_ID"} {
		if t.get(name, "") != "" {
			t.warn(name, "Leash's spans carry service.name only")
		}
	}
}

// ignored warns about every Ignored variable not handled above that is set: Leash does
// what it does whatever its value.
func (t *translator) ignored() {
	handled := map[string]bool{"GRPC_SERVER_TLS_CA_CERT": true, "RUNTIME_WATCH_ROOT": true, "RUNTIME_IGNOREDOTFILES": true,
		"FORCE_START_WITHOUT_INITIAL_CONFIG": true, "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED": true,
		"CONFIG_GRPC_XDS_NODE_METADATA": true, "EXPIRATION_JITTER_MAX_SECONDS": true, "PROMETHEUS_MAPPER_YAML": true,
		"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS": true, "TRACING_SERVICE_NAMESPACE": true, "TRACING_SERVICE_INSTANCE_ID": true}
	for _, s := range Settings {
		if s.Use != Ignored {
			continue
		}
		for _, name := range s.Names {
			if !handled[name] && t.get(name, "") != "" {
				t.warn(name, "Leash has no such setting (spec §9.17)")
			}
		}
	}
}
