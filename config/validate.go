package config

import (
	"encoding/hex"
	"fmt"
	"maps"
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

// validate checks values and combinations; explicit reports whether a key path was given
// in a file or the environment (not just defaulted).
func validate(c *Config, explicit func(string) bool, errs *errList) {
	checkPair(errs, "http.tls", c.HTTP.TLS.CertFile, c.HTTP.TLS.KeyFile)
	validateHTTPTimeouts(&c.HTTP, errs)
	checkPair(errs, "grpc.tls", c.GRPC.TLS.CertFile, c.GRPC.TLS.KeyFile)
	if c.GRPC.TLS.ClientCAFile != "" && c.GRPC.TLS.CertFile == "" {
		errs.add("grpc.tls.client_ca_file", "needs grpc.tls.cert_file and grpc.tls.key_file (mTLS is on top of TLS)")
	}

	validateRedis(&c.Store.Redis, explicit, errs)

	if c.Shutdown.Timeout > 0 && c.Shutdown.DrainDelay >= 0 && c.Shutdown.DrainDelay >= c.Shutdown.Timeout {
		errs.add("shutdown.drain_delay", "must be below shutdown.timeout (%s)", c.Shutdown.Timeout)
	}
	if t := &c.Tracing; (t.Exporter == "otlp_grpc" || t.Exporter == "otlp_http") && t.Endpoint == "" {
		errs.add("tracing.endpoint", "is required with tracing.exporter %s", t.Exporter)
	}
	if c.Webhooks.BackoffBase > 0 && c.Webhooks.BackoffMax < c.Webhooks.BackoffBase {
		errs.add("webhooks.backoff_max", "must be at least webhooks.backoff_base (%s)", c.Webhooks.BackoffBase)
	}
	// log.level and log.format are checked in any letter case (keys.go); the service
	// reads them in lower case.
	c.Log.Level, c.Log.Format = strings.ToLower(c.Log.Level), strings.ToLower(c.Log.Format)

	validateAccounts(c, errs)
	validateEnvoy(c, errs)
}

func validateHTTPTimeouts(h *HTTP, errs *errList) {
	if h.ReadHeaderTimeout > 0 && h.ReadTimeout > 0 && h.ReadTimeout < h.ReadHeaderTimeout {
		errs.add("http.read_timeout", "must be at least http.read_header_timeout (%s): it bounds the whole request, headers included", h.ReadHeaderTimeout)
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
	if sentinel {
		if r.Sentinel.Master == "" {
			errs.add(p+"sentinel.master", "is required with store.redis.sentinel.addrs")
		}
		if len(r.Sentinel.Addrs) == 0 {
			errs.add(p+"sentinel.addrs", "is required with store.redis.sentinel.master")
		}
	}
	checkPair(errs, p+"tls", r.TLS.CertFile, r.TLS.KeyFile)
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
	checkPair(errs, "envoy.xds.tls", e.XDS.TLS.CertFile, e.XDS.TLS.KeyFile)
	if e.XDS.Address == "" && (e.XDS.TLS.CAFile != "" || e.XDS.TLS.CertFile != "" || e.XDS.TLS.ServerName != "") {
		errs.add("envoy.xds.tls", "needs envoy.xds.address")
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
