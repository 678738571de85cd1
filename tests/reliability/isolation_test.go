package reliability

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
	"github.com/leashd/leash/webhook"
)

// Account alpha (A) owns state; account bravo (B) tries every endpoint with A's names.
const (
	keyA = "key-alpha"
	keyB = "key-bravo"
)

// isoClient calls one leash process's /v1 API.
type isoClient struct {
	t    *testing.T
	base string
}

// do sends a request and returns the status and the raw body.
func (c isoClient) do(method, path, key, body string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// want checks the status and that the body contains every part.
func (c isoClient) want(method, path, key, body string, status int, parts ...string) string {
	c.t.Helper()
	code, got := c.do(method, path, key, body)
	if code != status {
		c.t.Fatalf("%s %s as %s: status %d %s, want %d", method, path, key, code, got, status)
	}
	for _, p := range parts {
		if !strings.Contains(got, p) {
			c.t.Fatalf("%s %s as %s: body %s lacks %s", method, path, key, got, p)
		}
	}
	return got
}

// field decodes one top-level field of a JSON body.
func field(t *testing.T, body, name string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	return m[name]
}

// waitStats polls a namespace's stats until its total is want (usage lags up to 2 s).
func (c isoClient) waitStats(key, ns string, want float64) string {
	c.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		body := c.want("GET", "/v1/namespaces/"+ns+"/stats", key, "", 200)
		if field(c.t, body, "total") == want {
			return body
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("stats of %s for %s: %s, want total %v", ns, key, body, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// isoConfig writes the config of two pro accounts, webhooks to loopback allowed, and the
// Envoy domain "edge" mapped to B (user descriptors: 2 per year, fixed_window). Every
// counter here has a 365-day window, so no window boundary falls inside the test.
func isoConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	descDir := filepath.Join(dir, "ratelimit")
	if err := os.Mkdir(descDir, 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.ReplaceFile(t, filepath.Join(descDir, "edge.yaml"), "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: year, requests_per_unit: 2}\n")
	cfg := filepath.Join(dir, "leash.yaml")
	testkit.ReplaceFile(t, cfg, fmt.Sprintf(`accounts:
  - {id: alpha, plan: pro, api_keys: [%s]}
  - {id: bravo, plan: pro, api_keys: [%s]}
webhooks: {allow_http: true, allow_private_targets: true, backoff_base: 100ms}
envoy:
  config_paths: [%s]
  domains: {edge: {account: bravo}}
`, keyA, keyB, descDir))
	return cfg
}

// TestAccountIsolationMemory runs the cross-account test on the memory store.
func TestAccountIsolationMemory(t *testing.T) {
	p := leashproc.Start(t, binary, []string{"--config", isoConfig(t)}, "LEASH_STORE_BACKEND=memory")
	runIsolation(t, p, nil)
}

// TestAccountIsolationRedis runs the cross-account test on the Redis store, and also
// checks in Redis itself that every key of A's is byte for byte unchanged by B's calls.
func TestAccountIsolationRedis(t *testing.T) {
	r := redistest.StartServer(t, false)
	p := leashproc.Start(t, binary, []string{"--config", isoConfig(t)}, "LEASH_STORE_BACKEND=redis",
		"LEASH_STORE_REDIS_URL="+r.URL(), "LEASH_STORE_REDIS_PREFIX=iso")
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	runIsolation(t, p, rdb)
}

// redisDump returns DUMP of every key that belongs to account alpha (prefix "iso"): its
// counters and leases, usage, rules and webhook. The outbox and the rule version are
// shared by design and hold no account's readable state.
func redisDump(t *testing.T, rdb *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		if !strings.HasPrefix(k, "{iso:k:alpha:") && !strings.HasPrefix(k, "{iso:u:alpha}") &&
			!strings.HasPrefix(k, "{iso:r}:alpha:") && !strings.HasPrefix(k, "{iso:w:alpha}") {
			continue
		}
		v, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		out[k] = v
	}
	return out
}

// aSnapshot is what A can see of its own state.
type aSnapshot struct {
	rules, webhook            string
	sharedBlocked, monthTotal any // the usage totals themselves are checked by waitStats
	leaseActive               any
	remK, remK2, remEdge      any
}

// snapshotA reads A's state through the API. The three cost-0 checks at the end spend
// nothing but count 3 toward A's usage (2 in "shared", 1 in "edge").
func snapshotA(c isoClient, sharedWant, edgeWant float64) aSnapshot {
	c.t.Helper()
	var s aSnapshot
	s.rules = c.want("GET", "/v1/namespaces/shared/rules", keyA, "", 200)
	s.webhook = c.want("GET", "/v1/webhook", keyA, "", 200)
	st := c.waitStats(keyA, "shared", sharedWant)
	s.sharedBlocked = field(c.t, st, "blocked")
	s.monthTotal = field(c.t, st, "month").(map[string]any)["total"]
	c.waitStats(keyA, "edge", edgeWant)
	// Releasing an id A never held answers A's count on that key, changing nothing.
	s.leaseActive = field(c.t, c.want("DELETE", "/v1/leases/"+leaseIDOf("shared", "job"), keyA, "", 200, `"released":false`), "active")
	probe := func(body string) any { return field(c.t, c.want("POST", "/v1/limit", keyA, body, 200), "remaining") }
	s.remK = probe(`{"namespace":"shared","key":"k","cost":0}`)
	s.remK2 = probe(`{"namespace":"shared","key":"k2","algorithm":"sliding_window","limit":10,"window_ms":31536000000,"cost":0}`)
	s.remEdge = probe(`{"namespace":"edge","key":"user=alice","algorithm":"fixed_window","limit":2,"window_ms":31536000000,"cost":0}`)
	return s
}

// runIsolation: A sets up rules, counters, a lease, a webhook and usage; B then calls every
// /v1 endpoint with A's namespace, keys, lease id and rules, and the Envoy endpoint (its
// domain) on A's counter key; A's state is unchanged (through the API, and in Redis byte
// for byte when rdb is set), and B only ever sees its own.
func runIsolation(t *testing.T, p *leashproc.Proc, rdb *redis.Client) {
	c := isoClient{t: t, base: "http://" + p.HTTP}
	hookA, hookB := newHookReceiver(t, "ok"), newHookReceiver(t, "ok")

	// A's state.
	c.want("POST", "/v1/namespaces/shared/rules", keyA, `{"algorithm":"fixed_window","limit":5,"window_ms":31536000000,"name":"a-rate"}`, 201)
	c.want("POST", "/v1/namespaces/shared/rules", keyA, `{"algorithm":"concurrent_limit","limit":2,"window_ms":600000}`, 201)
	for _, rem := range []string{"4", "3", "2"} {
		c.want("POST", "/v1/limit", keyA, `{"namespace":"shared","key":"k"}`, 200, `"remaining":`+rem)
	}
	c.want("POST", "/v1/limit", keyA, `{"namespace":"shared","key":"k2","algorithm":"sliding_window","limit":10,"window_ms":31536000000}`, 200, `"remaining":9`)
	c.want("POST", "/v1/limit", keyA, `{"namespace":"edge","key":"user=alice","algorithm":"fixed_window","limit":2,"window_ms":31536000000}`, 200, `"remaining":1`)
	leaseA := field(t, c.want("POST", "/v1/leases", keyA, `{"namespace":"shared","key":"job"}`, 200, `"active":1`), "lease_id").(string)
	secretA := field(t, c.want("PUT", "/v1/webhook", keyA, `{"url":"`+hookA.srv.URL+`/a"}`, 200), "secret").(string)
	c.want("POST", "/v1/webhook/test", keyA, "", 202)
	hookA.waitCount(t, 1, 10*time.Second)

	// A's usage so far: 4 checks + 1 acquisition in "shared", 1 check in "edge".
	before := snapshotA(c, 5, 1)
	c.waitStats(keyA, "shared", 7) // the snapshot's own probes, flushed
	c.waitStats(keyA, "edge", 2)
	var dumpBefore map[string]string
	if rdb != nil {
		dumpBefore = redisDump(t, rdb)
		if len(dumpBefore) < 6 {
			t.Fatalf("only %d keys of alpha in Redis: %v", len(dumpBefore), slices.Collect(maps.Keys(dumpBefore)))
		}
	}

	// B, with A's names, on every endpoint.
	// Rules: B sees none, deletes none of A's, and its own write creates (not replaces).
	c.want("GET", "/v1/namespaces/shared/rules", keyB, "", 200, `{"namespace":"shared","rules":[]}`)
	c.want("DELETE", "/v1/namespaces/shared/rules/rate", keyB, "", 200, `{"deleted":false}`)
	c.want("DELETE", "/v1/namespaces/shared/rules/concurrent", keyB, "", 200, `{"deleted":false}`)
	c.want("POST", "/v1/namespaces/shared/rules", keyB, `{"algorithm":"fixed_window","limit":1,"window_ms":1000,"name":"b-rate"}`, 201)
	c.want("GET", "/v1/namespaces/shared/rules", keyB, "", 200, `"name":"b-rate"`)
	c.want("DELETE", "/v1/namespaces/shared/rules/rate", keyB, "", 200, `{"deleted":true}`)
	// Checks: A's rule does not apply to B; B's counter on A's key starts fresh.
	c.want("POST", "/v1/limit", keyB, `{"namespace":"shared","key":"k"}`, 400, `"code":"missing_limit"`)
	c.want("POST", "/v1/limit", keyB, `{"namespace":"shared","key":"k","algorithm":"fixed_window","limit":5,"window_ms":31536000000}`, 200, `"remaining":4`)
	// Resets: B's own counter only; A's counters hold no state for B.
	c.want("POST", "/v1/limit/reset", keyB, `{"namespace":"shared","key":"k","algorithm":"fixed_window","window_ms":31536000000}`, 200, `{"reset":true}`)
	c.want("POST", "/v1/limit/reset", keyB, `{"namespace":"shared","key":"k","algorithm":"fixed_window","window_ms":31536000000}`, 404, `"code":"key_not_found"`)
	c.want("POST", "/v1/limit/reset", keyB, `{"namespace":"shared","key":"k2","algorithm":"sliding_window","window_ms":31536000000}`, 404, `"code":"key_not_found"`)
	c.want("POST", "/v1/limit/reset", keyB, `{"namespace":"edge","key":"user=alice","algorithm":"fixed_window","window_ms":31536000000}`, 404, `"code":"key_not_found"`)
	// Leases: A's id is nothing to B (active is B's own count, spec §5.4).
	c.want("DELETE", "/v1/leases/"+leaseA, keyB, "", 200, `{"released":false,"active":0}`)
	c.want("POST", "/v1/leases/"+leaseA+"/renew", keyB, `{"window_ms":1000}`, 200, `{"renewed":false,"active":0,"reset_ms":0}`)
	c.want("POST", "/v1/leases/"+leaseA+"/renew", keyB, "", 200, `"renewed":false`)
	leaseB := field(t, c.want("POST", "/v1/leases", keyB, `{"namespace":"shared","key":"job","limit":1,"window_ms":600000}`, 200, `"active":1`), "lease_id").(string)
	c.want("DELETE", "/v1/leases/"+leaseB, keyB, "", 200, `{"released":true,"active":0}`)
	// Webhook: B sees none, removes none of A's, tests none of A's; its own goes to its own URL.
	c.want("GET", "/v1/webhook", keyB, "", 404, `"code":"webhook_not_found"`)
	c.want("POST", "/v1/webhook/test", keyB, "", 404, `"code":"webhook_not_found"`)
	if code, body := c.do("DELETE", "/v1/webhook", keyB, ""); code != 204 {
		t.Fatalf("B DELETE /v1/webhook: %d %s", code, body)
	}
	secretB := field(t, c.want("PUT", "/v1/webhook", keyB, `{"url":"`+hookB.srv.URL+`/b"}`, 200), "secret").(string)
	if secretB == secretA {
		t.Fatal("B's webhook secret equals A's")
	}
	c.want("GET", "/v1/webhook", keyB, "", 200, hookB.srv.URL+"/b")
	c.want("POST", "/v1/webhook/test", keyB, "", 202)
	hookB.waitCount(t, 1, 10*time.Second)
	if code, body := c.do("DELETE", "/v1/webhook", keyB, ""); code != 204 {
		t.Fatalf("B DELETE /v1/webhook: %d %s", code, body)
	}
	// Envoy: domain edge counts against B; A's counter user=alice (1 of 2 spent) is not
	// B's: B gets its own 2.
	rls := leashproc.DialRLS(t, p.GRPC)
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := rls.ShouldRateLimit(context.Background(), leashproc.Request("edge", leashproc.Entry("user", "alice")))
		if err != nil || resp.OverallCode != want {
			t.Fatalf("B's Envoy call %d on user=alice: %v %v, want %v", i, resp, err, want)
		}
	}
	// Stats: B sees only its own usage: 1 check + 1 acquisition in shared, 3 descriptors in edge.
	stB := c.waitStats(keyB, "shared", 2)
	c.waitStats(keyB, "edge", 3)
	if m := field(t, stB, "month").(map[string]any); m["total"] != float64(5) {
		t.Fatalf("B's month total %v, want 5 (its own)", m["total"])
	}

	// A is unchanged.
	if rdb != nil {
		time.Sleep(1500 * time.Millisecond) // any usage flush of B's has happened
		dumpAfter := redisDump(t, rdb)
		for k, v := range dumpBefore {
			if dumpAfter[k] != v {
				t.Errorf("Redis key %s of alpha changed while only bravo made calls", k)
			}
		}
		for k := range dumpAfter {
			if _, ok := dumpBefore[k]; !ok {
				t.Errorf("Redis key %s of alpha appeared while only bravo made calls", k)
			}
		}
		t.Logf("%d Redis keys of alpha byte-for-byte unchanged by bravo's calls", len(dumpBefore))
	}
	after := snapshotA(c, 7, 2)
	if after.rules != before.rules || after.webhook != before.webhook || after.leaseActive != before.leaseActive ||
		after.remK != before.remK || after.remK2 != before.remK2 || after.remEdge != before.remEdge ||
		after.sharedBlocked != before.sharedBlocked {
		t.Fatalf("A's state changed:\nbefore %+v\nafter  %+v", before, after)
	}
	if after.remK != float64(2) || after.remK2 != float64(9) || after.remEdge != float64(1) || after.leaseActive != float64(1) {
		t.Fatalf("A's counters or lease: %+v", after)
	}
	// Month totals: A's 6 calls, then also the first snapshot's 3 probes; nothing of B's.
	if before.monthTotal != float64(6) || after.monthTotal != float64(9) {
		t.Fatalf("A's month total %v then %v, want 6 then 9", before.monthTotal, after.monthTotal)
	}
	// A's lease and webhook still work as A's, with A's secret.
	c.want("POST", "/v1/leases/"+leaseA+"/renew", keyA, "", 200, `"renewed":true,"active":1`)
	c.want("POST", "/v1/webhook/test", keyA, "", 202)
	ds := hookA.waitCount(t, 2, 10*time.Second)
	for _, d := range ds {
		if err := webhook.Verify(secretA, d.sig, d.body, time.Minute); err != nil {
			t.Fatalf("A's delivery does not verify with A's secret: %v", err)
		}
		if field(t, string(d.body), "account") != "alpha" {
			t.Fatalf("A's receiver got %s", d.body)
		}
	}
	for _, d := range hookB.deliveries() {
		if field(t, string(d.body), "account") != "bravo" {
			t.Fatalf("B's receiver got %s", d.body)
		}
		if webhook.Verify(secretA, d.sig, d.body, time.Minute) == nil {
			t.Fatal("B's delivery verifies with A's secret")
		}
	}
	if n := len(hookA.deliveries()); n != 2 {
		t.Fatalf("A's receiver got %d deliveries, want its own 2", n)
	}
	c.want("DELETE", "/v1/leases/"+leaseA, keyA, "", 200, `{"released":true,"active":0}`)
}

// leaseIDOf builds a lease id for (ns, key) with a token nobody holds.
func leaseIDOf(ns, key string) string {
	b := base64.RawURLEncoding
	return "l1." + b.EncodeToString([]byte(ns)) + "." + b.EncodeToString([]byte(key)) + "." + b.EncodeToString(make([]byte, 16))
}
