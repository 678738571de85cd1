package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/httpapi"
	"github.com/leashd/leash/store/memstore"
)

const (
	keyOperator = "key-operator"
	keyConfig   = "key-config" // the configured account "cfg", plan pro
)

// adminEnv is an API whose engine keeps API accounts in a memory store, with one
// configured account and one operator, and the default AuthGuard.
type adminEnv struct {
	t     *testing.T
	api   *httpapi.API
	eng   *wiring.Engine
	guard *engine.AuthGuard
}

func newAdminEnv(t *testing.T) *adminEnv {
	return newAdminEnvAt(t, nil)
}

// newAdminEnvAt is newAdminEnv whose AuthGuard reads now (nil: the system clock).
func newAdminEnvAt(t *testing.T, now func() time.Time) *adminEnv {
	t.Helper()
	return newAdminEnvWith(t, now, nil)
}

// newAdminEnvWith is newAdminEnvAt whose API trusts the proxies at proxies.
func newAdminEnvWith(t *testing.T, now func() time.Time, proxies []netip.Prefix) *adminEnv {
	t.Helper()
	s := memstore.New(memstore.Options{})
	t.Cleanup(func() { s.Close() })
	dir, err := engine.NewDirectoryWith([]engine.AccountSpec{{ID: "cfg", Plan: engine.BuiltinPlans()["pro"], KeyHashes: [][32]byte{engine.HashKey(keyConfig)}}},
		engine.DirectoryOptions{Operators: []engine.OperatorSpec{{ID: "ops", KeyHashes: [][32]byte{engine.HashKey(keyOperator)}}}})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	eng := wiring.New(engine.RolesOf(s), dir, wiring.Options{Accounts: s, Audit: s, Logger: log})
	if err := eng.Accounts.LoadAccounts(context.Background()); err != nil {
		t.Fatal(err)
	}
	g := engine.NewAuthGuard(engine.AuthGuardOptions{Now: now})
	return &adminEnv{t: t, api: httpapi.New(httpapi.Options{Engine: eng, Logger: log, AuthGuard: g, TrustedProxies: proxies}), eng: eng, guard: g}
}

// call sends one request from the client address from ("" is httptest's) and returns the
// status and the decoded body.
func (e *adminEnv) call(from, method, path, key, body string) (int, map[string]any, http.Header) {
	e.t.Helper()
	return e.callWith(from, nil, method, path, key, body)
}

// callWith is call with the request headers hdr added.
func (e *adminEnv) callWith(from string, hdr http.Header, method, path, key, body string) (int, map[string]any, http.Header) {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if from != "" {
		req.RemoteAddr = from
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	e.api.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			e.t.Fatalf("%s %s: body %q is not JSON: %v", method, path, rec.Body.String(), err)
		}
	}
	return rec.Code, out, rec.Header()
}

// expect sends a request and checks its status and, for an error, its code.
func (e *adminEnv) expect(method, path, key, body string, status int, code string) map[string]any {
	e.t.Helper()
	got, out, _ := e.call("", method, path, key, body)
	if got != status || (code != "" && out["code"] != code) {
		e.t.Fatalf("%s %s %s: %d %v, want %d %s", method, path, body, got, out, status, code)
	}
	return out
}

const limitBody = `{"namespace":"ns","key":"k","limit":100,"window_ms":60000}`

func TestAdminAccountsAndKeys(t *testing.T) {
	e := newAdminEnv(t)
	acct := e.expect("POST", "/v1/admin/accounts", keyOperator, `{"id":"acme","plan":"free"}`, 201, "")
	if acct["id"] != "acme" || acct["plan"] != "free" || acct["source"] != "api" || acct["suspended"] != false || acct["keys"] != float64(0) {
		t.Fatalf("created %v", acct)
	}
	if s, _ := acct["created_at"].(string); !strings.HasSuffix(s, "Z") {
		t.Errorf("created_at %v, want RFC 3339 in UTC", acct["created_at"])
	}
	e.expect("POST", "/v1/admin/accounts", keyOperator, `{"id":"acme","plan":"pro"}`, 409, "account_exists")
	e.expect("POST", "/v1/admin/accounts", keyOperator, `{"id":"cfg","plan":"pro"}`, 409, "account_exists")
	e.expect("POST", "/v1/admin/accounts", keyOperator, `{"id":"zeta","plan":"gold"}`, 400, "unknown_plan")

	k := e.expect("POST", "/v1/admin/accounts/acme/keys", keyOperator, `{"name":"ci"}`, 201, "")
	key, _ := k["key"].(string)
	if !strings.HasPrefix(key, "lsh_") || k["name"] != "ci" || !strings.HasPrefix(key, k["prefix"].(string)) || k["id"] == "" {
		t.Fatalf("issued %v", k)
	}
	e.expect("POST", "/v1/limit", key, limitBody, 200, "")
	e.expect("POST", "/v1/leases", key, `{"namespace":"ns","key":"k","limit":1,"window_ms":1000}`, 403, "concurrent_not_on_plan")
	got := e.expect("GET", "/v1/admin/accounts/acme", keyOperator, "", 200, "")
	if got["keys"] != float64(1) {
		t.Errorf("account after one key: %v", got)
	}
	keys := e.expect("GET", "/v1/admin/accounts/acme/keys", keyOperator, "", 200, "")
	list, _ := keys["keys"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["key"] != nil || list[0].(map[string]any)["source"] != "api" {
		t.Fatalf("keys %v: want one, without its secret", keys)
	}
	// The account sees its plan and its keys, and rotates them itself.
	own := e.expect("GET", "/v1/account", key, "", 200, "")
	if own["id"] != "acme" || own["plan"] != "free" || own["plan_limits"].(map[string]any)["hard_cap"] != float64(1_000_000) {
		t.Errorf("GET /v1/account = %v", own)
	}
	k2 := e.expect("POST", "/v1/keys", key, "", 201, "")
	key2 := k2["key"].(string)
	e.expect("DELETE", "/v1/keys/"+k["id"].(string), key2, "", 204, "")
	e.expect("POST", "/v1/limit", key, limitBody, 401, "unauthorized")
	e.expect("DELETE", "/v1/keys/"+k["id"].(string), key2, "", 404, "api_key_not_found")

	// Re-plan and suspend.
	e.expect("PATCH", "/v1/admin/accounts/acme", keyOperator, `{"plan":"pro"}`, 200, "")
	e.expect("POST", "/v1/leases", key2, `{"namespace":"ns","key":"k","limit":1,"window_ms":1000}`, 200, "")
	s := e.expect("PATCH", "/v1/admin/accounts/acme", keyOperator, `{"suspended":true}`, 200, "")
	if s["suspended"] != true || s["plan"] != "pro" {
		t.Errorf("suspended %v", s)
	}
	e.expect("POST", "/v1/limit", key2, limitBody, 403, "account_suspended")
	e.expect("POST", "/v1/namespaces/ns/rules", key2, `{"algorithm":"fixed_window","limit":1,"window_ms":1000}`, 403, "account_suspended")
	e.expect("GET", "/v1/account", key2, "", 200, "") // its keys still authenticate
	e.expect("PATCH", "/v1/admin/accounts/acme", keyOperator, `{"suspended":false}`, 200, "")
	e.expect("POST", "/v1/limit", key2, limitBody, 200, "")

	// Configured accounts are read-only.
	e.expect("PATCH", "/v1/admin/accounts/cfg", keyOperator, `{"plan":"free"}`, 409, "config_read_only")
	e.expect("DELETE", "/v1/admin/accounts/cfg", keyOperator, "", 409, "config_read_only")
	e.expect("POST", "/v1/admin/accounts/cfg/keys", keyOperator, "", 409, "config_read_only")
	e.expect("POST", "/v1/keys", keyConfig, "", 409, "config_read_only")
	cfgKeys := e.expect("GET", "/v1/keys", keyConfig, "", 200, "")
	if l := cfgKeys["keys"].([]any); len(l) != 1 || l[0].(map[string]any)["source"] != "config" || l[0].(map[string]any)["created_at"] != nil {
		t.Errorf("configured keys %v", cfgKeys)
	}

	// Delete.
	e.expect("DELETE", "/v1/admin/accounts/acme", keyOperator, "", 204, "")
	e.expect("POST", "/v1/limit", key2, limitBody, 401, "unauthorized")
	e.expect("GET", "/v1/admin/accounts/acme", keyOperator, "", 404, "account_not_found")
	e.expect("DELETE", "/v1/admin/accounts/acme", keyOperator, "", 404, "account_not_found")
}

func TestAdminListPages(t *testing.T) {
	e := newAdminEnv(t)
	for _, id := range []string{"d", "a", "c", "b"} {
		e.expect("POST", "/v1/admin/accounts", keyOperator, `{"id":"`+id+`","plan":"free"}`, 201, "")
	}
	var ids []string
	path := "/v1/admin/accounts?limit=2"
	for range 5 {
		page := e.expect("GET", path, keyOperator, "", 200, "")
		for _, a := range page["accounts"].([]any) {
			ids = append(ids, a.(map[string]any)["id"].(string)+"/"+a.(map[string]any)["source"].(string))
		}
		next, ok := page["next_cursor"]
		if !ok {
			t.Fatalf("page %v has no next_cursor member", page)
		}
		if next == nil {
			break
		}
		path = "/v1/admin/accounts?limit=2&cursor=" + next.(string)
	}
	if got := strings.Join(ids, " "); got != "a/api b/api c/api cfg/config d/api" {
		t.Errorf("pages = %s", got)
	}
}

func TestAdminBadInput(t *testing.T) {
	e := newAdminEnv(t)
	for _, c := range []struct{ method, path, body, code string }{
		{"POST", "/v1/admin/accounts", `{"id":"a","plan":"free","x":1}`, "invalid_request"},
		{"POST", "/v1/admin/accounts", `{"id":"a","id":"b","plan":"free"}`, "invalid_request"},
		{"POST", "/v1/admin/accounts", `{"plan":"free"}`, "invalid_request"},
		{"POST", "/v1/admin/accounts", `{"id":"A","plan":"free"}`, "invalid_request"},
		{"POST", "/v1/admin/accounts", `{"id":"` + strings.Repeat("a", 65) + `","plan":"free"}`, "invalid_request"},
		{"POST", "/v1/admin/accounts", `{"id":"a","plan":"Free"}`, "invalid_request"},
		{"GET", "/v1/admin/accounts?limit=0", "", "invalid_request"},
		{"GET", "/v1/admin/accounts?limit=1001", "", "invalid_request"},
		{"GET", "/v1/admin/accounts?limit=1e2", "", "invalid_request"},
		{"GET", "/v1/admin/accounts?limit=5&limit=6", "", "invalid_request"},
		{"GET", "/v1/admin/accounts?page=2", "", "invalid_request"},
		{"GET", "/v1/admin/accounts/Bad!", "", "invalid_request"},
		{"PATCH", "/v1/admin/accounts/cfg", `{"suspended":"yes"}`, "invalid_request"},
		{"PATCH", "/v1/admin/accounts/cfg", `{"owner":"x"}`, "invalid_request"},
		{"POST", "/v1/admin/accounts/cfg/keys", `{"name":"` + strings.Repeat("é", 65) + `"}`, "invalid_request"},
	} {
		got, out, _ := e.call("", c.method, c.path, keyOperator, c.body)
		if got != 400 || out["code"] != c.code {
			t.Errorf("%s %s %s: %d %v, want 400 %s", c.method, c.path, c.body, got, out, c.code)
		}
	}
	e.expect("POST", "/v1/admin/accounts", keyOperator, `{"id":"`+strings.Repeat("a", 64)+`","plan":"free"}`, 201, "")
	e.expect("POST", "/v1/admin/accounts/"+strings.Repeat("a", 64)+"/keys", keyOperator, `{"name":"`+strings.Repeat("é", 64)+`"}`, 201, "")
}

func TestAdminKeyKinds(t *testing.T) {
	e := newAdminEnv(t)
	e.expect("GET", "/v1/admin/accounts", keyConfig, "", 403, "operator_key_required")
	e.expect("POST", "/v1/admin/accounts", keyConfig, `{"id":"x","plan":"free"}`, 403, "operator_key_required")
	e.expect("POST", "/v1/limit", keyOperator, limitBody, 403, "account_key_required")
	e.expect("GET", "/v1/account", keyOperator, "", 403, "account_key_required")
	e.expect("GET", "/v1/admin/accounts", "", "", 401, "unauthorized")
	e.expect("GET", "/v1/admin/accounts", "nope", "", 401, "unauthorized")
	// Routing first, before any key (spec §3.5, §3.7).
	_, out, h := e.call("", "PUT", "/v1/admin/accounts/acme", "", `{}`)
	if out["code"] != "method_not_allowed" || h.Get("Allow") != "DELETE, GET, HEAD, PATCH" {
		t.Errorf("PUT on an account: %v, Allow %q", out, h.Get("Allow"))
	}
	e.expect("GET", "/v1/admin/accounts/acme/", "", "", 404, "not_found")
}

// TestAuthFailuresSlowOneAddress sends 10,000 bad keys from one address: after the burst
// they are refused with 429 and Retry-After, counted, while another address's calls all
// succeed (spec §15.7).
func TestAuthFailuresSlowOneAddress(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // the guard's clock stands still
	e := newAdminEnvAt(t, func() time.Time { return at })
	const attacker, other = "198.51.100.7:4000", "203.0.113.9:5000"
	codes := map[int]int{}
	for i := range 10_000 {
		status, out, h := e.call(attacker, "POST", "/v1/limit", "bad-"+strings.Repeat("x", i%7), limitBody)
		codes[status]++
		if status == 429 && (out["code"] != "too_many_auth_failures" || h.Get("Retry-After") != "1") {
			t.Fatalf("429 %v, Retry-After %q", out, h.Get("Retry-After"))
		}
		if i%100 == 0 {
			if s, out, _ := e.call(other, "POST", "/v1/limit", keyConfig, limitBody); s != 200 {
				t.Fatalf("another client's call after %d bad keys: %d %v", i, s, out)
			}
		}
	}
	if codes[401] != engine.AuthFailureBurst || codes[429] != 10_000-engine.AuthFailureBurst {
		t.Errorf("answers %v: want %d 401s, the rest 429", codes, engine.AuthFailureBurst)
	}
	if got := e.guard.Refused(); got != uint64(codes[429]) {
		t.Errorf("Refused() = %d, want %d", got, codes[429])
	}
	// The slowed address is refused whatever its key: a key guessed right stays unknown.
	if s, out, _ := e.call(attacker, "POST", "/v1/limit", keyConfig, limitBody); s != 429 {
		t.Errorf("a good key from the slowed address: %d %v, want 429", s, out)
	}
	// One more failure is allowed per second.
	at = at.Add(time.Second)
	if s, _, _ := e.call(attacker, "POST", "/v1/limit", "bad", limitBody); s != 401 {
		t.Errorf("a bad key 1 s later: %d, want 401", s)
	}
	if s, _, _ := e.call(attacker, "POST", "/v1/limit", "bad", limitBody); s != 429 {
		t.Errorf("the next bad key: %d, want 429", s)
	}
}

// TestAccountReads: GET /v1/usage (and the operator's copy), /v1/namespaces and
// /v1/namespaces/{ns}/leases; a deleted account's rules go with it.
func TestAccountReads(t *testing.T) {
	e := newAdminEnv(t)
	e.expect("POST", "/v1/admin/accounts", keyOperator, `{"id":"acme","plan":"pro"}`, 201, "")
	key := e.expect("POST", "/v1/admin/accounts/acme/keys", keyOperator, "", 201, "")["key"].(string)
	for range 3 {
		e.expect("POST", "/v1/limit", key, `{"namespace":"web","key":"u","limit":2,"window_ms":60000}`, 200, "")
	}
	e.expect("POST", "/v1/limit", key, `{"namespace":"api","key":"u","limit":9,"window_ms":60000}`, 200, "")
	e.expect("POST", "/v1/namespaces/quiet/rules", key, `{"algorithm":"fixed_window","limit":5,"window_ms":1000}`, 201, "")
	e.expect("POST", "/v1/limit", keyConfig, `{"namespace":"web","key":"u","limit":9,"window_ms":60000}`, 200, "")
	if err := e.eng.Usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	u := e.expect("GET", "/v1/usage", key, "", 200, "")
	if m := u["month"].(map[string]any); m["total"] != float64(4) || m["quota"] != float64(10_000_000) {
		t.Errorf("usage month %v", m)
	}
	if got, _ := json.Marshal(u["namespaces"]); string(got) != `[{"blocked":0,"namespace":"api","total":1},{"blocked":1,"namespace":"web","total":3}]` {
		t.Errorf("usage namespaces %s", got)
	}
	days := u["days"].([]any)
	if len(days) != 30 || days[29].(map[string]any)["total"] != float64(4) || days[29].(map[string]any)["blocked"] != float64(1) {
		t.Errorf("usage days: %d, last %v", len(days), days[len(days)-1])
	}
	if adm := e.expect("GET", "/v1/admin/accounts/acme/usage", keyOperator, "", 200, ""); adm["month"].(map[string]any)["total"] != float64(4) {
		t.Errorf("operator's usage %v", adm)
	}
	e.expect("GET", "/v1/admin/accounts/nobody/usage", keyOperator, "", 404, "account_not_found")
	ns := e.expect("GET", "/v1/namespaces", key, "", 200, "")
	if got, _ := json.Marshal(ns["namespaces"]); string(got) != `[{"blocked":0,"namespace":"api","rules":0,"total":1},{"blocked":0,"namespace":"quiet","rules":1,"total":0},{"blocked":1,"namespace":"web","rules":0,"total":3}]` {
		t.Errorf("namespaces %s", got)
	}

	// Leases: the limit as an acquisition would resolve it.
	e.expect("GET", "/v1/namespaces/jobs/leases", key, "", 400, "invalid_request")
	e.expect("GET", "/v1/namespaces/jobs/leases?key=a&key=b", key, "", 400, "invalid_request")
	l := e.expect("GET", "/v1/namespaces/jobs/leases?key=w1", key, "", 200, "")
	if l["active"] != float64(0) || l["limit"] != nil || len(l["leases"].([]any)) != 0 {
		t.Errorf("no leases: %v", l)
	}
	first := e.expect("POST", "/v1/leases", key, `{"namespace":"jobs","key":"w1","limit":3,"window_ms":60000}`, 200, "")
	e.expect("POST", "/v1/leases", key, `{"namespace":"jobs","key":"w1","limit":3,"window_ms":30000}`, 200, "")
	e.expect("POST", "/v1/namespaces/jobs/rules", key, `{"algorithm":"concurrent_limit","limit":5,"window_ms":1000,"overrides":[{"key":"w1","limit":7}]}`, 201, "")
	l = e.expect("GET", "/v1/namespaces/jobs/leases?key=w1", key, "", 200, "")
	leases := l["leases"].([]any)
	if l["active"] != float64(2) || l["limit"] != float64(7) || l["namespace"] != "jobs" || l["key"] != "w1" || len(leases) != 2 {
		t.Fatalf("two leases: %v", l)
	}
	if last := leases[1].(map[string]any); last["lease_id"] != first["lease_id"] || last["expires_in_ms"].(float64) > 60000 || last["expires_in_ms"].(float64) < 59000 {
		t.Errorf("leases %v: want the 60 s one last, with its lease id", leases)
	}
	if other := e.expect("GET", "/v1/namespaces/jobs/leases?key=w2", key, "", 200, ""); other["limit"] != float64(5) {
		t.Errorf("another key's limit: %v", other)
	}

	// Deleting the account removes its rules: created again, it has none.
	e.expect("DELETE", "/v1/admin/accounts/acme", keyOperator, "", 204, "")
	e.expect("POST", "/v1/admin/accounts", keyOperator, `{"id":"acme","plan":"pro"}`, 201, "")
	key = e.expect("POST", "/v1/admin/accounts/acme/keys", keyOperator, "", 201, "")["key"].(string)
	e.expect("GET", "/v1/namespaces/quiet/rules", key, "", 200, "")
	if got := e.expect("GET", "/v1/namespaces/quiet/rules", key, "", 200, ""); len(got["rules"].([]any)) != 0 {
		t.Errorf("a re-created account's rules: %v", got)
	}
}

// A suspended account cannot issue itself keys, set or test a webhook or change rules;
// it can still read, revoke its keys and remove its webhook, and GET /v1/account says it
// is suspended (spec §15.6).
func TestSuspendedAccountCannotChangeItself(t *testing.T) {
	e := newAdminEnv(t)
	e.expect("POST", "/v1/admin/accounts", keyOperator, `{"id":"acme","plan":"pro"}`, 201, "")
	k := e.expect("POST", "/v1/admin/accounts/acme/keys", keyOperator, "", 201, "")
	key := k["key"].(string)
	spare := e.expect("POST", "/v1/keys", key, `{"name":"spare"}`, 201, "")
	if own := e.expect("GET", "/v1/account", key, "", 200, ""); own["suspended"] != false {
		t.Fatalf("GET /v1/account of an active account = %v, want suspended false", own)
	}
	e.expect("PATCH", "/v1/admin/accounts/acme", keyOperator, `{"suspended":true}`, 200, "")

	if own := e.expect("GET", "/v1/account", key, "", 200, ""); own["suspended"] != true {
		t.Errorf("GET /v1/account of a suspended account = %v, want suspended true", own)
	}
	e.expect("POST", "/v1/keys", key, "", 403, "account_suspended")
	e.expect("POST", "/v1/keys", key, `{"name":"x"}`, 403, "account_suspended")
	e.expect("PUT", "/v1/webhook", key, `{"url":"https://example.com/hook"}`, 403, "account_suspended")
	e.expect("POST", "/v1/webhook/test", key, "", 403, "account_suspended")
	e.expect("POST", "/v1/namespaces/ns/rules", key, `{"algorithm":"fixed_window","limit":1,"window_ms":1000}`, 403, "account_suspended")
	e.expect("DELETE", "/v1/namespaces/ns/rules/rate", key, "", 403, "account_suspended")
	// Reads, revocation and removing the webhook stay allowed.
	e.expect("GET", "/v1/keys", key, "", 200, "")
	e.expect("GET", "/v1/namespaces/ns/rules", key, "", 200, "")
	e.expect("DELETE", "/v1/webhook", key, "", 204, "")
	e.expect("DELETE", "/v1/keys/"+spare["id"].(string), key, "", 204, "")
	// The operator still manages the account's keys.
	e.expect("POST", "/v1/admin/accounts/acme/keys", keyOperator, "", 201, "")

	e.expect("PATCH", "/v1/admin/accounts/acme", keyOperator, `{"suspended":false}`, 200, "")
	e.expect("POST", "/v1/keys", key, "", 201, "")
}

// Every /v1 answer is marked not to be stored by caches nor sniffed: some carry a secret
// (an issued key, a webhook's secret), and an error answer is no less private (spec §3.6).
func TestAnswersNotCachedNorSniffed(t *testing.T) {
	e := newAdminEnv(t)
	e.expect("POST", "/v1/admin/accounts", keyOperator, `{"id":"acme","plan":"pro"}`, 201, "")
	k := e.expect("POST", "/v1/admin/accounts/acme/keys", keyOperator, "", 201, "")
	key := k["key"].(string)
	for _, c := range []struct{ method, path, key, body string }{
		{"POST", "/v1/admin/accounts/acme/keys", keyOperator, ""},
		{"POST", "/v1/keys", key, ""},
		{"PUT", "/v1/webhook", key, `{"url":"https://example.com/hook"}`},
		{"POST", "/v1/limit", key, limitBody},
		{"GET", "/v1/account", key, ""},
		{"GET", "/v1/account", "wrong", ""},
		{"GET", "/v1/nowhere", key, ""},
		{"PUT", "/v1/account", key, ""},
	} {
		_, _, h := e.call("", c.method, c.path, c.key, c.body)
		if h.Get("Cache-Control") != "no-store" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: Cache-Control %q, X-Content-Type-Options %q; want no-store, nosniff", c.method, c.path,
				h.Get("Cache-Control"), h.Get("X-Content-Type-Options"))
		}
	}
}

// Names that people read (key names, rule names) refuse Unicode bidirectional controls,
// which can make one name pass for another in a listing (spec §3.4).
func TestNamesRefuseBidiControls(t *testing.T) {
	e := newAdminEnv(t)
	e.expect("POST", "/v1/admin/accounts", keyOperator, `{"id":"acme","plan":"pro"}`, 201, "")
	k := e.expect("POST", "/v1/admin/accounts/acme/keys", keyOperator, "", 201, "")
	key := k["key"].(string)
	for _, bidi := range []string{`\u202e`, `\u202a`, `\u2066`, `\u2069`, `\u200f`, `\u061c`} {
		name := `{"name":"ci` + bidi + `exe.txt"}`
		e.expect("POST", "/v1/keys", key, name, 400, "invalid_request")
		e.expect("POST", "/v1/admin/accounts/acme/keys", keyOperator, name, 400, "invalid_request")
		e.expect("POST", "/v1/namespaces/ns/rules", key, `{"algorithm":"fixed_window","limit":1,"window_ms":1000,"name":"r`+bidi+`x"}`, 400, "invalid_request")
	}
	// Other scripts, right-to-left ones included, are names like any other.
	e.expect("POST", "/v1/keys", key, `{"name":"מפתח ci"}`, 201, "")
	e.expect("POST", "/v1/namespaces/ns/rules", key, `{"algorithm":"fixed_window","limit":1,"window_ms":1000,"name":"قاعدة"}`, 201, "")
}
