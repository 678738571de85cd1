// Package config loads Leash's configuration (spec §10): one or more YAML files,
// merged by viper key by key, then environment overrides LEASH_<PATH>.
//
// Rules:
//   - With no file, every key has its default (see example.yaml, also returned by
//     Example) and envoy.default_account is "dev".
//   - Later files override earlier ones key by key; a list given in a later file replaces
//     the earlier list (so a ConfigMap file and a Secret file combine).
//   - Every scalar or list key can be overridden by the environment: LEASH_ and the key path
//     in upper case with "_" for "." (LEASH_STORE_REDIS_URL, LEASH_SHUTDOWN_DRAIN_DELAY).
//     Lists are comma-separated (LEASH_STORE_REDIS_CLUSTER_ADDRS=a:6379,b:6379). plans,
//     accounts and envoy.domains come from files only. LEASH_DEV_API_KEY and
//     LEASH_DEV_OPERATOR_KEY are reserved (the dev keys, read by the caller), LEASH_TEST_* is
//     left to tests and CLIVariables to the command line; any other LEASH_ variable that
//     names no key is an error.
//   - A YAML null means "absent" (the earlier file's value or the default stays), except
//     plans.<name>.hard_cap, where null means "no cap".
//   - Keys are case-sensitive and strict: an unknown key, a wrong type (quoted numbers,
//     floats for integers, "yes" for booleans) or an inconsistent combination is an error
//     naming the file, line and key path, e.g. "config: leash.yaml:3: store.memory.max_entries:
//     expected an integer"; every file is checked, and the values merged from them.
//   - Durations are Go duration strings ("500ms", "2s", "5m"); 0 may be written bare.
//
// Every key is described once, in keys.go: its path, type, default and meaning. The
// schema files are checked against, the defaults, the LEASH_ variables and spec §10.2's
// key table (TestSpecKeyTable) come from that description.
//
// Plans (spec §2.3): a plan named like a built-in one (free, pro, scale)
// merges field by field over it; an absent hard_cap inherits the built-in value and
// hard_cap: null removes the cap. A new plan must set algorithms (may be []) and
// monthly_quota; its concurrent_limit and webhooks default to false and an absent hard_cap
// means no cap. Plan names match [a-z0-9][a-z0-9_-]{0,63}.
package config

import (
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/internal/yamlline"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// DevAccountID is the account that exists when the effective config defines no accounts
// (spec §2.4).
const DevAccountID = "dev"

// DevAPIKeyEnv is the reserved environment variable holding the dev account's API key.
const DevAPIKeyEnv = "LEASH_DEV_API_KEY"

// DevOperatorID is the operator that exists when the effective config defines no
// operators and no accounts (spec §15.1).
const DevOperatorID = "dev"

// DevOperatorKeyEnv is the reserved environment variable holding the dev operator's key.
const DevOperatorKeyEnv = "LEASH_DEV_OPERATOR_KEY"

const (
	envPrefix = "LEASH_"
	// viperDelim separates key levels inside viper; domain names may contain ".".
	viperDelim = "\x1f"
)

// Config is the effective configuration: defaults, files and environment merged.
type Config struct {
	// HTTP is the /v1 listener.
	HTTP HTTP
	// Console is the web console on the HTTP listener (spec §16).
	Console Console
	// GRPC is the Envoy rate-limit listener.
	GRPC GRPC
	// Admin is the health, metrics and pprof listener.
	Admin Admin
	// Store is the state backend.
	Store Store
	// Shutdown is SIGTERM handling.
	Shutdown Shutdown
	// Plans holds the built-in plans with the config's plans merged over them, by name.
	Plans map[string]engine.Plan `mapstructure:"-"`
	// Accounts are in file order; API key hashes are normalised to lower-case hex.
	Accounts []Account
	// Operators may use the admin API (spec §15.1); in file order, key hashes normalised
	// to lower-case hex.
	Operators []Operator
	// Envoy is the Envoy rate-limit service's account mapping and descriptor files.
	Envoy Envoy
	// Metrics bounds and tunes the decision metrics (spec §12.2).
	Metrics Metrics
	// Tracing configures OpenTelemetry traces.
	Tracing Tracing
	// Webhooks is webhook screening and delivery.
	Webhooks Webhooks
	// Log is the log level and format.
	Log Log

	// fingerprint is that of the files Load read (see Watch); zero when not from Load.
	fingerprint [32]byte
}

// HTTP configures the /v1 listener.
type HTTP struct {
	// Addr is the listen address (default ":8080").
	Addr string
	// TLS, when set, serves HTTPS.
	TLS TLS
	// ReadHeaderTimeout bounds reading a request's headers (default 5s): a client that
	// sends them slower is disconnected.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included, from its first byte
	// (default 30s).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response, from the end of the request headers
	// (default 30s).
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its next request
	// (default 120s).
	IdleTimeout time.Duration
	// TrustedProxies are the CIDRs (or single addresses) of the proxies whose
	// X-Forwarded-For or Forwarded header names the client (spec §15.7); default none.
	TrustedProxies []string
}

// Proxies returns TrustedProxies parsed, a single address as a prefix of its full length;
// entries that do not parse (Load refuses them) are left out.
func (h *HTTP) Proxies() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range h.TrustedProxies {
		if p, ok := parseProxy(s); ok {
			out = append(out, p)
		}
	}
	return out
}

// parseProxy parses a CIDR or a single IP address, IPv4-mapped IPv6 as IPv4.
func parseProxy(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), true
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), true
}

// Console configures the web console served at /console/ on the HTTP listener.
type Console struct {
	// Enabled serves the console (default true); false removes its routes.
	Enabled bool
}

// TLS names a certificate and key; both empty means plain TCP.
type TLS struct {
	// CertFile is the PEM certificate chain.
	CertFile string
	// KeyFile is the PEM private key.
	KeyFile string
}

// GRPC configures the Envoy rate-limit listener.
type GRPC struct {
	// Addr is the listen address (default ":8081"); "" disables gRPC.
	Addr string
	// TLS, when set, serves gRPC over TLS.
	TLS GRPCTLS
}

// GRPCTLS is TLS for gRPC; with ClientCAFile, client certificates are required (mTLS).
type GRPCTLS struct {
	// CertFile is the PEM certificate chain.
	CertFile string
	// KeyFile is the PEM private key.
	KeyFile string
	// ClientCAFile is the PEM CA bundle client certificates must chain to.
	ClientCAFile string
}

// Admin configures the health, metrics and pprof listener.
type Admin struct {
	// Addr is the listen address (default ":9090").
	Addr string
	// Pprof serves /debug/pprof/ (default false).
	Pprof bool
}

// Store selects and configures the state backend.
type Store struct {
	// Backend is "disk" (default), "memory" or "redis".
	Backend string
	// Disk configures the disk backend.
	Disk Disk
	// Redis configures the redis backend.
	Redis Redis
	// Memory configures the memory backend.
	Memory Memory
}

// Redis configures the Redis store; exactly one of URL, ClusterAddrs and Sentinel is in use
// (see Mode).
type Redis struct {
	// URL is a single node, redis:// or rediss:// (default "redis://127.0.0.1:6379/0").
	URL string
	// ClusterAddrs are Redis Cluster seed nodes (host:port).
	ClusterAddrs []string
	// Sentinel names a Sentinel-managed master.
	Sentinel Sentinel
	// Prefix starts every key (default "leash").
	Prefix string
	// Username is the Redis ACL user.
	Username string
	// Password is the Redis password; never log it.
	Password string
	// WaitReplicas is how many replicas a lease acquisition waits for (default 0, spec §11.3).
	WaitReplicas int
	// Reservations lets hot window counters be decided from local slices
	// (default true, spec §4.13).
	Reservations bool
	// DialTimeout bounds connecting (default 500ms).
	DialTimeout time.Duration
	// ReadTimeout bounds reading a reply (default 500ms).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a command (default 500ms).
	WriteTimeout time.Duration
	// PoolSize is the connection pool size per node; 0 means the driver's default.
	PoolSize int
	// TLS, when any file is set, encrypts every connection with a private CA and/or a
	// client certificate.
	TLS RedisTLS
}

// RedisTLS is the TLS of the Redis connections: a CA to verify the servers (the system's
// roots when empty) and a client certificate.
type RedisTLS struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

// Enabled reports whether any file is set.
func (t RedisTLS) Enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// Sentinel names a Sentinel-managed master and the sentinels to ask.
type Sentinel struct {
	// Master is the monitored master's name.
	Master string
	// Addrs are the sentinels (host:port).
	Addrs []string
}

// RedisMode is how the Redis store connects.
type RedisMode string

// The three Redis deployments.
const (
	RedisSingle   RedisMode = "single"
	RedisCluster  RedisMode = "cluster"
	RedisSentinel RedisMode = "sentinel"
)

// Mode reports which of URL, ClusterAddrs and Sentinel is in use (Load ensures one).
func (r *Redis) Mode() RedisMode {
	switch {
	case len(r.ClusterAddrs) > 0:
		return RedisCluster
	case r.Sentinel.Master != "" || len(r.Sentinel.Addrs) > 0:
		return RedisSentinel
	}
	return RedisSingle
}

// Disk configures the disk store (spec §11.5).
type Disk struct {
	// Path is the store's directory (default "leash-data", relative to the working
	// directory).
	Path string
	// SyncInterval bounds the writes a power loss can take (default 1s); 0 syncs every
	// write.
	SyncInterval time.Duration
	// MaxEntries bounds live counters and leases, one entry each (default 1000000).
	MaxEntries int
}

// Memory configures the memory store.
type Memory struct {
	// MaxEntries bounds live counters and leases, one entry each (default 1000000, spec §11.1).
	MaxEntries int
}

// Shutdown configures SIGTERM handling (spec §12.3).
type Shutdown struct {
	// DrainDelay is the time between /readyz turning 503 and listeners closing (default 2s).
	DrainDelay time.Duration
	// Timeout is the whole shutdown budget (default 10s); DrainDelay is below it.
	Timeout time.Duration
}

// Account is one tenant as configured.
type Account struct {
	// ID matches [a-z0-9][a-z0-9_-]{0,63} and is unique.
	ID string
	// Plan names a key of Config.Plans.
	Plan string
	// APIKeys are plaintext keys (development and tests).
	APIKeys []string
	// APIKeySHA256 are SHA-256 digests of keys, 64 lower-case hex characters after Load.
	APIKeySHA256 []string
}

// Operator is an identity of the admin API (spec §15.1), as configured: it is no account,
// and its keys take the same two forms as an account's.
type Operator struct {
	// ID matches [a-z0-9][a-z0-9_-]{0,63} and is unique among operators.
	ID string
	// APIKeys are plaintext keys (development and tests).
	APIKeys []string
	// APIKeySHA256 are SHA-256 digests of keys, 64 lower-case hex characters after Load.
	APIKeySHA256 []string
}

// Envoy configures the Envoy rate-limit service.
type Envoy struct {
	// ConfigPaths are files or folders of envoyproxy/ratelimit descriptor YAML.
	ConfigPaths []string
	// DefaultAccount is the account of a domain not in Domains ("dev" with no config file).
	DefaultAccount string
	// Domains maps a domain to its account; names keep their spelling.
	Domains map[string]EnvoyDomain
	// ResponseHeaders adds RateLimit-* and Retry-After to replies (default true).
	ResponseHeaders bool
	// HeaderNames are the names of the RateLimit-* headers on replies.
	HeaderNames HeaderNames
	// ShadowMode answers every OVER_LIMIT overall code as OK (spec §9.7).
	ShadowMode bool
	// QuotaMode puts every descriptor in quota mode (spec §9.7).
	QuotaMode bool
	// Overdraft counts the hits of an over-limit descriptor, as the peer does (spec
	// §4.12, §9.5); a domain or a descriptor may say otherwise.
	Overdraft bool
	// ResponseDynamicMetadata returns dynamic_metadata in replies (spec §9.7).
	ResponseDynamicMetadata bool
	// JSONAddr is the listener of POST /json and GET /healthcheck; "" turns it off.
	JSONAddr string
	// LocalCache is the in-process cache of over-limit counters (spec §9.13).
	LocalCache LocalCache
	// XDS is the management server descriptor configs may come from.
	XDS XDS
	// RLQS tunes and bounds the Rate Limit Quota Service (spec §14).
	RLQS RLQS
}

// RLQS tunes and bounds the Rate Limit Quota Service (spec §14.5, §14.6).
type RLQS struct {
	// ReportingInterval is assumed for a stream until its reports show their own (default 1s).
	ReportingInterval time.Duration
	// TTLIntervals is the assignments' time-to-live in reporting intervals (default 3).
	TTLIntervals int
	// MaxBucketsPerStream bounds the buckets tracked per stream (default 1000).
	MaxBucketsPerStream int
	// MaxBucketsPerAccount bounds the buckets tracked per account on one instance (default 10000).
	MaxBucketsPerAccount int
}

// HeaderNames are the RateLimit-* header names of Envoy replies.
type HeaderNames struct {
	Limit     string
	Remaining string
	Reset     string
}

// LocalCache bounds the over-limit cache; MaxEntries 0 turns it off (the default).
type LocalCache struct {
	MaxEntries int
}

// XDS is an xDS management server serving RateLimitConfig resources.
type XDS struct {
	// Address is host:port; "" turns xDS off.
	Address string
	// NodeID is this instance's node id in requests (default "leash").
	NodeID string
	// TLS, when any file is set, connects with TLS.
	TLS XDSTLS
}

// XDSTLS is the TLS of the xDS connection: a CA to verify the server, an optional client
// certificate, and the server name to verify.
type XDSTLS struct {
	CAFile     string
	CertFile   string
	KeyFile    string
	ServerName string
}

// Metrics bounds and tunes the decision metrics.
type Metrics struct {
	// Namespaces get their own label on /v1 decision metrics; every other namespace is
	// counted as "other" (default none).
	Namespaces []string
	// NearLimitRatio is the share of a limit from which an allowed request counts as near
	// the limit (default 0.8, the peer's NEAR_LIMIT_RATIO).
	NearLimitRatio float64
}

// Tracing configures OpenTelemetry traces; Exporter "none" (the default) turns them off.
type Tracing struct {
	// Exporter is none, otlp_grpc or otlp_http.
	Exporter string
	// Endpoint is the OTLP receiver: host:port for otlp_grpc, host:port or a URL for otlp_http.
	Endpoint string
	// Insecure sends without TLS.
	Insecure bool
	// SamplingRatio is the share of new traces sampled (0 to 1; default 1); a caller's
	// sampled trace is always followed.
	SamplingRatio float64
	// ServiceName is service.name of the spans (default leash).
	ServiceName string
}

// EnvoyDomain says which account an Envoy domain counts against.
type EnvoyDomain struct {
	// Account is the id of an account (or "dev" when none are configured).
	Account string
	// Overdraft, when set, overrides envoy.overdraft for the domain's descriptors.
	Overdraft *bool
}

// Webhooks configures webhook screening and delivery.
type Webhooks struct {
	// AllowHTTP admits http:// URLs (tests only; default false).
	AllowHTTP bool
	// AllowPrivateTargets admits loopback and private addresses (tests only; default false).
	AllowPrivateTargets bool
	// Timeout bounds one delivery attempt (default 10s).
	Timeout time.Duration
	// MaxAttempts bounds deliveries of one event (default 12).
	MaxAttempts int
	// BackoffBase is the first retry delay, doubled per attempt (default 1s).
	BackoffBase time.Duration
	// BackoffMax caps the retry delay (default 5m).
	BackoffMax time.Duration
}

// Log configures log/slog.
type Log struct {
	// Level is debug, info (default), warn or error.
	Level string
	// Format is json (default) or text.
	Format string
}

// document is what viper decodes: the config with plans still raw. Keys match fields by
// name (matchKey), so the key names are those of keys.go alone.
type document struct {
	Config `mapstructure:",squash"`
	Plans  map[string]planDoc
}

// matchKey reports whether a config key names a struct field: read_header_timeout names
// ReadHeaderTimeout.
func matchKey(key, field string) bool {
	return strings.EqualFold(strings.ReplaceAll(key, "_", ""), field)
}

// planDoc is a plan as written; nil fields were not given.
type planDoc struct {
	Algorithms      []string
	ConcurrentLimit *bool
	Webhooks        *bool
	MonthlyQuota    *int64
	HardCap         *int64
}

// file is one config file's name and content.
type file struct {
	path string
	data []byte
	err  error
}

func readFiles(paths []string) []file {
	files := make([]file, len(paths))
	for i, p := range paths {
		data, err := os.ReadFile(p)
		files[i] = file{path: p, data: data, err: err}
	}
	return files
}

// Load reads the config files in order (none: defaults only), applies the LEASH_*
// variables found in environ (e.g. os.Environ()) and validates the result. The error
// names every key at fault, one per line.
func Load(paths []string, environ []string) (*Config, error) {
	files := readFiles(paths)
	cfg, err := load(files, environ)
	if err != nil {
		return nil, err
	}
	cfg.fingerprint = fingerprint(files)
	return cfg, nil
}

func load(files []file, environ []string) (*Config, error) {
	root := schema()
	v := viper.NewWithOptions(viper.KeyDelimiter(viperDelim))
	root.leaves("", func(path string, n *node) {
		if n.def != nil {
			v.SetDefault(viperKey(path), n.def)
		}
	})

	all := &errList{}
	st := newFileState(all)
	where := map[string]string{} // key path → where it was last set: "file:line" or a variable
	unread := false              // a file could not be read as YAML: the rest is not validated
	for _, f := range files {
		cleaned, ok := loadFile(f, root, st, all, where)
		if !ok {
			unread = true
			continue
		}
		if err := v.MergeConfigMap(cleaned); err != nil {
			all.addRaw(fmt.Sprintf("%s: %v", f.path, err))
			unread = true
		}
	}
	st.errs = all

	env := applyEnv(v, root, environ, all)
	for path := range env {
		where[path] = envWhere + envName(path)
	}
	if unread {
		return nil, all.err()
	}
	// Problems found so far leave their keys at earlier values; what validation says of
	// keys next to them follows from that, and is not reported (spec §9.16).
	all.locate = func(path string) string { return locate(where, path) }
	firstCheck := len(all.entries)
	var doc document
	if err := v.UnmarshalExact(&doc, func(c *mapstructure.DecoderConfig) {
		c.WeaklyTypedInput = false
		c.DecodeHook = mapstructure.StringToTimeDurationHookFunc()
		c.MatchName = matchKey
	}); err != nil {
		all.addRaw(err.Error())
		return nil, all.err()
	}

	cfg := &doc.Config
	normalise(cfg)
	if len(files) == 0 && !env["envoy.default_account"] {
		cfg.Envoy.DefaultAccount = DevAccountID
	}
	// viper lower-cases map keys: give envoy.domains back their spelling.
	if len(cfg.Envoy.Domains) > 0 {
		domains := make(map[string]EnvoyDomain, len(cfg.Envoy.Domains))
		for k, d := range cfg.Envoy.Domains {
			if orig, ok := st.domains[k]; ok {
				k = orig
			}
			domains[k] = d
		}
		cfg.Envoy.Domains = domains
	}
	explicit := func(path string) bool { return st.set[path] || env[path] }
	cfg.Plans = mergePlans(doc.Plans, st, all)
	checkRules(v, all)
	validate(cfg, explicit, all)
	all.dropFollowing(firstCheck)
	if err := all.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// normalise makes every empty list or map nil, however it was written.
func normalise(c *Config) {
	nilIfEmpty := func(s *[]string) {
		if len(*s) == 0 {
			*s = nil
		}
	}
	nilIfEmpty(&c.Store.Redis.ClusterAddrs)
	nilIfEmpty(&c.Store.Redis.Sentinel.Addrs)
	nilIfEmpty(&c.Envoy.ConfigPaths)
	nilIfEmpty(&c.Metrics.Namespaces)
	nilIfEmpty(&c.HTTP.TrustedProxies)
	if len(c.Accounts) == 0 {
		c.Accounts = nil
	}
	for i := range c.Accounts {
		nilIfEmpty(&c.Accounts[i].APIKeys)
		nilIfEmpty(&c.Accounts[i].APIKeySHA256)
	}
	if len(c.Operators) == 0 {
		c.Operators = nil
	}
	for i := range c.Operators {
		nilIfEmpty(&c.Operators[i].APIKeys)
		nilIfEmpty(&c.Operators[i].APIKeySHA256)
	}
	if len(c.Envoy.Domains) == 0 {
		c.Envoy.Domains = nil
	}
}

func viperKey(path string) string {
	out := []byte(path)
	for i, c := range out {
		if c == '.' {
			out[i] = viperDelim[0]
		}
	}
	return string(out)
}

// loadFile checks one file against the schema and returns its content cleaned for viper,
// recording the problems in all, each with the file and line, and the line of every key
// in where. ok is false when the file cannot be read as YAML (or at all).
func loadFile(f file, root *node, st *fileState, all *errList, where map[string]string) (cleaned map[string]any, ok bool) {
	if f.err != nil {
		all.addRaw(f.err.Error())
		return nil, false
	}
	raw, err := parseYAML(f.data)
	var se *syntaxError
	switch {
	case errors.As(err, &se):
		for _, p := range yamlline.Locate(f.data, se.err) {
			all.addRaw(at(f.path, p.Line) + ": " + p.Msg)
		}
		return nil, false
	case err != nil:
		all.addRaw(f.path + ": " + err.Error())
		return nil, false
	}
	lines := map[string]int{}
	var doc yaml.Node
	if yaml.Unmarshal(f.data, &doc) == nil {
		keyLines(&doc, "", lines)
	}
	st.errs = &errList{locate: func(path string) string { return at(f.path, lineOf(lines, path)) }}
	out, _ := st.check("", raw, root)
	st.record(raw)
	slices.SortStableFunc(st.errs.entries, func(a, b entry) int { return lineOf(lines, a.path) - lineOf(lines, b.path) })
	all.entries = append(all.entries, st.errs.entries...)
	for path, line := range lines {
		where[path] = at(f.path, line)
	}
	return out.(map[string]any), true
}

// at is "file:line", or "file" when the line is unknown.
func at(file string, line int) string {
	if line <= 0 {
		return file
	}
	return file + ":" + strconv.Itoa(line)
}

// keyLines records the line of every key path of a YAML document in lines: a mapping
// key's line, a list item's own. Aliases are not followed.
func keyLines(n *yaml.Node, path string, lines map[string]int) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			keyLines(c, path, lines)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			p := join(path, k.Value)
			lines[p] = k.Line
			keyLines(n.Content[i+1], p, lines)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := index(path, i)
			lines[p] = c.Line
			keyLines(c, p, lines)
		}
	}
}

// lineOf is the line of path, or of the nearest key that encloses it; 0 when none.
func lineOf(lines map[string]int, path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := lines[p]; ok {
			return l
		}
	}
	return 0
}

// envWhere starts the place of a key set by an environment variable, before its name.
const envWhere = "environment variable "

// locate is where path, or the nearest key that encloses it, was last set: "file:line",
// or envWhere and the LEASH_ variable that set it; "" when nowhere (a default).
func locate(where map[string]string, path string) string {
	if w, ok := where[path]; ok {
		return w
	}
	for p := parentPath(path); p != ""; p = parentPath(p) {
		// A variable sets a whole list: it is where each of its elements was set.
		element := strings.HasPrefix(path, p+"[") && !strings.ContainsAny(path[len(p)+1:], ".[")
		if w, ok := where[p]; ok && (element || !strings.HasPrefix(w, envWhere)) {
			return w
		}
	}
	return ""
}

// parentPath is the key path that encloses path: "a.b" for "a.b.c" and for "a.b[2]"; ""
// for a top-level key.
func parentPath(path string) string {
	if i := strings.LastIndexAny(path, ".["); i > 0 {
		return path[:i]
	}
	return ""
}

// syntaxError is a file that is not YAML.
type syntaxError struct{ err error }

func (e *syntaxError) Error() string { return e.err.Error() }

// parseYAML decodes one file into a case-preserving map; an empty file is an empty map.
// A file that is not YAML is a *syntaxError.
func parseYAML(data []byte) (map[string]any, error) {
	var raw any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, &syntaxError{err}
	}
	switch m := raw.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	case map[any]any:
		return nil, fmt.Errorf("top-level keys must be strings")
	}
	return nil, fmt.Errorf("the top level must be a mapping of keys")
}

// HasAccounts reports whether the config defines any account; with none, the caller runs
// the dev account (spec §2.4).
func (c *Config) HasAccounts() bool { return len(c.Accounts) > 0 }

// Directory builds the account directory: each account with its plan resolved and the
// SHA-256 of every api_keys entry plus every api_key_sha256 digest, the operators' keys
// likewise, and the plans accounts created through the admin API may name.
func (c *Config) Directory(extraOperators ...engine.OperatorSpec) (*engine.Directory, error) {
	specs := make([]engine.AccountSpec, 0, len(c.Accounts))
	for _, a := range c.Accounts {
		plan, ok := c.Plans[a.Plan]
		if !ok {
			return nil, fmt.Errorf("config: account %q: unknown plan %q", a.ID, a.Plan)
		}
		hashes, err := keyHashes(a.APIKeys, a.APIKeySHA256)
		if err != nil {
			return nil, fmt.Errorf("config: account %q: %w", a.ID, err)
		}
		specs = append(specs, engine.AccountSpec{ID: a.ID, Plan: plan, KeyHashes: hashes})
	}
	ops, err := c.OperatorSpecs()
	if err != nil {
		return nil, err
	}
	return engine.NewDirectoryWith(specs, engine.DirectoryOptions{Operators: append(ops, extraOperators...), Plans: c.Plans})
}

// OperatorSpecs returns the configured operators with their key hashes.
func (c *Config) OperatorSpecs() ([]engine.OperatorSpec, error) {
	var ops []engine.OperatorSpec
	for _, o := range c.Operators {
		hashes, err := keyHashes(o.APIKeys, o.APIKeySHA256)
		if err != nil {
			return nil, fmt.Errorf("config: operator %q: %w", o.ID, err)
		}
		ops = append(ops, engine.OperatorSpec{ID: o.ID, KeyHashes: hashes})
	}
	return ops, nil
}

func keyHashes(plain, sums []string) ([][32]byte, error) {
	var out [][32]byte
	for _, k := range plain {
		out = append(out, engine.HashKey(k))
	}
	for _, h := range sums {
		var sum [32]byte
		if n, err := hex.Decode(sum[:], []byte(h)); err != nil || n != len(sum) || len(h) != 2*len(sum) {
			return nil, fmt.Errorf("api_key_sha256 entry is not 64 hex characters")
		}
		out = append(out, sum)
	}
	return out, nil
}

//go:embed example.yaml
var exampleYAML string

// Example returns a config file that lists every key with its default and comments.
func Example() string { return exampleYAML }
