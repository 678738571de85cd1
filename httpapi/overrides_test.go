package httpapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestRuleOverrides: a rule's per-key overrides are written, listed and replaced with the
// rule, and checks and leases on an overridden key use them, an inline limit still
// winning (spec §6.7).
func TestRuleOverrides(t *testing.T) {
	e := newEnv(t, nil)
	mustBody(t, e.post(pRules, keyAcme, `{"algorithm":"fixed_window","limit":2,"window_ms":60000,"overrides":[{"key":"gold","limit":5,"window_ms":1000},{"key":"silver","limit":3,"window_ms":null}]}`), 201,
		`{"namespace":"ns","algorithm":"fixed_window","limit":2,"window_ms":60000,"overrides":[{"key":"gold","limit":5,"window_ms":1000},{"key":"silver","limit":3}]}`)
	mustBody(t, e.post(pRules, keyAcme, `{"algorithm":"concurrent_limit","limit":1,"window_ms":30000,"overrides":[{"key":"batch","limit":2}]}`), 201,
		`{"namespace":"ns","algorithm":"concurrent_limit","limit":1,"window_ms":30000,"overrides":[{"key":"batch","limit":2}]}`)
	mustBody(t, e.get(pRules, keyAcme), 200, `{"namespace":"ns","rules":[`+
		`{"namespace":"ns","algorithm":"fixed_window","limit":2,"window_ms":60000,"overrides":[{"key":"gold","limit":5,"window_ms":1000},{"key":"silver","limit":3}]},`+
		`{"namespace":"ns","algorithm":"concurrent_limit","limit":1,"window_ms":30000,"overrides":[{"key":"batch","limit":2}]}]}`)

	check := func(key, extra string) string { return `{"namespace":"ns","key":"` + key + `"` + extra + `}` }
	// t0 is minute-aligned: a fixed window's reset_ms is its whole window.
	mustBody(t, e.post(pLimit, keyAcme, check("gold", "")), 200, `{"allowed":true,"limit":5,"remaining":4,"reset_ms":1000}`)
	mustBody(t, e.post(pLimit, keyAcme, check("silver", "")), 200, `{"allowed":true,"limit":3,"remaining":2,"reset_ms":60000}`)
	mustBody(t, e.post(pLimit, keyAcme, check("bronze", "")), 200, `{"allowed":true,"limit":2,"remaining":1,"reset_ms":60000}`)
	mustBody(t, e.post(pLimit, keyAcme, check("silver", `,"limit":10`)), 200, `{"allowed":true,"limit":10,"remaining":8,"reset_ms":60000}`)
	mustBody(t, e.post(pLimit, keyAcme, check("gold", `,"window_ms":60000`)), 200, `{"allowed":true,"limit":5,"remaining":4,"reset_ms":60000}`)
	mustError(t, e.post(pLimit, keyAcme, check("silver", `,"cost":4`)), 400, "invalid_request", "cost")
	// A reset resolves to the override's counter.
	mustBody(t, e.post("/v1/limit/reset", keyAcme, check("gold", "")), 200, `{"reset":true}`)
	mustBody(t, e.post(pLimit, keyAcme, check("gold", "")), 200, `{"allowed":true,"limit":5,"remaining":4,"reset_ms":1000}`)

	// Leases: the concurrent rule's override.
	for i, want := range []bool{true, true, false} {
		r := e.post(pLeases, keyAcme, check("batch", ""))
		if m := r.obj(t); r.code != 200 || m["allowed"] != want || m["limit"] != float64(2) {
			t.Fatalf("lease %d on batch: %d %s", i, r.code, r.body)
		}
	}
	if r := e.post(pLeases, keyAcme, check("web", "")); r.obj(t)["limit"] != float64(1) {
		t.Fatalf("lease on web: %s", r.body)
	}

	// Replacing the rule without overrides (or with [] or null) drops them.
	for _, body := range []string{
		`{"algorithm":"fixed_window","limit":2,"window_ms":60000}`,
		`{"algorithm":"fixed_window","limit":2,"window_ms":60000,"overrides":[]}`,
		`{"algorithm":"fixed_window","limit":2,"window_ms":60000,"overrides":null}`,
	} {
		mustBody(t, e.post(pRules, keyAcme, body), 200, `{"namespace":"ns","algorithm":"fixed_window","limit":2,"window_ms":60000}`)
	}
	// silver's counter holds 2 units (the override had no window of its own: the rule's counter).
	mustBody(t, e.post(pLimit, keyAcme, check("silver", `,"cost":0`)), 200, `{"allowed":true,"limit":2,"remaining":0,"reset_ms":60000}`)
	// Other accounts never see them.
	mustBody(t, e.get(pRules, keyBeta), 200, `{"namespace":"ns","rules":[]}`)
}

// TestRuleOverridesValidation: the checks of spec §6.7 in the order of spec §6.3 and §3.7,
// each error naming its field.
func TestRuleOverridesValidation(t *testing.T) {
	e := newEnv(t, nil)
	rule := func(alg string, limit int, overrides string) string {
		return `{"algorithm":"` + alg + `","limit":` + strconv.Itoa(limit) + `,"window_ms":1000,"overrides":` + overrides + `}`
	}
	entries := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = `{"key":"k` + strconv.Itoa(i) + `","limit":1}`
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	tests := []struct {
		name    string
		key     string
		body    string
		status  int
		code    string
		message string
	}{
		{"not an array", keyAcme, rule("fixed_window", 1, `{"key":"a","limit":1}`), 400, "invalid_request", "overrides must be an array"},
		{"entry not an object", keyAcme, rule("fixed_window", 1, `[{"key":"a","limit":1},"b"]`), 400, "invalid_request", "overrides[1] must be an object"},
		{"unknown member", keyAcme, rule("fixed_window", 1, `[{"key":"a","limit":1,"algorithm":"x"}]`), 400, "invalid_request", `unknown field "overrides[0].algorithm"`},
		{"repeated member", keyAcme, rule("fixed_window", 1, `[{"key":"a","limit":1,"limit":2}]`), 400, "invalid_request", `duplicate field "overrides[0].limit"`},
		{"key not a string", keyAcme, rule("fixed_window", 1, `[{"key":1,"limit":1}]`), 400, "invalid_request", "overrides[0].key must be a string"},
		{"limit fraction", keyAcme, rule("fixed_window", 1, `[{"key":"a","limit":1.5}]`), 400, "invalid_request", "overrides[0].limit must be an integer"},
		{"negative window", keyAcme, rule("fixed_window", 1, `[{"key":"a","limit":1,"window_ms":-5}]`), 400, "invalid_request", "overrides[0].window_ms must be an integer from 1 to 31622400000"},
		{"missing key", keyAcme, rule("fixed_window", 1, `[{"limit":1}]`), 400, "invalid_request", "overrides[0].key is required"},
		{"missing limit", keyAcme, rule("fixed_window", 1, `[{"key":"a","limit":null}]`), 400, "invalid_request", "overrides[0].limit is required"},
		{"control character in key", keyAcme, rule("fixed_window", 1, `[{"key":"a\u0000","limit":1}]`), 400, "invalid_request", "overrides[0].key"},
		{"field error before the rule's range", keyAcme, rule("fixed_window", 0, `[{"key":"","limit":1}]`), 400, "invalid_request", "overrides[0].key"},
		{"rule range first", keyAcme, rule("fixed_window", 0, `[{"key":"a","limit":0}]`), 400, "invalid_rule", "limit must be an integer from"},
		{"limit 0", keyAcme, rule("fixed_window", 1, `[{"key":"a","limit":0}]`), 400, "invalid_rule", "overrides[0].limit"},
		{"limit beyond int64", keyAcme, rule("fixed_window", 1, `[{"key":"a","limit":99999999999999999999}]`), 400, "invalid_rule", "overrides[0].limit"},
		{"window above max", keyAcme, rule("fixed_window", 1, `[{"key":"a","limit":1,"window_ms":31622400001}]`), 400, "invalid_rule", "overrides[0].window_ms"},
		{"duplicate key", keyAcme, rule("fixed_window", 1, `[{"key":"a","limit":1},{"key":"a","limit":2}]`), 400, "invalid_rule", "overrides[1].key repeats the key of overrides[0]"},
		{"too many", keyAcme, rule("fixed_window", 1, entries(1001)), 400, "invalid_rule", "at most 1000"},
		{"range before unknown algorithm", keyAcme, rule("leaky", 1, `[{"key":"a","limit":0}]`), 400, "invalid_rule", "overrides[0].limit"},
		{"unknown algorithm", keyAcme, rule("leaky", 1, `[{"key":"a","limit":1}]`), 400, "unknown_algorithm", "algorithm"},
		{"range before the plan gate", keyFree, rule("concurrent_limit", 1, `[{"key":"a","limit":0}]`), 400, "invalid_rule", "overrides[0].limit"},
		{"plan gate", keyFree, rule("concurrent_limit", 1, `[{"key":"a","limit":1}]`), 403, "algorithm_not_on_plan", "concurrent_limit"},
		{"syntax error inside", keyAcme, `{"algorithm":"fixed_window","limit":1,"window_ms":1000,"overrides":[{"key":"a",}]}`, 400, "invalid_request", `in field "overrides"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mustError(t, e.post(pRules, tc.key, tc.body), tc.status, tc.code, tc.message)
		})
	}
	mustBody(t, e.get(pRules, keyAcme), 200, `{"namespace":"ns","rules":[]}`)

	// The most a rule takes; a free plan may have overrides on a rule it may have.
	if r := e.post(pRules, keyAcme, rule("fixed_window", 1, entries(1000))); r.code != http.StatusCreated || strings.Count(r.body, `"key":`) != 1000 {
		t.Fatalf("1000 overrides: %d %.200s", r.code, r.body)
	}
	mustBody(t, e.post(pRules, keyFree, rule("fixed_window", 1, `[{"key":"a","limit":7}]`)), 201,
		`{"namespace":"ns","algorithm":"fixed_window","limit":1,"window_ms":1000,"overrides":[{"key":"a","limit":7}]}`)
}
