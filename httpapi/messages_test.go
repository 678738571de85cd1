package httpapi_test

import (
	"strings"
	"testing"
)

// A negative inline limit or window and a zero one are both outside the rule range, and
// both say so in the same words, naming the real range (spec §6.3).
func TestRangeMessagesAgree(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		name, body, msg string
	}{
		{"limit zero", lim(`"limit":0,"window_ms":1000`), "limit must be an integer from 1 to 1000000000"},
		{"limit negative", lim(`"limit":-1,"window_ms":1000`), "limit must be an integer from 1 to 1000000000"},
		{"limit beyond int64", lim(`"limit":99999999999999999999,"window_ms":1000`), "limit must be an integer from 1 to 1000000000"},
		{"window zero", lim(`"limit":1,"window_ms":0`), "window_ms must be an integer from 1 to 31622400000"},
		{"window negative", lim(`"limit":1,"window_ms":-1`), "window_ms must be an integer from 1 to 31622400000"},
		{"window beyond int64", lim(`"limit":1,"window_ms":9223372036854775808`), "window_ms must be an integer from 1 to 31622400000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(pLimit, keyAcme, tc.body)
			mustError(t, r, 400, "invalid_request")
			if m := r.obj(t)["error"]; m != tc.msg {
				t.Fatalf("message %q, want %q", m, tc.msg)
			}
		})
	}
}

// On rule writes a negative value (invalid_request) and a zero one (invalid_rule) name
// the same range in the same words, overrides included.
func TestRuleRangeMessagesAgree(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		name, body, code, msg string
	}{
		{"limit zero", `{"algorithm":"fixed_window","limit":0,"window_ms":1000}`, "invalid_rule", "limit must be an integer from 1 to 1000000000"},
		{"limit negative", `{"algorithm":"fixed_window","limit":-1,"window_ms":1000}`, "invalid_request", "limit must be an integer from 1 to 1000000000"},
		{"window zero", `{"algorithm":"fixed_window","limit":1,"window_ms":0}`, "invalid_rule", "window_ms must be an integer from 1 to 31622400000"},
		{"window negative", `{"algorithm":"fixed_window","limit":1,"window_ms":-1}`, "invalid_request", "window_ms must be an integer from 1 to 31622400000"},
		{"override limit zero", `{"algorithm":"fixed_window","limit":1,"window_ms":1000,"overrides":[{"key":"a","limit":0}]}`, "invalid_rule", "overrides[0].limit must be an integer from 1 to 1000000000"},
		{"override limit negative", `{"algorithm":"fixed_window","limit":1,"window_ms":1000,"overrides":[{"key":"a","limit":-1}]}`, "invalid_request", "overrides[0].limit must be an integer from 1 to 1000000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(pRules, keyAcme, tc.body)
			mustError(t, r, 400, tc.code)
			if m := r.obj(t)["error"]; m != tc.msg {
				t.Fatalf("message %q, want %q", m, tc.msg)
			}
		})
	}
}

// A rule written without a name is answered as it is listed: without "name".
func TestRuleWithoutNameOmitsName(t *testing.T) {
	e := newEnv(t, nil)
	r := e.post(pRules, keyAcme, `{"algorithm":"fixed_window","limit":1,"window_ms":1000}`)
	if r.code != 201 || strings.Contains(r.body, `"name"`) {
		t.Fatalf("POST: %d %s, want 201 without name", r.code, r.body)
	}
	r = e.get(pRules, keyAcme)
	if r.code != 200 || strings.Contains(r.body, `"name"`) {
		t.Fatalf("GET: %d %s, want 200 without name", r.code, r.body)
	}
}
