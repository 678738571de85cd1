package config

import (
	"fmt"
	"strings"
	"time"
)

// key describes one configuration key: its path, type and default, and its row of the
// key table of spec §10.2. keys lists them all; the schema that loading, validation and
// the environment overlay use, the LEASH_ variables and the docs' key table all come from
// it.
type key struct {
	// path is the dotted key path; "<name>" stands for a plan's name, "<domain>" for an
	// Envoy domain, and "[]" ends a list of objects.
	path string
	kind kind
	// def is the default as a YAML file writes it (a duration as a string such as "2s");
	// nil when the zero value.
	def any
	// doc is the key's meaning in the key table; "" puts the key in the row of the key
	// before it.
	doc string
	// shown is the table's default column when it says more than def.
	shown string
	// check is the rule of the value on its own, each that of every element of a list
	// (rules.go); nil accepts any value of the kind. Rules relating keys to one another
	// are in validate.go.
	check, each rule
}

// keys returns every configuration key (spec §10.2), in the order of the key table. It is
// built on each call, so there is no package-level mutable state.
func keys() []key {
	return []key{
		{path: "http.addr", kind: kString, def: ":8080", doc: "`/v1` listener, `host:port` or `:port`", check: address(false)},
		{path: "http.read_header_timeout", kind: kDuration, def: "5s", doc: "a client slower to send its headers is disconnected", check: positive},
		{path: "http.read_timeout", kind: kDuration, def: "30s", doc: "bound on reading a whole request (headers and body); at least `read_header_timeout`", check: positive},
		{path: "http.write_timeout", kind: kDuration, def: "30s", doc: "bound on writing a response, from the end of the request headers", check: positive},
		{path: "http.idle_timeout", kind: kDuration, def: "120s", doc: "keep-alive connections idle this long are closed", check: positive},
		{path: "http.trusted_proxies", kind: kStrings, doc: "CIDRs (or single addresses) of the proxies in front of Leash whose `X-Forwarded-For` or `Forwarded` header names the client (§15.7); anything else is a start-up error naming the entry", each: proxy},
		{path: "http.tls.cert_file", kind: kString, doc: "both set: HTTPS (§12.5)"},
		{path: "http.tls.key_file", kind: kString},
		{path: "console.enabled", kind: kBool, def: true, doc: "serve the web console at `/console/` on the `http.addr` listener; `false` removes its routes (§16)"},
		{path: "grpc.addr", kind: kString, def: ":8081", doc: "Envoy listener; `\"\"` turns it off", check: address(true)},
		{path: "grpc.tls.cert_file", kind: kString, doc: "both set: gRPC over TLS"},
		{path: "grpc.tls.key_file", kind: kString},
		{path: "grpc.tls.client_ca_file", kind: kString, doc: "with TLS: clients must present a certificate signed by this CA (mTLS)"},
		{path: "admin.addr", kind: kString, def: ":9090", doc: "admin listener (§12.1)", check: address(false)},
		{path: "admin.pprof", kind: kBool, def: false, doc: "serve `/debug/pprof/` on the admin listener"},
		{path: "store.backend", kind: kString, def: "disk", doc: "`disk`, `memory` or `redis`", check: oneOf(false, "disk", "memory", "redis")},
		{path: "store.redis.url", kind: kString, def: "redis://127.0.0.1:6379/0", doc: "single node; `rediss://` for TLS; used when neither of the next two is set"},
		{path: "store.redis.cluster_addrs", kind: kStrings, doc: "Redis Cluster seed nodes (`host:port` list)", each: address(false)},
		{path: "store.redis.sentinel.master", kind: kString, doc: "Sentinel: the master's name and the sentinels"},
		{path: "store.redis.sentinel.addrs", kind: kStrings, each: address(false)},
		{path: "store.redis.prefix", kind: kString, def: "leash", doc: "starts every key, so deployments can share one Redis; no braces or spaces", check: redisPrefix},
		{path: "store.redis.username", kind: kString, doc: "ACL user and password, overriding any in the URL"},
		{path: "store.redis.password", kind: kString},
		{path: "store.redis.wait_replicas", kind: kInt, def: 0, doc: "replicas a lease acquisition waits for (§11.3)", check: atLeast(0, "")},
		{path: "store.redis.reservations", kind: kBool, def: true, doc: "hot window counters are decided from local slices (§4.13); `false` decides every request in Redis"},
		{path: "store.redis.dial_timeout", kind: kDuration, def: "500ms", doc: "bound on connecting", check: positive},
		{path: "store.redis.read_timeout", kind: kDuration, def: "500ms", doc: "bound on every store operation end to end (§3.8)", check: positive},
		{path: "store.redis.write_timeout", kind: kDuration, def: "500ms", doc: "bound on writing a command", check: positive},
		{path: "store.redis.pool_size", kind: kInt, def: 0, doc: "pooled connections per node; `0` = the driver's default", check: atLeast(0, "the driver's default")},
		{path: "store.redis.tls.ca_file", kind: kString, doc: "any set: TLS 1.2 or later to every node, verified against `ca_file` (the system's roots when empty), with the client certificate `cert_file` and `key_file` (set together); read at start-up"},
		{path: "store.redis.tls.cert_file", kind: kString},
		{path: "store.redis.tls.key_file", kind: kString},
		{path: "store.disk.path", kind: kString, def: "leash-data", doc: "directory of the disk store (§11.5), relative to the working directory; one process at a time", check: dirPath},
		{path: "store.disk.sync_interval", kind: kDuration, def: "1s", doc: "the disk store writes its log to stable storage at least this often; `0` at every write (§11.5)", check: notNegative},
		{path: "store.disk.max_entries", kind: kInt, def: 1_000_000, doc: "live counters and leases the disk store holds (§11.5)", check: atLeast(1, "")},
		{path: "store.memory.max_entries", kind: kInt, def: 1_000_000, doc: "live counters and leases the memory store holds (§11.1)", check: atLeast(1, "")},
		{path: "shutdown.drain_delay", kind: kDuration, def: "2s", doc: "time `/readyz` answers 503 before the listeners close (§12.3)", check: notNegative},
		{path: "shutdown.timeout", kind: kDuration, def: "10s", doc: "the whole shutdown budget; `drain_delay` must be below it", check: positive},
		{path: "plans.<name>.algorithms", kind: kStrings, shown: "see §2.3", doc: "rate algorithms the plan allows"},
		{path: "plans.<name>.concurrent_limit", kind: kBool, shown: "see §2.3", doc: "leases allowed"},
		{path: "plans.<name>.webhooks", kind: kBool, shown: "see §2.3", doc: "webhooks allowed"},
		{path: "plans.<name>.monthly_quota", kind: kInt, shown: "see §2.3", doc: "soft monthly quota (§7.4)"},
		{path: "plans.<name>.hard_cap", kind: kHardCap, shown: "see §2.3", doc: "monthly hard cap, `null` for none (§7.5)"},
		{path: "accounts[].id", kind: kString, shown: "(required)", doc: "account id (§2.1)"},
		{path: "accounts[].plan", kind: kString, shown: "(required)", doc: "plan name"},
		{path: "accounts[].api_keys", kind: kStrings, doc: "plaintext keys (§2.2)"},
		{path: "accounts[].api_key_sha256", kind: kStrings, doc: "SHA-256 digests of keys (§2.2)"},
		{path: "operators[].id", kind: kString, shown: "(required)", doc: "operator id, `[a-z0-9][a-z0-9_-]{0,63}`, unique among operators (§15.1)"},
		{path: "operators[].api_keys", kind: kStrings, doc: "plaintext operator keys (as §2.2)"},
		{path: "operators[].api_key_sha256", kind: kStrings, doc: "SHA-256 digests of operator keys (as §2.2)"},
		{path: "envoy.config_paths", kind: kStrings, doc: "descriptor files and folders (§9.2)", each: notBlank},
		{path: "envoy.default_account", kind: kString, shown: "none (`dev` without a config file)", doc: "account of domains not in `envoy.domains` (§9.1)"},
		{path: "envoy.domains.<domain>.account", kind: kString, doc: "account a domain counts against"},
		{path: "envoy.domains.<domain>.overdraft", kind: kBool, doc: "the domain's own `envoy.overdraft`"},
		{path: "envoy.response_headers", kind: kBool, def: true, doc: "`RateLimit-*` and `Retry-After` headers on Envoy replies (§9.7)"},
		{path: "envoy.header_names.limit", kind: kString, def: "RateLimit-Limit", doc: "the names of those headers (§9.7)", check: headerName},
		{path: "envoy.header_names.remaining", kind: kString, def: "RateLimit-Remaining", check: headerName},
		{path: "envoy.header_names.reset", kind: kString, def: "RateLimit-Reset", check: headerName},
		{path: "envoy.shadow_mode", kind: kBool, def: false, doc: "global shadow mode: an OVER_LIMIT overall code is answered OK (§9.7)"},
		{path: "envoy.quota_mode", kind: kBool, def: false, doc: "every descriptor in quota mode (§9.7)"},
		{path: "envoy.overdraft", kind: kBool, def: false, doc: "count the hits of an over-limit descriptor, as the peer does (§4.12, §9.3)"},
		{path: "envoy.response_dynamic_metadata", kind: kBool, def: false, doc: "`dynamic_metadata` on replies (§9.7)"},
		{path: "envoy.local_cache.max_entries", kind: kInt, def: 0, shown: "`0` (off)", doc: "bound of the over-limit cache (§9.13)", check: atLeast(0, "off")},
		{path: "envoy.json_addr", kind: kString, shown: "none (off)", doc: "listener of the peer's `POST /json` and `GET /healthcheck` (§9.15)", check: address(true)},
		{path: "envoy.xds.address", kind: kString, shown: "none (off)", doc: "xDS management server of descriptor configs, `host:port` (§9.14)", check: address(true)},
		{path: "envoy.xds.node_id", kind: kString, def: "leash", doc: "node id of the xDS requests", check: nonEmpty},
		{path: "envoy.xds.tls.ca_file", kind: kString, doc: "any set: TLS to the xDS server; CA, client certificate (mTLS), name to verify (§9.14)"},
		{path: "envoy.xds.tls.cert_file", kind: kString},
		{path: "envoy.xds.tls.key_file", kind: kString},
		{path: "envoy.xds.tls.server_name", kind: kString},
		{path: "envoy.rlqs.reporting_interval", kind: kDuration, def: "1s", doc: "reporting interval assumed for an RLQS stream until its reports show their own (§14.5)", check: durationRange(10*time.Millisecond, 10*time.Minute, "10ms to 10m")},
		{path: "envoy.rlqs.ttl_intervals", kind: kInt, def: 3, doc: "RLQS `assignment_time_to_live`, in reporting intervals (§14.5)", check: intRange(1, 100)},
		{path: "envoy.rlqs.max_buckets_per_stream", kind: kInt, def: 1000, doc: "RLQS buckets tracked per stream, and per account on one instance (§14.6)", check: atLeast(1, "")},
		{path: "envoy.rlqs.max_buckets_per_account", kind: kInt, def: 10_000, check: atLeast(1, "")},
		{path: "metrics.namespaces", kind: kStrings, doc: "namespaces with their own label on `leash_namespace_decisions_total`; every other is `other` (§12.2)", each: namespace},
		{path: "metrics.near_limit_ratio", kind: kFloat, def: 0.8, doc: "share of a limit from which allowed units count as near the limit (§12.2; the peer's `NEAR_LIMIT_RATIO`)", check: ratio(false)},
		{path: "tracing.exporter", kind: kString, def: "none", doc: "`none` (off), `otlp_grpc` or `otlp_http` (§12.8)", check: oneOf(false, "none", "otlp_grpc", "otlp_http")},
		{path: "tracing.endpoint", kind: kString, doc: "the OTLP receiver: `host:port`, or for `otlp_http` also a URL; required with an exporter"},
		{path: "tracing.insecure", kind: kBool, def: false, doc: "send spans without TLS"},
		{path: "tracing.sampling_ratio", kind: kFloat, def: 1.0, doc: "share of new traces sampled, 0 to 1; a caller's sampling decision is always followed", check: ratio(true)},
		{path: "tracing.service_name", kind: kString, def: "leash", doc: "`service.name` of the spans", check: nonEmpty},
		{path: "webhooks.allow_http", kind: kBool, def: false, doc: "admit `http://` webhook URLs (tests)"},
		{path: "webhooks.allow_private_targets", kind: kBool, def: false, doc: "admit loopback and private targets (tests; never link-local)"},
		{path: "webhooks.timeout", kind: kDuration, def: "10s", doc: "one delivery attempt", check: positive},
		{path: "webhooks.max_attempts", kind: kInt, def: 12, doc: "attempts per event before it is given up", check: atLeast(1, "")},
		{path: "webhooks.backoff_base", kind: kDuration, def: "1s", doc: "first retry delay, doubled per failure", check: positive},
		{path: "webhooks.backoff_max", kind: kDuration, def: "5m", doc: "largest retry delay; at least `backoff_base`"},
		{path: "log.level", kind: kString, def: "info", doc: "`debug`, `info`, `warn` or `error` (any letter case)", check: oneOf(true, "debug", "info", "warn", "error")},
		{path: "log.format", kind: kString, def: "json", doc: "`json` or `text`", check: oneOf(true, "json", "text")},
	}
}

// placeholderName returns the check of the free names a placeholder segment of a key
// path stands for ("<name>": plans, "<domain>": envoy.domains), and whether seg is one.
func placeholderName(seg string) (check func(string) string, ok bool) {
	switch seg {
	case "<name>":
		return checkPlanName, true
	case "<domain>":
		return checkDomainName, true
	}
	return nil, false
}

// schema returns the tree of every config key with its default, built from keys.
func schema() *node {
	root := object(map[string]*node{})
	for _, k := range keys() {
		segs := strings.Split(k.path, ".")
		n := root
		for i, seg := range segs[:len(segs)-1] {
			if _, ok := placeholderName(seg); ok {
				continue // its map is the segment before it
			}
			n = n.child(seg, segs[i+1])
		}
		n.fields[segs[len(segs)-1]] = leaf(k.kind, parseDefault(k))
	}
	return root
}

// child returns the object that holds the keys under seg, a key of the object n, adding
// it when new: a list of objects when seg ends in "[]", a map of objects when next is a
// placeholder.
func (n *node) child(seg, next string) *node {
	name, list := strings.CutSuffix(seg, "[]")
	c, ok := n.fields[name]
	if !ok {
		check, isMap := placeholderName(next)
		switch {
		case list:
			c = &node{kind: kList, elem: object(map[string]*node{})}
		case isMap:
			c = mapOf(object(map[string]*node{}), check)
		default:
			c = object(map[string]*node{})
		}
		n.fields[name] = c
	}
	if c.elem != nil {
		return c.elem
	}
	return c
}

// parseDefault returns k's default as the loader holds it: a duration parsed.
func parseDefault(k key) any {
	if s, ok := k.def.(string); ok && k.kind == kDuration {
		d, err := time.ParseDuration(s)
		if err != nil {
			panic(fmt.Sprintf("config: default of %s: %v", k.path, err))
		}
		return d
	}
	return k.def
}

// keyTable returns the key table of spec §10.2: one row per documented key, with the keys
// documented with it (after the first, by their last part when more than two).
func keyTable() string {
	var rows [][]key
	for _, k := range keys() {
		if k.doc == "" && len(rows) > 0 {
			rows[len(rows)-1] = append(rows[len(rows)-1], k)
			continue
		}
		rows = append(rows, []key{k})
	}
	var b strings.Builder
	b.WriteString("| key | default | meaning |\n|---|---|---|\n")
	for _, row := range rows {
		names := make([]string, len(row))
		defs := make([]string, len(row))
		same := true
		for i, k := range row {
			names[i] = "`" + k.path + "`"
			if i > 0 && len(row) > 2 {
				names[i] = "`" + k.path[strings.LastIndex(k.path, "."):] + "`"
			}
			defs[i] = "none"
			if k.def != nil {
				defs[i] = fmt.Sprintf("`%v`", k.def)
			}
			same = same && defs[i] == defs[0]
		}
		def := strings.Join(defs, ", ")
		switch {
		case row[0].shown != "":
			def = row[0].shown
		case same:
			def = defs[0]
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", strings.Join(names, ", "), def, row[0].doc)
	}
	return b.String()
}
