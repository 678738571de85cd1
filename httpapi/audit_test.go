package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// auditLine is an entry as "<actor> <action> <account> <target> <client> <request id>".
func auditLine(e map[string]any) string {
	actor := e["actor"].(map[string]any)
	who := actor["type"].(string) + ":" + actor["id"].(string)
	if k, ok := actor["key_id"].(string); ok {
		who += "/" + k
	}
	return strings.Join([]string{who, e["action"].(string), e["account"].(string), e["target"].(string), e["client"].(string), e["request_id"].(string)}, " ")
}

func auditLines(page map[string]any) []string {
	var out []string
	for _, e := range page["entries"].([]any) {
		out = append(out, auditLine(e.(map[string]any)))
	}
	return out
}

// A scripted session of operator and tenant changes: the audit log answers who made each
// one (the operator, or the account and the key it called with), from which client address
// (behind a trusted proxy, the forwarded one) and in which request; the tenant reads only
// its own entries, the operator all or one account's, a page at a time (spec §15.10).
func TestAuditLogAnswersWhoDidEachChange(t *testing.T) {
	e := newAdminEnvWith(t, nil, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	const proxy = "10.0.0.1:5000"
	step := 0
	do := func(client, method, path, key, body string, status int) map[string]any {
		t.Helper()
		step++
		h := http.Header{"X-Forwarded-For": {client}, "X-Request-Id": {fmt.Sprintf("req-%d", step)}}
		got, out, _ := e.callWith(proxy, h, method, path, key, body)
		if got != status {
			t.Fatalf("step %d: %s %s: %d %v, want %d", step, method, path, got, out, status)
		}
		return out
	}
	const opIP, tenantIP = "192.0.2.10", "198.51.100.20"
	do(opIP, "POST", "/v1/admin/accounts", keyOperator, `{"id":"acme","plan":"pro"}`, 201)       // 1
	k := do(opIP, "POST", "/v1/admin/accounts/acme/keys", keyOperator, `{"name":"laptop"}`, 201) // 2
	key, keyID := k["key"].(string), k["id"].(string)
	do(tenantIP, "POST", "/v1/namespaces/api/rules", key, `{"algorithm":"fixed_window","limit":5,"window_ms":60000,"overrides":[{"key":"vip","limit":50}]}`, 201) // 3
	do(tenantIP, "POST", "/v1/limit", key, `{"namespace":"api","key":"u1"}`, 200)                                                                                 // 4: a decision, not a change
	do(tenantIP, "POST", "/v1/limit/reset", key, `{"namespace":"api","key":"u1"}`, 200)                                                                           // 5
	k2 := do(tenantIP, "POST", "/v1/keys", key, `{"name":"ci"}`, 201)                                                                                             // 6
	do(tenantIP, "DELETE", "/v1/keys/"+keyID, k2["key"].(string), "", 204)                                                                                        // 7
	key, keyID2 := k2["key"].(string), k2["id"].(string)
	do(tenantIP, "DELETE", "/v1/namespaces/api/rules/rate", key, "", 200)                                                       // 8
	do(opIP, "PATCH", "/v1/admin/accounts/acme", keyOperator, `{"plan":"scale","suspended":true}`, 200)                         // 9
	do(opIP, "PATCH", "/v1/admin/accounts/acme", keyOperator, `{"suspended":false}`, 200)                                       // 10
	do(tenantIP, "POST", "/v1/namespaces/web/rules", keyConfig, `{"algorithm":"token_bucket","limit":5,"window_ms":1000}`, 201) // 11: cfg
	do(opIP, "POST", "/v1/admin/accounts", keyOperator, `{"id":"beta","plan":"free"}`, 201)                                     // 12
	do(opIP, "DELETE", "/v1/admin/accounts/beta", keyOperator, "", 204)                                                         // 13

	want := []string{
		"operator:ops account.resumed acme acme 192.0.2.10 req-10",
		"operator:ops account.suspended acme acme 192.0.2.10 req-9",
		"operator:ops account.plan_changed acme acme 192.0.2.10 req-9",
		"account:acme/" + keyID2 + " rule.deleted acme api/rate 198.51.100.20 req-8",
		"account:acme/" + keyID2 + " key.revoked acme " + keyID + " 198.51.100.20 req-7",
		"account:acme/" + keyID + " key.issued acme " + keyID2 + " 198.51.100.20 req-6",
		"account:acme/" + keyID + " counter.reset acme api 198.51.100.20 req-5",
		"account:acme/" + keyID + " rule.set acme api/rate 198.51.100.20 req-3",
		"operator:ops key.issued acme " + keyID + " 192.0.2.10 req-2",
		"operator:ops account.created acme acme 192.0.2.10 req-1",
	}
	own := do(tenantIP, "GET", "/v1/audit", key, "", 200)
	if got := auditLines(own); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the tenant's audit log:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := auditLines(do(opIP, "GET", "/v1/admin/audit?account=acme", keyOperator, "", 200)); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the operator's log of acme:\n%s", strings.Join(got, "\n"))
	}
	all := auditLines(do(opIP, "GET", "/v1/admin/audit", keyOperator, "", 200))
	if len(all) != len(want)+3 || !strings.HasPrefix(all[0], "operator:ops account.deleted beta beta") ||
		!strings.HasPrefix(all[2], "account:cfg/config-1 rule.set cfg web/rate") {
		t.Fatalf("the whole log:\n%s", strings.Join(all, "\n"))
	}
	// Details: the facts of each change, never a secret.
	raw, _ := json.Marshal(own)
	for _, secret := range []string{key, k["key"].(string), "lsh_"} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("the audit log carries a key: %s", raw)
		}
	}
	entries := own["entries"].([]any)
	if d := entries[7].(map[string]any)["details"].(map[string]any); d["algorithm"] != "fixed_window" || d["limit"] != "5" || d["overrides"] != "1" {
		t.Errorf("rule.set details %v", d)
	}
	if d := entries[2].(map[string]any)["details"].(map[string]any); d["plan"] != "scale" {
		t.Errorf("plan_changed details %v", d)
	}
	if tm, _ := entries[0].(map[string]any)["time"].(string); !strings.HasSuffix(tm, "Z") {
		t.Errorf("time %q, want RFC 3339 in UTC", tm)
	}

	// Pages of 4 give the same entries.
	var paged []string
	cursor := ""
	for range 5 {
		page := do(tenantIP, "GET", "/v1/audit?limit=4"+cursor, key, "", 200)
		paged = append(paged, auditLines(page)...)
		next, _ := page["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = "&cursor=" + next
	}
	if strings.Join(paged, "\n") != strings.Join(want, "\n") {
		t.Fatalf("pages of 4:\n%s", strings.Join(paged, "\n"))
	}

	// Bad queries and the wrong key.
	for _, c := range []struct {
		path, key string
		status    int
		code      string
	}{
		{"/v1/audit?limit=0", key, 400, "invalid_request"},
		{"/v1/audit?limit=1001", key, 400, "invalid_request"},
		{"/v1/audit?cursor=nope", key, 400, "invalid_request"},
		{"/v1/audit?account=beta", key, 400, "invalid_request"},
		{"/v1/audit?limit=1&limit=2", key, 400, "invalid_request"},
		{"/v1/admin/audit?account=Bad!", keyOperator, 400, "invalid_request"},
		{"/v1/admin/audit?account=", keyOperator, 400, "invalid_request"},
		{"/v1/admin/audit?accounts=acme", keyOperator, 400, "invalid_request"},
		{"/v1/admin/audit", key, 403, "operator_key_required"},
		{"/v1/audit", keyOperator, 403, "account_key_required"},
		{"/v1/audit", "wrong", 401, "unauthorized"},
	} {
		if got, out, _ := e.call("", "GET", c.path, c.key, ""); got != c.status || out["code"] != c.code {
			t.Errorf("GET %s: %d %v, want %d %s", c.path, got, out, c.status, c.code)
		}
	}
	if got := do(opIP, "GET", "/v1/admin/audit?account=nobody", keyOperator, "", 200); len(got["entries"].([]any)) != 0 || got["next_cursor"] != nil {
		t.Errorf("an account without entries: %v", got)
	}

	// An account created again with a deleted one's id reads only its own entries; the
	// operator still reads them all.
	do(opIP, "DELETE", "/v1/admin/accounts/acme", keyOperator, "", 204)
	do(opIP, "POST", "/v1/admin/accounts", keyOperator, `{"id":"acme","plan":"free"}`, 201)
	again := do(opIP, "POST", "/v1/admin/accounts/acme/keys", keyOperator, "", 201)["key"].(string)
	if got := auditLines(do(tenantIP, "GET", "/v1/audit", again, "", 200)); len(got) != 2 ||
		!strings.Contains(got[0], "key.issued") || !strings.Contains(got[1], "account.created") {
		t.Errorf("the new acme's own log:\n%s", strings.Join(got, "\n"))
	}
	if got := auditLines(do(tenantIP, "GET", "/v1/audit?cursor=0000000000001-0000000000000000", again, "", 200)); len(got) != 0 {
		t.Errorf("a crafted cursor reads the deleted acme's entries:\n%s", strings.Join(got, "\n"))
	}
	if got := auditLines(do(opIP, "GET", "/v1/admin/audit?account=acme", keyOperator, "", 200)); len(got) != len(want)+3 {
		t.Errorf("the operator's log of both acmes has %d entries, want %d", len(got), len(want)+3)
	}
}
