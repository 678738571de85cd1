package config

import (
	"strings"
	"testing"
)

// badValues holds, for every key with a rule of its own, a value the rule refuses (as a
// LEASH_ variable writes it), what the problem must say, and another variable the case
// needs, if any.
// file, when set, is a config file to load instead of the variable (a list a variable
// cannot write).
type badValue struct{ value, want, with, file string }

var badValues = map[string]badValue{
	"http.addr":                          {value: "8080", want: `must be host:port or :port, got "8080"`},
	"http.read_header_timeout":           {value: "0s", want: "must be more than 0"},
	"http.read_timeout":                  {value: "-1s", want: "must be more than 0"},
	"http.write_timeout":                 {value: "0s", want: "must be more than 0"},
	"http.idle_timeout":                  {value: "0s", want: "must be more than 0"},
	"http.trusted_proxies":               {value: "10.0.0.0/8,nope", want: `http.trusted_proxies[1]`},
	"grpc.addr":                          {value: "nohost", want: `must be host:port or :port, got "nohost"`},
	"admin.addr":                         {value: "", want: "must not be empty"},
	"store.backend":                      {value: "mongo", want: `must be disk, memory or redis, got "mongo"`},
	"store.disk.path":                    {value: " ", want: "must name a directory"},
	"store.disk.sync_interval":           {value: "-1s", want: "must be 0 or more"},
	"store.disk.max_entries":             {value: "0", want: "must be 1 or more"},
	"store.redis.cluster_addrs":          {value: "127.0.0.1:7000,bad", want: `store.redis.cluster_addrs[1]`},
	"store.redis.sentinel.addrs":         {value: "bad", want: `store.redis.sentinel.addrs[0]`, with: "LEASH_STORE_REDIS_SENTINEL_MASTER=m"},
	"store.redis.prefix":                 {value: "a{b}", want: "must not contain braces"},
	"store.redis.wait_replicas":          {value: "-1", want: "must be 0 or more"},
	"store.redis.dial_timeout":           {value: "0s", want: "must be more than 0"},
	"store.redis.read_timeout":           {value: "0s", want: "must be more than 0"},
	"store.redis.write_timeout":          {value: "0s", want: "must be more than 0"},
	"store.redis.pool_size":              {value: "-3", want: "must be 0 (the driver's default) or more"},
	"store.memory.max_entries":           {value: "0", want: "must be 1 or more"},
	"shutdown.drain_delay":               {value: "-1s", want: "must be 0 or more"},
	"shutdown.timeout":                   {value: "0s", want: "must be more than 0"},
	"envoy.config_paths":                 {file: "envoy: {config_paths: [a, \" \"]}\n", want: "envoy.config_paths[1]: must not be empty"},
	"envoy.header_names.limit":           {value: "Rate Limit", want: "must be an HTTP header name"},
	"envoy.header_names.remaining":       {value: "X_R", want: "must be an HTTP header name"},
	"envoy.header_names.reset":           {value: "", want: "must be an HTTP header name"},
	"envoy.local_cache.max_entries":      {value: "-1", want: "must be 0 (off) or more"},
	"envoy.json_addr":                    {value: "x", want: "must be host:port or :port"},
	"envoy.xds.address":                  {value: "x", want: "must be host:port or :port"},
	"envoy.xds.node_id":                  {value: "", want: "must not be empty"},
	"envoy.rlqs.reporting_interval":      {value: "5ms", want: "must be 10ms to 10m"},
	"envoy.rlqs.ttl_intervals":           {value: "101", want: "must be 1 to 100"},
	"envoy.rlqs.max_buckets_per_stream":  {value: "0", want: "must be 1 or more"},
	"envoy.rlqs.max_buckets_per_account": {value: "0", want: "must be 1 or more"},
	"metrics.namespaces":                 {value: "ok,Not A Namespace", want: `"Not A Namespace" is not a namespace`},
	"metrics.near_limit_ratio":           {value: "0", want: "must be above 0 and at most 1, got 0"},
	"tracing.exporter":                   {value: "zipkin", want: `must be none, otlp_grpc or otlp_http, got "zipkin"`},
	"tracing.sampling_ratio":             {value: "1.5", want: "must be from 0 to 1, got 1.5"},
	"tracing.service_name":               {value: "", want: "must not be empty"},
	"webhooks.timeout":                   {value: "0s", want: "must be more than 0"},
	"webhooks.max_attempts":              {value: "0", want: "must be 1 or more"},
	"webhooks.backoff_base":              {value: "0s", want: "must be more than 0"},
	"log.level":                          {value: "loud", want: `must be debug, info, warn or error, got "loud"`},
	"log.format":                         {value: "xml", want: `must be json or text, got "xml"`},
}

// TestEveryRuleRefuses sets each key that has a rule of its own to a value the rule
// refuses, through its LEASH_ variable, and checks the problem names the variable and says
// why; every key with a rule must have a case here.
func TestEveryRuleRefuses(t *testing.T) {
	for _, k := range keys() {
		if k.check == nil && k.each == nil {
			continue
		}
		bad, ok := badValues[k.path]
		if !ok {
			t.Errorf("%s has a rule but no case in badValues", k.path)
			continue
		}
		t.Run(k.path, func(t *testing.T) {
			env := []string{envName(k.path) + "=" + bad.value}
			if bad.with != "" {
				env = append(env, bad.with)
			}
			var paths []string
			if bad.file != "" {
				env, paths = nil, writeFiles(t, bad.file)
			}
			_, err := Load(paths, env)
			if err == nil {
				t.Fatalf("%s=%q was accepted", envName(k.path), bad.value)
			}
			e := err.(*Error)
			where := envName(k.path)
			if bad.file != "" {
				where = paths[0]
			}
			if len(e.Problems) != 1 || !strings.Contains(e.Problems[0], bad.want) || !strings.Contains(e.Problems[0], where) {
				t.Fatalf("problems = %q, want one naming %s and saying %q", e.Problems, where, bad.want)
			}
		})
	}
	for path := range badValues {
		if !hasRule(path) {
			t.Errorf("badValues has %s, which has no rule", path)
		}
	}
}

// TestRulesAcceptDefaults loads no file: every default passes its own rule.
func TestRulesAcceptDefaults(t *testing.T) {
	if _, err := Load(nil, nil); err != nil {
		t.Fatal(err)
	}
}

func hasRule(path string) bool {
	for _, k := range keys() {
		if k.path == path {
			return k.check != nil || k.each != nil
		}
	}
	return false
}
