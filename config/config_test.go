package config

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit"
)

// writeFiles writes each content to its own file in a fresh folder and returns the paths.
func writeFiles(t *testing.T, contents ...string) []string {
	t.Helper()
	dir := t.TempDir()
	paths := make([]string, len(contents))
	for i, c := range contents {
		paths[i] = filepath.Join(dir, "config"+string(rune('a'+i))+".yaml")
		if err := os.WriteFile(paths[i], []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

func mustLoad(t *testing.T, env []string, contents ...string) *Config {
	t.Helper()
	c, err := Load(writeFiles(t, contents...), env)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func i64(v int64) *int64 { return &v }

func defaults() *Config {
	return &Config{
		HTTP: HTTP{Addr: ":8080", ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second},
		Console: Console{Enabled: true},
		GRPC:    GRPC{Addr: ":8081"},
		Admin:   Admin{Addr: ":9090"},
		Store: Store{
			Backend: "disk",
			Disk:    Disk{Path: "leash-data", SyncInterval: time.Second, MaxEntries: 1_000_000},
			Redis: Redis{URL: "redis://127.0.0.1:6379/0", Prefix: "leash", Reservations: true,
				DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond},
			Memory: Memory{MaxEntries: 1_000_000},
		},
		Shutdown: Shutdown{DrainDelay: 2 * time.Second, Timeout: 10 * time.Second},
		Plans:    engine.BuiltinPlans(),
		Envoy: Envoy{DefaultAccount: "dev", ResponseHeaders: true,
			HeaderNames: HeaderNames{Limit: "RateLimit-Limit", Remaining: "RateLimit-Remaining", Reset: "RateLimit-Reset"},
			XDS:         XDS{NodeID: "leash"},
			RLQS:        RLQS{ReportingInterval: time.Second, TTLIntervals: 3, MaxBucketsPerStream: 1000, MaxBucketsPerAccount: 10_000}},
		Metrics:  Metrics{NearLimitRatio: 0.8},
		Tracing:  Tracing{Exporter: "none", SamplingRatio: 1, ServiceName: "leash"},
		Webhooks: Webhooks{Timeout: 10 * time.Second, MaxAttempts: 12, BackoffBase: time.Second, BackoffMax: 5 * time.Minute},
		Log:      Log{Level: "info", Format: "json"},
	}
}

func TestDefaults(t *testing.T) {
	got, err := Load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := defaults()
	want.fingerprint = got.fingerprint // of no files
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", got, want)
	}
	if got.HasAccounts() {
		t.Fatal("HasAccounts with no config")
	}
	// An empty file is no config keys at all, but it is a config file: no dev default_account.
	c := mustLoad(t, nil, "")
	if c.Envoy.DefaultAccount != "" {
		t.Fatalf("default_account with a config file = %q, want empty", c.Envoy.DefaultAccount)
	}
}

func TestEnvOverrides(t *testing.T) {
	tests := []struct {
		name string
		file string // optional config file
		env  []string
		get  func(*Config) any
		want any
	}{
		{"string", "", []string{"LEASH_HTTP_ADDR=127.0.0.1:1234"}, func(c *Config) any { return c.HTTP.Addr }, "127.0.0.1:1234"},
		{"empty string disables grpc", "", []string{"LEASH_GRPC_ADDR="}, func(c *Config) any { return c.GRPC.Addr }, ""},
		{"nested string", "", []string{"LEASH_STORE_REDIS_URL=rediss://cache:6380/1"}, func(c *Config) any { return c.Store.Redis.URL }, "rediss://cache:6380/1"},
		{"int", "", []string{"LEASH_STORE_MEMORY_MAX_ENTRIES=42"}, func(c *Config) any { return c.Store.Memory.MaxEntries }, 42},
		{"int wait_replicas", "", []string{"LEASH_STORE_REDIS_WAIT_REPLICAS=1"}, func(c *Config) any { return c.Store.Redis.WaitReplicas }, 1},
		{"bool reservations", "", []string{"LEASH_STORE_REDIS_RESERVATIONS=false"}, func(c *Config) any { return c.Store.Redis.Reservations }, false},
		{"duration", "", []string{"LEASH_SHUTDOWN_DRAIN_DELAY=5s"}, func(c *Config) any { return c.Shutdown.DrainDelay }, 5 * time.Second},
		{"duration webhooks", "", []string{"LEASH_WEBHOOKS_BACKOFF_MAX=90s"}, func(c *Config) any { return c.Webhooks.BackoffMax }, 90 * time.Second},
		{"redis timeout", "", []string{"LEASH_STORE_REDIS_READ_TIMEOUT=2s"}, func(c *Config) any { return c.Store.Redis.ReadTimeout }, 2 * time.Second},
		{"bool true", "", []string{"LEASH_ADMIN_PPROF=true"}, func(c *Config) any { return c.Admin.Pprof }, true},
		{"bool false", "", []string{"LEASH_ENVOY_RESPONSE_HEADERS=false"}, func(c *Config) any { return c.Envoy.ResponseHeaders }, false},
		{"comma list", "", []string{"LEASH_STORE_REDIS_CLUSTER_ADDRS=a:1, b:2,"}, func(c *Config) any { return c.Store.Redis.ClusterAddrs }, []string{"a:1", "b:2"}},
		{"sentinel", "", []string{"LEASH_STORE_REDIS_SENTINEL_MASTER=mymaster", "LEASH_STORE_REDIS_SENTINEL_ADDRS=s1:26379,s2:26379"},
			func(c *Config) any { return c.Store.Redis.Sentinel }, Sentinel{Master: "mymaster", Addrs: []string{"s1:26379", "s2:26379"}}},
		{"envoy paths", "", []string{"LEASH_ENVOY_CONFIG_PATHS=/etc/rl/a.yaml,/etc/rl/b"}, func(c *Config) any { return c.Envoy.ConfigPaths }, []string{"/etc/rl/a.yaml", "/etc/rl/b"}},
		{"password", "", []string{"LEASH_STORE_REDIS_PASSWORD=s3cret"}, func(c *Config) any { return c.Store.Redis.Password }, "s3cret"},
		{"log", "", []string{"LEASH_LOG_LEVEL=debug", "LEASH_LOG_FORMAT=text"}, func(c *Config) any { return c.Log }, Log{Level: "debug", Format: "text"}},
		{"backend", "", []string{"LEASH_STORE_BACKEND=redis"}, func(c *Config) any { return c.Store.Backend }, "redis"},
		{"env beats file", "http: {addr: ':1'}\n", []string{"LEASH_HTTP_ADDR=:2"}, func(c *Config) any { return c.HTTP.Addr }, ":2"},
		{"env list replaces file list", "envoy: {config_paths: [a, b]}\n", []string{"LEASH_ENVOY_CONFIG_PATHS=c"}, func(c *Config) any { return c.Envoy.ConfigPaths }, []string{"c"}},
		{"env default_account", "accounts: [{id: acme, plan: pro}]\n", []string{"LEASH_ENVOY_DEFAULT_ACCOUNT=acme"}, func(c *Config) any { return c.Envoy.DefaultAccount }, "acme"},
		{"reserved and test vars ignored", "", []string{"LEASH_DEV_API_KEY=k", "LEASH_TEST_REDIS_URL=x", "PATH=/bin", "leash_http_addr=:9"},
			func(c *Config) any { return c.HTTP.Addr }, ":8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var paths []string
			if tt.file != "" {
				paths = writeFiles(t, tt.file)
			}
			c, err := Load(paths, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.get(c); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestMergeFiles(t *testing.T) {
	a := `
http: {addr: ":1111"}
store:
  backend: redis
  redis:
    prefix: team-a
    url: redis://a:6379/0
envoy:
  config_paths: [/x, /y]
  domains:
    api.example.com: {account: acme}
    MyDomain: {account: acme}
accounts:
  - {id: acme, plan: pro, api_keys: [key-a]}
log: {level: warn}
`
	b := `
http: {addr: ":2222"}
store:
  redis:
    password: from-secret
envoy:
  config_paths: [/z]
log: {format: text, level: null}
`
	c := mustLoad(t, nil, a, b)
	checks := []struct {
		name      string
		got, want any
	}{
		{"later file wins", c.HTTP.Addr, ":2222"},
		{"earlier key kept", c.Store.Redis.Prefix, "team-a"},
		{"earlier sibling kept", c.Store.Redis.URL, "redis://a:6379/0"},
		{"later sibling added", c.Store.Redis.Password, "from-secret"},
		{"backend kept", c.Store.Backend, "redis"},
		{"list replaced", c.Envoy.ConfigPaths, []string{"/z"}},
		{"accounts kept", len(c.Accounts), 1},
		{"null is absent", c.Log, Log{Level: "warn", Format: "text"}},
		{"default untouched", c.Admin.Addr, ":9090"},
		{"domains keep dots and case", c.Envoy.Domains, map[string]EnvoyDomain{"api.example.com": {Account: "acme"}, "MyDomain": {Account: "acme"}}},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s: got %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}

	// A later empty list replaces (here: removes) the accounts.
	c = mustLoad(t, nil, "accounts: [{id: acme, plan: pro}]\n", "accounts: []\n")
	if c.HasAccounts() {
		t.Fatalf("accounts: [] in a later file should replace the list, got %+v", c.Accounts)
	}
}

func TestBadInput(t *testing.T) {
	const acct = "accounts: [{id: acme, plan: pro, api_keys: [k1]}]\n"
	tests := []struct {
		name  string
		files []string
		env   []string
		want  []string // substrings of the error
	}{
		{"unknown top-level key", []string{"htp: {addr: ':1'}\n"}, nil, []string{"htp: unknown key"}},
		{"unknown nested key", []string{"store: {redis: {urll: x}}\n"}, nil, []string{"store.redis.urll: unknown key"}},
		{"unknown key in plan", []string{"plans: {pro: {hardcap: 5}}\n"}, nil, []string{"plans.pro.hardcap: unknown key"}},
		{"unknown key in account", []string{"accounts: [{id: acme, plan: pro, key: x}]\n"}, nil, []string{"accounts[0].key: unknown key"}},
		{"unknown key in domain", []string{acct + "envoy: {domains: {d: {acount: acme}}}\n"}, nil, []string{"envoy.domains.d.acount: unknown key"}},
		{"list for string", []string{"http: {addr: [1]}\n"}, nil, []string{"http.addr: expected a string"}},
		{"string for int", []string{"store: {memory: {max_entries: abc}}\n"}, nil, []string{"config: ", "store.memory.max_entries: expected an integer"}},
		{"quoted int", []string{"store: {memory: {max_entries: \"5\"}}\n"}, nil, []string{"store.memory.max_entries: expected an integer"}},
		{"float for int", []string{"webhooks: {max_attempts: 1.5}\n"}, nil, []string{"webhooks.max_attempts: expected an integer"}},
		{"bad bool", []string{"admin: {pprof: maybe}\n"}, nil, []string{"admin.pprof: expected a boolean"}},
		{"bad console bool", []string{"console: {enabled: sometimes}\n"}, nil, []string{"console.enabled: expected a boolean"}},
		{"bad duration", []string{"shutdown: {drain_delay: soon}\n"}, nil, []string{"shutdown.drain_delay: expected a duration"}},
		{"int duration", []string{"webhooks: {timeout: 10}\n"}, nil, []string{"webhooks.timeout: expected a duration"}},
		{"scalar for section", []string{"store: memory\n"}, nil, []string{"store: expected a mapping"}},
		{"not a list", []string{"envoy: {config_paths: /x}\n"}, nil, []string{"envoy.config_paths: expected a list of strings"}},
		{"bad backend", []string{"store: {backend: postgres}\n"}, nil, []string{"store.backend: must be disk, memory or redis"}},
		{"url and cluster", []string{"store: {redis: {url: 'redis://a:1/0', cluster_addrs: ['b:1']}}\n"}, nil, []string{"store.redis.cluster_addrs: set either"}},
		{"url in file, cluster in env", []string{"store: {redis: {url: 'redis://a:1/0'}}\n"}, []string{"LEASH_STORE_REDIS_CLUSTER_ADDRS=b:1"}, []string{"store.redis.cluster_addrs"}},
		{"sentinel without master", []string{"store: {redis: {sentinel: {addrs: ['s:26379']}}}\n"}, nil, []string{"store.redis.sentinel.master: is required"}},
		{"sentinel without addrs", []string{"store: {redis: {sentinel: {master: m}}}\n"}, nil, []string{"store.redis.sentinel.addrs: is required"}},
		{"bad url scheme", []string{"store: {redis: {url: 'http://a:1'}}\n"}, nil, []string{"store.redis.url: scheme must be"}},
		{"max_entries zero", []string{"store: {memory: {max_entries: 0}}\n"}, nil, []string{"store.memory.max_entries: must be 1 or more"}},
		{"disk path empty", []string{"store: {disk: {path: \"\"}}\n"}, nil, []string{"store.disk.path: must name a directory"}},
		{"disk sync negative", nil, []string{"LEASH_STORE_DISK_SYNC_INTERVAL=-1s"}, []string{"store.disk.sync_interval (environment variable LEASH_STORE_DISK_SYNC_INTERVAL): must be 0 or more"}},
		{"disk max_entries zero", []string{"store: {disk: {max_entries: 0}}\n"}, nil, []string{"store.disk.max_entries: must be 1 or more"}},
		{"negative drain", []string{"shutdown: {drain_delay: -1s}\n"}, nil, []string{"shutdown.drain_delay: must be 0 or more"}},
		{"drain over timeout", []string{"shutdown: {drain_delay: 20s}\n"}, nil, []string{"shutdown.drain_delay: must be below shutdown.timeout"}},
		{"zero webhook timeout", []string{"webhooks: {timeout: 0s}\n"}, nil, []string{"webhooks.timeout: must be more than 0"}},
		{"max_attempts zero", []string{"webhooks: {max_attempts: 0}\n"}, nil, []string{"webhooks.max_attempts: must be 1 or more"}},
		{"bad log level", []string{"log: {level: verbose}\n"}, nil, []string{"log.level: must be debug, info, warn or error"}},
		{"bad log format", []string{"log: {format: xml}\n"}, nil, []string{"log.format: must be json or text"}},
		{"bad addr", []string{"http: {addr: '8080'}\n"}, nil, []string{"http.addr: must be host:port"}},
		{"tls half", []string{"http: {tls: {cert_file: c.pem}}\n"}, nil, []string{"http.tls: cert_file and key_file"}},
		{"zero header timeout", []string{"http: {read_header_timeout: 0}\n"}, nil, []string{"http.read_header_timeout: must be more than 0"}},
		{"negative idle timeout", nil, []string{"LEASH_HTTP_IDLE_TIMEOUT=-1s"}, []string{"http.idle_timeout (environment variable LEASH_HTTP_IDLE_TIMEOUT): must be more than 0"}},
		{"read below header timeout", []string{"http: {read_header_timeout: 5s, read_timeout: 1s}\n"}, nil, []string{"http.read_timeout: must be at least http.read_header_timeout"}},
		{"bad account id", []string{"accounts: [{id: Acme, plan: pro}]\n"}, nil, []string{"accounts[0].id:", "must match"}},
		{"missing account id", []string{"accounts: [{plan: pro}]\n"}, nil, []string{"accounts[0].id: is required"}},
		{"duplicate account", []string{"accounts: [{id: acme, plan: pro}, {id: acme, plan: free}]\n"}, nil, []string{"accounts[1].id: account \"acme\" is already defined"}},
		{"unknown plan ref", []string{"accounts: [{id: acme, plan: gold}]\n"}, nil, []string{"accounts[0].plan: unknown plan \"gold\""}},
		{"bad operator id", []string{"operators: [{id: Ops}]\n"}, nil, []string{"operators[0].id:", "must match"}},
		{"missing operator id", []string{"operators: [{api_keys: [o1]}]\n"}, nil, []string{"operators[0].id: is required"}},
		{"duplicate operator", []string{"operators: [{id: ops}, {id: ops}]\n"}, nil, []string{"operators[1].id: operator \"ops\" is already defined"}},
		{"unknown key in operator", []string{"operators: [{id: ops, plan: pro}]\n"}, nil, []string{"operators[0].plan: unknown key"}},
		{"operator key of an account", []string{acct + "operators: [{id: ops, api_keys: [k1]}]\n"}, nil, []string{"operators[0].api_keys[0]: this API key is already used by accounts[0]"}},
		{"operator key twice", []string{"operators: [{id: a, api_keys: [o1]}, {id: b, api_keys: [o1]}]\n"}, nil, []string{"operators[1].api_keys[0]: this API key is already used by operators[0]"}},
		{"operator bad digest", []string{"operators: [{id: ops, api_key_sha256: [abc]}]\n"}, nil, []string{"operators[0].api_key_sha256[0]: must be 64 hex characters"}},
		{"bad sha256 hex", []string{"accounts: [{id: acme, plan: pro, api_key_sha256: ['" + strings.Repeat("zz", 32) + "']}]\n"}, nil, []string{"accounts[0].api_key_sha256[0]: must be 64 hex"}},
		{"short sha256", []string{"accounts: [{id: acme, plan: pro, api_key_sha256: [abcd]}]\n"}, nil, []string{"accounts[0].api_key_sha256[0]: must be 64 hex"}},
		{"shared api key", []string{"accounts: [{id: a, plan: pro, api_keys: [k]}, {id: b, plan: pro, api_keys: [k]}]\n"}, nil, []string{"accounts[1].api_keys[0]: this API key is already used by accounts[0]"}},
		{"shared key plain vs sha", []string{"accounts: [{id: a, plan: pro, api_keys: [k]}, {id: b, plan: pro, api_key_sha256: ['" + sha("k") + "']}]\n"}, nil, []string{"accounts[1].api_key_sha256[0]: this API key is already used"}},
		{"empty api key", []string{"accounts: [{id: a, plan: pro, api_keys: ['']}]\n"}, nil, []string{"accounts[0].api_keys[0]: must not be empty"}},
		{"api key with newline", []string{"accounts: [{id: a, plan: pro, api_keys: [\"k\\n\"]}]\n"}, nil, []string{"accounts[0].api_keys[0]: must not contain"}},
		{"bad algorithm in plan", []string{"plans: {pro: {algorithms: [leaky_bucket]}}\n"}, nil, []string{"plans.pro.algorithms[0]: unknown algorithm \"leaky_bucket\""}},
		{"concurrent_limit as algorithm", []string{"plans: {pro: {algorithms: [concurrent_limit]}}\n"}, nil, []string{"plans.pro.algorithms[0]: concurrent_limit is not a rate algorithm"}},
		{"hard_cap 0", []string{"plans: {pro: {hard_cap: 0}}\n"}, nil, []string{"plans.pro.hard_cap: must be 1 or more"}},
		{"negative quota", []string{"plans: {pro: {monthly_quota: -1}}\n"}, nil, []string{"plans.pro.monthly_quota: must be 0 or more"}},
		{"new plan incomplete", []string{"plans: {gold: {webhooks: true}}\n"}, nil, []string{"plans.gold.algorithms: required", "plans.gold.monthly_quota: required"}},
		{"bad plan name", []string{"plans: {Gold: {algorithms: [], monthly_quota: 1}}\n"}, nil, []string{"plans.Gold: plan name must match"}},
		{"domain to unknown account", []string{acct + "envoy: {domains: {edge: {account: nobody}}}\n"}, nil, []string{"envoy.domains.edge.account: unknown account \"nobody\""}},
		{"default_account unknown", []string{acct + "envoy: {default_account: nobody}\n"}, nil, []string{"envoy.default_account: unknown account \"nobody\""}},
		{"domain account without accounts", []string{"envoy: {domains: {edge: {account: acme}}}\n"}, nil, []string{"envoy.domains.edge.account", "only the dev account exists"}},
		{"domains differ in case", []string{acct + "envoy: {domains: {Edge: {account: acme}}}\n", "envoy: {domains: {edge: {account: acme}}}\n"}, nil, []string{"only in letter case"}},
		{"unknown env var", nil, []string{"LEASH_HTTP_ADR=:1"}, []string{"LEASH_HTTP_ADR names no config key"}},
		{"env for plans", nil, []string{"LEASH_PLANS_PRO_MONTHLY_QUOTA=5"}, []string{"LEASH_PLANS_PRO_MONTHLY_QUOTA: plans, accounts, operators and envoy.domains can only be set in a config file"}},
		{"env for operators", nil, []string{"LEASH_OPERATORS=x"}, []string{"LEASH_OPERATORS: plans, accounts, operators and envoy.domains can only be set in a config file"}},
		{"bad env int", nil, []string{"LEASH_STORE_MEMORY_MAX_ENTRIES=abc"}, []string{"store.memory.max_entries (environment variable LEASH_STORE_MEMORY_MAX_ENTRIES): expected an integer"}},
		{"bad env duration", nil, []string{"LEASH_SHUTDOWN_DRAIN_DELAY=2"}, []string{"shutdown.drain_delay (environment variable LEASH_SHUTDOWN_DRAIN_DELAY): expected a duration"}},
		{"bad env bool", nil, []string{"LEASH_ADMIN_PPROF=maybe"}, []string{"admin.pprof (environment variable LEASH_ADMIN_PPROF): expected a boolean"}},
		{"yaml syntax", []string{"http: [\n"}, nil, []string{"config: "}},
		{"top level list", []string{"- a\n"}, nil, []string{"top level must be a mapping"}},
		{"duplicate yaml key", []string{"http: {addr: ':1'}\nhttp: {addr: ':2'}\n"}, nil, []string{"already defined"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var paths []string
			if len(tt.files) > 0 {
				paths = writeFiles(t, tt.files...)
			}
			c, err := Load(paths, tt.env)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", c)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "config: ") {
				t.Errorf("error %q does not start with \"config: \"", err)
			}
		})
	}
}

func TestErrorNamesFileAndNeverTheSecret(t *testing.T) {
	paths := writeFiles(t, "store: {redis: {url: 'http://user:hunter2@h:1'}}\naccounts: [{id: a, plan: pro, api_keys: [topsecret]}, {id: b, plan: pro, api_keys: [topsecret]}]\n")
	_, err := Load(paths, nil)
	if err == nil {
		t.Fatal("expected an error")
	}
	for _, secret := range []string{"hunter2", "topsecret"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error reveals %q: %v", secret, err)
		}
	}
	_, err = Load(writeFiles(t, "bogus: 1\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "configa.yaml:1: bogus: unknown key") {
		t.Fatalf("error should name the file and key, got %v", err)
	}
}

func TestMissingFile(t *testing.T) {
	if _, err := Load([]string{filepath.Join(t.TempDir(), "nope.yaml")}, nil); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("want an error naming the file, got %v", err)
	}
}

func TestPlans(t *testing.T) {
	builtin := engine.BuiltinPlans()
	tests := []struct {
		name  string
		files []string
		plan  string
		want  engine.Plan
	}{
		{"override one field of pro keeps the others", []string{"plans: {pro: {monthly_quota: 20000000}}\n"}, "pro",
			func() engine.Plan { p := builtin["pro"]; p.MonthlyQuota = 20_000_000; return p }()},
		{"hard_cap null means none", []string{"plans: {pro: {hard_cap: null}}\n"}, "pro",
			func() engine.Plan { p := builtin["pro"]; p.HardCap = nil; return p }()},
		{"absent hard_cap inherits", []string{"plans: {free: {webhooks: true}}\n"}, "free",
			func() engine.Plan { p := builtin["free"]; p.Webhooks = true; return p }()},
		{"hard_cap on scale", []string{"plans: {scale: {hard_cap: 5}}\n"}, "scale",
			func() engine.Plan { p := builtin["scale"]; p.HardCap = i64(5); return p }()},
		{"algorithms replaced", []string{"plans: {pro: {algorithms: [token_bucket]}}\n"}, "pro",
			func() engine.Plan {
				p := builtin["pro"]
				p.Algorithms = engine.AlgorithmSet(0).With(engine.TokenBucket)
				return p
			}()},
		{"new plan", []string{"plans: {gold: {algorithms: [fixed_window], monthly_quota: 7, concurrent_limit: true}}\n"}, "gold",
			engine.Plan{Name: "gold", Algorithms: engine.AlgorithmSet(0).With(engine.FixedWindow), ConcurrentLimit: true, MonthlyQuota: 7}},
		{"new plan with empty algorithms and a cap", []string{"plans: {leases-only: {algorithms: [], monthly_quota: 0, concurrent_limit: true, hard_cap: 9}}\n"}, "leases-only",
			engine.Plan{Name: "leases-only", ConcurrentLimit: true, HardCap: i64(9)}},
		{"null in a later file removes the cap", []string{"plans: {pro: {hard_cap: 5}}\n", "plans: {pro: {hard_cap: null}}\n"}, "pro",
			func() engine.Plan { p := builtin["pro"]; p.HardCap = nil; return p }()},
		{"number in a later file sets the cap", []string{"plans: {pro: {hard_cap: null}}\n", "plans: {pro: {hard_cap: 6}}\n"}, "pro",
			func() engine.Plan { p := builtin["pro"]; p.HardCap = i64(6); return p }()},
		{"a later file without hard_cap keeps the earlier null", []string{"plans: {pro: {hard_cap: null}}\n", "plans: {pro: {monthly_quota: 1}}\n"}, "pro",
			func() engine.Plan { p := builtin["pro"]; p.HardCap = nil; p.MonthlyQuota = 1; return p }()},
		{"fields merge across files", []string{"plans: {gold: {algorithms: [sliding_window]}}\n", "plans: {gold: {monthly_quota: 3}}\n"}, "gold",
			engine.Plan{Name: "gold", Algorithms: engine.AlgorithmSet(0).With(engine.SlidingWindow), MonthlyQuota: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, nil, tt.files...)
			if got := c.Plans[tt.plan]; !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("plan %s:\n got %+v (cap %v)\nwant %+v (cap %v)", tt.plan, got, deref(got.HardCap), tt.want, deref(tt.want.HardCap))
			}
			for name, p := range builtin {
				if name != tt.plan && !strings.Contains(strings.Join(tt.files, ""), name+":") && !reflect.DeepEqual(c.Plans[name], p) {
					t.Errorf("untouched plan %s changed: %+v", name, c.Plans[name])
				}
			}
		})
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func sha(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

func TestDirectory(t *testing.T) {
	c := mustLoad(t, nil, `
plans:
  pro: {monthly_quota: 5}
accounts:
  - id: acme
    plan: pro
    api_keys: [plain-acme]
    api_key_sha256: ["`+strings.ToUpper(sha("hashed-acme"))+`"]
  - id: beta
    plan: free
    api_key_sha256: ["`+sha("hashed-beta")+`"]
`)
	if !c.HasAccounts() {
		t.Fatal("HasAccounts = false")
	}
	if got := c.Accounts[0].APIKeySHA256[0]; got != sha("hashed-acme") {
		t.Fatalf("sha256 not normalised to lower case: %s", got)
	}
	d, err := c.Directory()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key, account, plan string
		quota              int64
	}{
		{"plain-acme", "acme", "pro", 5},
		{"hashed-acme", "acme", "pro", 5},
		{"hashed-beta", "beta", "free", 100_000},
	}
	for _, tt := range tests {
		a, ok := d.Lookup(tt.key)
		if !ok || a.ID != tt.account || a.Plan.Name != tt.plan || a.Plan.MonthlyQuota != tt.quota {
			t.Errorf("Lookup(%q) = %+v, %v; want account %s plan %s quota %d", tt.key, a, ok, tt.account, tt.plan, tt.quota)
		}
	}
	for _, bad := range []string{"", "hashed-gamma", sha("hashed-acme")} {
		if a, ok := d.Lookup(bad); ok {
			t.Errorf("Lookup(%q) found %s", bad, a.ID)
		}
	}
}

func TestExample(t *testing.T) {
	c, err := Load([]string{"example.yaml"}, nil)
	if err != nil {
		t.Fatalf("example.yaml does not load: %v", err)
	}
	data, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if Example() != string(data) {
		t.Fatal("Example() differs from example.yaml")
	}
	// The example documents the defaults: apart from its sample account and domain
	// (and default_account, "dev" only without a file) it must load as the defaults.
	want := defaults()
	want.Envoy.DefaultAccount = ""
	want.Accounts = c.Accounts
	want.Operators = c.Operators
	want.Envoy.Domains = c.Envoy.Domains
	want.fingerprint = c.fingerprint
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("example.yaml is not the defaults:\n got %+v\nwant %+v", c, want)
	}
	if len(c.Accounts) != 1 || c.Envoy.Domains["edge"].Account != "acme" {
		t.Fatalf("sample account/domain missing: %+v %+v", c.Accounts, c.Envoy.Domains)
	}
	// Every key of the schema appears in the example.
	root := schema()
	root.leaves("", func(path string, _ *node) {
		last := path[strings.LastIndex(path, ".")+1:]
		if !strings.Contains(Example(), last+":") {
			t.Errorf("example.yaml does not document %s", path)
		}
	})
}

// recorder is a slog.Handler that hands every record's message to a channel.
type recorder struct{ ch chan string }

func (r recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r recorder) Handle(_ context.Context, rec slog.Record) error {
	msg := rec.Message
	rec.Attrs(func(a slog.Attr) bool { msg += " " + a.Key + "=" + a.Value.String(); return true })
	select {
	case r.ch <- msg:
	default:
	}
	return nil
}
func (r recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r recorder) WithGroup(string) slog.Handler      { return r }

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "leash.yaml")
	write := func(content string, atomic bool) {
		t.Helper()
		if !atomic {
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			return
		}
		testkit.ReplaceFile(t, path, content)
	}
	account := func(id string) string { return "accounts: [{id: " + id + ", plan: pro, api_keys: [key-" + id + "]}]\n" }
	write(account("one"), false)
	loaded, err := Load([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan *Config, 4)
	logs := recorder{ch: make(chan string, 64)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		Watch(ctx, []string{path}, nil, loaded, func(c *Config) { changes <- c }, slog.New(logs))
	}()
	defer func() {
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Error("Watch did not return after ctx was cancelled")
		}
	}()
	// Wait until the watcher has made its first check and watches the folder (it says so
	// at debug level), so that the in-place edit below is seen by its event, whole.
	watching := time.After(5 * time.Second)
	for started := false; !started; {
		select {
		case msg := <-logs.ch:
			started = strings.HasPrefix(msg, "file watch: watching")
		case <-watching:
			t.Fatal("the watcher did not start within 5s")
		}
	}

	expect := func(id string) {
		t.Helper()
		select {
		case c := <-changes:
			if len(c.Accounts) != 1 || c.Accounts[0].ID != id {
				t.Fatalf("callback with accounts %+v, want %s", c.Accounts, id)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no callback within 5s for account %s", id)
		}
	}

	write(account("two"), false) // in place
	expect("two")

	write("accounts: [{id: three, plan: nosuchplan}]\n", true) // invalid
	deadline := time.After(5 * time.Second)
	for rejected := false; !rejected; {
		select {
		case msg := <-logs.ch:
			rejected = strings.Contains(msg, "rejected") && strings.Contains(msg, "nosuchplan")
		case c := <-changes:
			t.Fatalf("callback for an invalid config: %+v", c.Accounts)
		case <-deadline:
			t.Fatal("invalid config was not logged within 5s")
		}
	}
	select {
	case c := <-changes:
		t.Fatalf("callback for an invalid config: %+v", c.Accounts)
	default:
	}

	write(account("four"), true) // atomic rename, as editors and ConfigMaps do
	expect("four")
}

func TestWatchStopsWithoutPaths(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Watch(ctx, nil, nil, nil, func(*Config) {}, nil); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Watch did not return")
	}
}

// The baseline is what Load read: an edit that lands after the load and before Watch
// starts is applied, not taken as the files in force.
func TestWatchAppliesEditBeforeStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leash.yaml")
	account := func(id string) string { return "accounts: [{id: " + id + ", plan: pro, api_keys: [key-" + id + "]}]\n" }
	testkit.ReplaceFile(t, path, account("one"))
	loaded, err := Load([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Accounts) != 1 || loaded.Accounts[0].ID != "one" {
		t.Fatalf("loaded accounts %+v", loaded.Accounts)
	}
	testkit.ReplaceFile(t, path, account("two"))

	var last atomic.Pointer[Config]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, []string{path}, nil, loaded, func(c *Config) { last.Store(c) }, nil)
	}()
	defer func() { cancel(); <-done }()
	testkit.Eventually(t, "the edit made before Watch started applied", 3*time.Second, func() bool {
		c := last.Load()
		return c != nil && len(c.Accounts) == 1 && c.Accounts[0].ID == "two"
	})
}

// Operators' keys, in both forms, authenticate as operators and never as accounts; the
// directory's plans are the config's, for accounts made through the admin API.
func TestDirectoryOperators(t *testing.T) {
	c := mustLoad(t, nil, `
plans:
  gold: {algorithms: [fixed_window], monthly_quota: 7}
accounts:
  - {id: acme, plan: pro, api_keys: [key-acme]}
operators:
  - id: ops
    api_keys: [op-plain]
    api_key_sha256: ["`+strings.ToUpper(sha("op-hashed"))+`"]
`)
	d, err := c.Directory()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"op-plain", "op-hashed"} {
		if op, ok := d.LookupOperator(k); !ok || op.ID != "ops" {
			t.Errorf("LookupOperator(%q) = %v, %v", k, op, ok)
		}
		if _, ok := d.Lookup(k); ok {
			t.Errorf("operator key %q authenticates as an account", k)
		}
	}
	if _, ok := d.LookupOperator("key-acme"); ok {
		t.Error("an account key authenticates as an operator")
	}
	if p, ok := d.Plans()["gold"]; !ok || p.MonthlyQuota != 7 {
		t.Errorf("the directory's plans lack the configured one: %+v", d.Plans())
	}
}

// The command line's own variables (and the README's LEASH_SRC) are no config keys: a
// shell that exported them for the walkthrough still starts the service (spec §10.1).
func TestCLIVariablesAreNotConfigKeys(t *testing.T) {
	env := []string{"LEASH_URL=http://localhost:8080", "LEASH_API_KEY=lsh_x", "LEASH_OPERATOR_KEY=lsh_y", "LEASH_SRC=/src/leash"}
	if _, err := Load(nil, env); err != nil {
		t.Fatalf("Load with the command line's variables: %v", err)
	}
}

// A LEASH_ variable that names no key, but nearly names one, says which (did you mean).
func TestUnknownVariableSuggestsKey(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"LEASH_HTTP_ADRR=:1", "did you mean LEASH_HTTP_ADDR?"},
		{"LEASH_STORE_BAKEND=redis", "did you mean LEASH_STORE_BACKEND?"},
		{"LEASH_API_KY=x", "did you mean LEASH_API_KEY (the command line's key)?"},
	} {
		_, err := Load(nil, []string{tc.env})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.env, err, tc.want)
		}
	}
	_, err := Load(nil, []string{"LEASH_NOTHING_LIKE_IT=1"})
	if err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a name like no key: %v", err)
	}
}

// A problem that only follows from another is not reported: a bad variable leaves its key
// at its default, and the key next to it is not checked against that default.
func TestFollowingProblemNotReported(t *testing.T) {
	paths := writeFiles(t, "shutdown:\n  drain_delay: 20s\n")
	_, err := Load(paths, []string{"LEASH_SHUTDOWN_TIMEOUT=forever"})
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0], "LEASH_SHUTDOWN_TIMEOUT") {
		t.Fatalf("want only the variable's problem, got %v", err)
	}
	// Elsewhere, a bad value is still reported next to a type error.
	paths = writeFiles(t, "http:\n  addr: 5\nlog:\n  level: loud\n")
	_, err = Load(paths, nil)
	if !errors.As(err, &ce) || len(ce.Problems) != 2 || !strings.Contains(ce.Problems[1], "configa.yaml:4: log.level") {
		t.Fatalf("want both problems, the second with its file and line, got %v", err)
	}
}
