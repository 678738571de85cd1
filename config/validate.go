package config

import (
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/internal/suggest"
	"github.com/spf13/viper"
)

// applyEnv sets every LEASH_<PATH> variable of environ on v and returns the key paths set.
// Unknown LEASH_ variables are errors, except DevAPIKeyEnv and LEASH_TEST_*.
func applyEnv(v *viper.Viper, root *node, environ []string, errs *errList) map[string]bool {
	byEnv := map[string]string{}
	kinds := map[string]*node{}
	root.leaves("", func(path string, n *node) {
		byEnv[envName(path)] = path
		kinds[path] = n
	})
	values := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) {
			continue
		}
		values[name] = value // a later duplicate wins
	}
	set := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		value := values[name]
		if name == DevAPIKeyEnv || name == DevOperatorKeyEnv || slices.Contains(CLIVariables, name) || strings.HasPrefix(name, envPrefix+"TEST_") {
			continue
		}
		path, ok := byEnv[name]
		if !ok {
			rest := strings.TrimPrefix(name, envPrefix)
			if rest == "PLANS" || rest == "ACCOUNTS" || rest == "OPERATORS" || strings.HasPrefix(rest, "PLANS_") ||
				strings.HasPrefix(rest, "ACCOUNTS_") || strings.HasPrefix(rest, "OPERATORS_") || strings.HasPrefix(rest, "ENVOY_DOMAINS") {
				errs.addRaw(fmt.Sprintf("environment variable %s: plans, accounts, operators and envoy.domains can only be set in a config file", name))
			} else {
				errs.addRaw(fmt.Sprintf("environment variable %s names no config key%s (LEASH_ variables are the key path in upper case with _ for ., e.g. LEASH_STORE_REDIS_URL)", name, didYouMean(name, byEnv)))
			}
			continue
		}
		val, err := parseEnv(value, kinds[path].kind)
		if err != nil {
			errs.addAt(path, fmt.Sprintf("%s (environment variable %s): %v", path, name, err))
			continue
		}
		v.Set(viperKey(path), val)
		set[path] = true
	}
	return set
}

// CLIVariables are the LEASH_ variables of the command line and the README, not of the
// service: the CLI's URL and keys (spec §13.5) and LEASH_SRC, a checkout of this
// repository. The loader leaves them alone, so a shell that exported them still starts
// leash serve (spec §10.1).
var CLIVariables = []string{"LEASH_URL", "LEASH_API_KEY", "LEASH_OPERATOR_KEY", "LEASH_SRC"}

// didYouMean is ", did you mean LEASH_X?" when an environment variable nearly names a key,
// a reserved variable or one of the command line's, else "".
func didYouMean(name string, byEnv map[string]string) string {
	names := slices.Sorted(maps.Keys(byEnv))
	reserved := append([]string{DevAPIKeyEnv, DevOperatorKeyEnv}, CLIVariables...)
	switch near := suggest.Closest(name, append(names, reserved...)); {
	case near == "":
		return ""
	case slices.Contains(CLIVariables, near):
		return fmt.Sprintf(": did you mean %s (%s)?", near, cliVariableRole(near))
	default:
		return fmt.Sprintf(": did you mean %s?", near)
	}
}

// cliVariableRole says what one of CLIVariables is for.
func cliVariableRole(name string) string {
	switch name {
	case "LEASH_URL":
		return "the command line's URL"
	case "LEASH_SRC":
		return "the README's checkout of Leash"
	}
	return "the command line's key"
}

func parseEnv(s string, k kind) (any, error) {
	switch k {
	case kString:
		return s, nil
	case kInt:
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("expected an integer, got %q", s)
		}
		return i, nil
	case kBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("expected a boolean (true or false), got %q", s)
		}
		return b, nil
	case kFloat:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("expected a number, got %q", s)
		}
		return f, nil
	case kDuration:
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("expected a duration such as \"2s\" or \"500ms\", got %q", s)
		}
		return d, nil
	case kStrings:
		out := []string{}
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot be set from the environment")
}

// mergePlans lays the configured plans over the built-in ones, field by field.
func mergePlans(docs map[string]planDoc, st *fileState, errs *errList) map[string]engine.Plan {
	plans := engine.BuiltinPlans()
	names := map[string]bool{}
	for n := range docs {
		names[n] = true
	}
	for n := range st.plans {
		names[n] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		doc := docs[name]
		path := "plans." + name
		set := func(field string) bool { return st.set[path+"."+field] }
		plan, builtin := plans[name]
		if !builtin {
			plan = engine.Plan{Name: name}
			for _, f := range []string{"algorithms", "monthly_quota"} {
				if !set(f) {
					errs.add(path+"."+f, "required for a plan that is not built in (built-in plans: free, pro, scale)")
				}
			}
		}
		if set("algorithms") {
			var algs engine.AlgorithmSet
			for i, s := range doc.Algorithms {
				a, ok := engine.ParseAlgorithm(s)
				switch {
				case !ok:
					errs.add(index(path+".algorithms", i), "unknown algorithm %q (use fixed_window, sliding_window or token_bucket)", s)
				case a == engine.ConcurrentLimit:
					errs.add(index(path+".algorithms", i), "concurrent_limit is not a rate algorithm; set concurrent_limit: true on the plan instead")
				default:
					algs = algs.With(a)
				}
			}
			plan.Algorithms = algs
		}
		if doc.ConcurrentLimit != nil {
			plan.ConcurrentLimit = *doc.ConcurrentLimit
		}
		if doc.Webhooks != nil {
			plan.Webhooks = *doc.Webhooks
		}
		if doc.MonthlyQuota != nil {
			if *doc.MonthlyQuota < 0 {
				errs.add(path+".monthly_quota", "must be 0 or more")
			}
			plan.MonthlyQuota = *doc.MonthlyQuota
		}
		switch {
		case st.hardCapNull[name]:
			plan.HardCap = nil
		case doc.HardCap != nil:
			if *doc.HardCap < 1 {
				errs.add(path+".hard_cap", "must be 1 or more, or null for no cap")
			}
			hc := *doc.HardCap
			plan.HardCap = &hc
		}
		plans[name] = plan
	}
	return plans
}

// validateDisk checks store.disk (spec §11.5).
func validateDisk(d *Disk, errs *errList) {
	if strings.TrimSpace(d.Path) == "" {
		errs.add("store.disk.path", "must name a directory")
	}
	if d.SyncInterval < 0 {
		errs.add("store.disk.sync_interval", "must be 0 or more")
	}
	if d.MaxEntries < 1 {
		errs.add("store.disk.max_entries", "must be 1 or more")
	}
}

// validate checks values and combinations; explicit reports whether a key path was given
// in a file or the environment (not just defaulted).
func validate(c *Config, explicit func(string) bool, errs *errList) {
	checkAddr(errs, "http.addr", c.HTTP.Addr, false)
	checkAddr(errs, "grpc.addr", c.GRPC.Addr, true)
	checkAddr(errs, "admin.addr", c.Admin.Addr, false)
	checkPair(errs, "http.tls", c.HTTP.TLS.CertFile, c.HTTP.TLS.KeyFile)
	validateHTTPTimeouts(&c.HTTP, errs)
	checkPair(errs, "grpc.tls", c.GRPC.TLS.CertFile, c.GRPC.TLS.KeyFile)
	if c.GRPC.TLS.ClientCAFile != "" && c.GRPC.TLS.CertFile == "" {
		errs.add("grpc.tls.client_ca_file", "needs grpc.tls.cert_file and grpc.tls.key_file (mTLS is on top of TLS)")
	}

	switch c.Store.Backend {
	case "disk", "memory", "redis":
	default:
		errs.add("store.backend", "must be disk, memory or redis, got %q", c.Store.Backend)
	}
	validateDisk(&c.Store.Disk, errs)
	validateRedis(&c.Store.Redis, explicit, errs)
	if c.Store.Memory.MaxEntries < 1 {
		errs.add("store.memory.max_entries", "must be 1 or more")
	}

	checkPositive(errs, "shutdown.timeout", c.Shutdown.Timeout)
	if c.Shutdown.DrainDelay < 0 {
		errs.add("shutdown.drain_delay", "must be 0 or more")
	} else if c.Shutdown.Timeout > 0 && c.Shutdown.DrainDelay >= c.Shutdown.Timeout {
		errs.add("shutdown.drain_delay", "must be below shutdown.timeout (%s)", c.Shutdown.Timeout)
	}

	if r := c.Metrics.NearLimitRatio; !(r > 0 && r <= 1) {
		errs.add("metrics.near_limit_ratio", "must be above 0 and at most 1, got %v", r)
	}
	for i, ns := range c.Metrics.Namespaces {
		if !engine.ValidNamespace(ns) {
			errs.add(index("metrics.namespaces", i), "%q is not a namespace", ns)
		}
	}
	switch t := &c.Tracing; t.Exporter {
	case "none":
	case "otlp_grpc", "otlp_http":
		if t.Endpoint == "" {
			errs.add("tracing.endpoint", "is required with tracing.exporter %s", t.Exporter)
		}
	default:
		errs.add("tracing.exporter", "must be none, otlp_grpc or otlp_http, got %q", t.Exporter)
	}
	if r := c.Tracing.SamplingRatio; !(r >= 0 && r <= 1) {
		errs.add("tracing.sampling_ratio", "must be from 0 to 1, got %v", r)
	}
	if c.Tracing.ServiceName == "" {
		errs.add("tracing.service_name", "must not be empty")
	}

	checkPositive(errs, "webhooks.timeout", c.Webhooks.Timeout)
	if c.Webhooks.MaxAttempts < 1 {
		errs.add("webhooks.max_attempts", "must be 1 or more")
	}
	checkPositive(errs, "webhooks.backoff_base", c.Webhooks.BackoffBase)
	if c.Webhooks.BackoffMax < c.Webhooks.BackoffBase {
		errs.add("webhooks.backoff_max", "must be at least webhooks.backoff_base (%s)", c.Webhooks.BackoffBase)
	}

	switch l := strings.ToLower(c.Log.Level); l {
	case "debug", "info", "warn", "error":
		c.Log.Level = l
	default:
		errs.add("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	switch f := strings.ToLower(c.Log.Format); f {
	case "json", "text":
		c.Log.Format = f
	default:
		errs.add("log.format", "must be json or text, got %q", c.Log.Format)
	}

	validateAccounts(c, errs)
	validateEnvoy(c, errs)
}

func validateHTTPTimeouts(h *HTTP, errs *errList) {
	checkPositive(errs, "http.read_header_timeout", h.ReadHeaderTimeout)
	checkPositive(errs, "http.read_timeout", h.ReadTimeout)
	checkPositive(errs, "http.write_timeout", h.WriteTimeout)
	checkPositive(errs, "http.idle_timeout", h.IdleTimeout)
	for i, p := range h.TrustedProxies {
		if _, ok := parseProxy(p); !ok {
			errs.add(index("http.trusted_proxies", i), "%q is not a CIDR (e.g. 10.0.0.0/8) or an IP address", p)
		}
	}
	if h.ReadHeaderTimeout > 0 && h.ReadTimeout > 0 && h.ReadTimeout < h.ReadHeaderTimeout {
		errs.add("http.read_timeout", "must be at least http.read_header_timeout (%s): it bounds the whole request, headers included", h.ReadHeaderTimeout)
	}
}

func checkAddr(errs *errList, key, addr string, emptyOK bool) {
	if addr == "" {
		if !emptyOK {
			errs.add(key, "must not be empty")
		}
		return
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		errs.add(key, "must be host:port or :port, got %q", addr)
	}
}

func checkPair(errs *errList, key, cert, keyFile string) {
	if (cert == "") != (keyFile == "") {
		errs.add(key, "cert_file and key_file must be set together")
	}
}

func validateRedis(r *Redis, explicit func(string) bool, errs *errList) {
	const p = "store.redis."
	urlSet := explicit(p + "url")
	cluster := len(r.ClusterAddrs) > 0
	sentinel := r.Sentinel.Master != "" || len(r.Sentinel.Addrs) > 0
	switch {
	case urlSet && cluster:
		errs.add(p+"cluster_addrs", "set either store.redis.url or store.redis.cluster_addrs, not both")
	case urlSet && sentinel:
		errs.add(p+"sentinel", "set either store.redis.url or store.redis.sentinel, not both")
	case cluster && sentinel:
		errs.add(p+"sentinel", "set either store.redis.cluster_addrs or store.redis.sentinel, not both")
	}
	if !cluster && !sentinel {
		// The URL is never echoed: it may carry a password.
		u, err := url.Parse(r.URL)
		switch {
		case err != nil:
			errs.add(p+"url", "is not a valid URL")
		case u.Scheme != "redis" && u.Scheme != "rediss":
			errs.add(p+"url", "scheme must be redis:// or rediss://")
		case u.Host == "":
			errs.add(p+"url", "must name a host, e.g. redis://127.0.0.1:6379/0")
		}
	}
	for i, a := range r.ClusterAddrs {
		checkAddr(errs, index(p+"cluster_addrs", i), a, false)
	}
	if sentinel {
		if r.Sentinel.Master == "" {
			errs.add(p+"sentinel.master", "is required with store.redis.sentinel.addrs")
		}
		if len(r.Sentinel.Addrs) == 0 {
			errs.add(p+"sentinel.addrs", "is required with store.redis.sentinel.master")
		}
		for i, a := range r.Sentinel.Addrs {
			checkAddr(errs, index(p+"sentinel.addrs", i), a, false)
		}
	}
	if r.Prefix == "" {
		errs.add(p+"prefix", "must not be empty")
	} else if strings.ContainsAny(r.Prefix, "{}") || strings.IndexFunc(r.Prefix, unicode.IsSpace) >= 0 {
		errs.add(p+"prefix", "must not contain braces (they would change the Redis Cluster hash tag) or spaces")
	}
	checkPair(errs, p+"tls", r.TLS.CertFile, r.TLS.KeyFile)
	if r.WaitReplicas < 0 {
		errs.add(p+"wait_replicas", "must be 0 or more")
	}
	if r.PoolSize < 0 {
		errs.add(p+"pool_size", "must be 0 (the driver's default) or more")
	}
	checkPositive(errs, p+"dial_timeout", r.DialTimeout)
	checkPositive(errs, p+"read_timeout", r.ReadTimeout)
	checkPositive(errs, p+"write_timeout", r.WriteTimeout)
}

// checkPositive reports key unless d is more than 0.
func checkPositive(errs *errList, key string, d time.Duration) {
	if d <= 0 {
		errs.add(key, "must be more than 0")
	}
}

func validateAccounts(c *Config, errs *errList) {
	ids := map[string]int{}
	keys := map[[32]byte]string{} // key hash → "accounts[i]" that holds it
	for i := range c.Accounts {
		a := &c.Accounts[i]
		path := index("accounts", i)
		validateID(path, "account", "accounts", a.ID, i, ids, errs)
		if a.Plan == "" {
			errs.add(path+".plan", "is required")
		} else if _, ok := c.Plans[a.Plan]; !ok {
			errs.add(path+".plan", "unknown plan %q (known: %s)", a.Plan, strings.Join(slices.Sorted(maps.Keys(c.Plans)), ", "))
		}
		validateKeys(path, fmt.Sprintf("%s (%q)", path, a.ID), a.APIKeys, a.APIKeySHA256, keys, errs)
	}
	validateOperators(c, keys, errs)
}

// validateID checks the id of entry i of list (accounts or operators): present, of the
// form of spec §2.1, and not that of an earlier entry; ids maps each id to its entry.
func validateID(path, kind, list, id string, i int, ids map[string]int, errs *errList) {
	switch {
	case id == "":
		errs.add(path+".id", "is required")
	case !engine.ValidAccountID(id):
		errs.add(path+".id", "%q must match [a-z0-9][a-z0-9_-]{0,63}", id)
	default:
		if j, dup := ids[id]; dup {
			errs.add(path+".id", "%s %q is already defined by %s[%d]", kind, id, list, j)
		} else {
			ids[id] = i
		}
	}
}

// validateKeys checks one holder's keys in both forms (spec §2.2), normalising digests to
// lower case; keys maps each key's hash to the holder that claimed it first.
func validateKeys(path, holder string, plain, sums []string, keys map[[32]byte]string, errs *errList) {
	claim := func(keyPath string, h [32]byte) {
		if other, dup := keys[h]; dup {
			errs.add(keyPath, "this API key is already used by %s", other)
			return
		}
		keys[h] = holder
	}
	for j, k := range plain {
		kp := index(path+".api_keys", j)
		if k == "" {
			errs.add(kp, "must not be empty")
			continue
		}
		if strings.IndexFunc(k, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			errs.add(kp, "must not contain spaces or control characters (it could not be sent as a Bearer token)")
			continue
		}
		claim(kp, engine.HashKey(k))
	}
	for j, h := range sums {
		kp := index(path+".api_key_sha256", j)
		var sum [32]byte
		lower := strings.ToLower(h)
		if len(h) != 64 {
			errs.add(kp, "must be 64 hex characters (a SHA-256), got %d characters", len(h))
			continue
		}
		if _, err := hex.Decode(sum[:], []byte(lower)); err != nil {
			errs.add(kp, "must be 64 hex characters (a SHA-256)")
			continue
		}
		sums[j] = lower
		claim(kp, sum)
	}
}

// validateOperators checks operators as accounts are checked (spec §15.1): valid unique
// ids, keys in either form, no key shared with an account or another operator.
func validateOperators(c *Config, keys map[[32]byte]string, errs *errList) {
	ids := map[string]int{}
	for i := range c.Operators {
		o := &c.Operators[i]
		path := index("operators", i)
		validateID(path, "operator", "operators", o.ID, i, ids, errs)
		validateKeys(path, fmt.Sprintf("%s (%q)", path, o.ID), o.APIKeys, o.APIKeySHA256, keys, errs)
	}
}

func validateEnvoy(c *Config, errs *errList) {
	e := &c.Envoy
	checkAddr(errs, "envoy.json_addr", e.JSONAddr, true)
	checkAddr(errs, "envoy.xds.address", e.XDS.Address, true)
	if e.XDS.NodeID == "" {
		errs.add("envoy.xds.node_id", "must not be empty")
	}
	checkPair(errs, "envoy.xds.tls", e.XDS.TLS.CertFile, e.XDS.TLS.KeyFile)
	if e.XDS.Address == "" && (e.XDS.TLS.CAFile != "" || e.XDS.TLS.CertFile != "" || e.XDS.TLS.ServerName != "") {
		errs.add("envoy.xds.tls", "needs envoy.xds.address")
	}
	for key, name := range map[string]string{"limit": e.HeaderNames.Limit, "remaining": e.HeaderNames.Remaining, "reset": e.HeaderNames.Reset} {
		if !validHeaderName(name) {
			errs.add("envoy.header_names."+key, "must be an HTTP header name (letters, digits and -), got %q", name)
		}
	}
	if e.LocalCache.MaxEntries < 0 {
		errs.add("envoy.local_cache.max_entries", "must be 0 (off) or more")
	}
	if q := e.RLQS.ReportingInterval; q < 10*time.Millisecond || q > 10*time.Minute {
		errs.add("envoy.rlqs.reporting_interval", "must be 10ms to 10m")
	}
	if n := e.RLQS.TTLIntervals; n < 1 || n > 100 {
		errs.add("envoy.rlqs.ttl_intervals", "must be 1 to 100")
	}
	if e.RLQS.MaxBucketsPerStream < 1 {
		errs.add("envoy.rlqs.max_buckets_per_stream", "must be 1 or more")
	}
	if e.RLQS.MaxBucketsPerAccount < 1 {
		errs.add("envoy.rlqs.max_buckets_per_account", "must be 1 or more")
	}
	for i, p := range c.Envoy.ConfigPaths {
		if strings.TrimSpace(p) == "" {
			errs.add(index("envoy.config_paths", i), "must not be empty")
		}
	}
	exists := func(id string) bool {
		if !c.HasAccounts() {
			return id == DevAccountID
		}
		return slices.ContainsFunc(c.Accounts, func(a Account) bool { return a.ID == id })
	}
	hint := func() string {
		if !c.HasAccounts() {
			return "no accounts are configured, so only the dev account exists"
		}
		return "define it under accounts"
	}
	if d := c.Envoy.DefaultAccount; d != "" && !exists(d) {
		errs.add("envoy.default_account", "unknown account %q (%s)", d, hint())
	}
	for _, name := range slices.Sorted(maps.Keys(c.Envoy.Domains)) {
		acct := c.Envoy.Domains[name].Account
		path := "envoy.domains." + name + ".account"
		switch {
		case acct == "":
			errs.add(path, "is required")
		case !exists(acct):
			errs.add(path, "unknown account %q (%s)", acct, hint())
		}
	}
}

// validHeaderName reports a non-empty HTTP token of letters, digits and '-'.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
