package httpapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/leashd/leash/engine"
)

const (
	pLimit  = "/v1/limit"
	pReset  = "/v1/limit/reset"
	pLeases = "/v1/leases"
	pRules  = "/v1/namespaces/ns/rules"

	pWebhook     = "/v1/webhook"
	pWebhookTest = "/v1/webhook/test"
)

// lim builds a /v1/limit body from the fixed namespace and key plus extra members.
func lim(extra string) string {
	b := `{"namespace":"ns","key":"k"`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

// TestErrorTable walks the error table of spec §3.6: every row, its status, code,
// message and headers.
func TestErrorTable(t *testing.T) {
	long := strings.Repeat("k", engine.MaxKey+1)
	tests := []struct {
		name   string
		q      req
		status int
		code   string
		msg    []string
	}{
		// invalid_request: malformed bodies.
		{"unknown field", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1,"window_ms":1000,"bogus":1`)}, 400, "invalid_request", []string{`unknown field "bogus"`}},
		{"wrong type limit", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":"10","window_ms":1000`)}, 400, "invalid_request", []string{"limit must be an integer"}},
		{"wrong type namespace", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":5,"key":"k","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"namespace must be a string"}},
		{"wrong type key", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":"ns","key":["k"],"limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"key must be a string"}},
		{"wrong type algorithm", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"algorithm":true,"limit":1,"window_ms":1000`)}, 400, "invalid_request", []string{"algorithm must be a string"}},
		{"wrong type cost", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1,"window_ms":1000,"cost":{}`)}, 400, "invalid_request", []string{"cost must be an integer"}},
		{"fraction", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1.0,"window_ms":1000`)}, 400, "invalid_request", []string{"limit", "integer"}},
		{"exponent", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1,"window_ms":1e3`)}, 400, "invalid_request", []string{"window_ms", "integer"}},
		{"negative cost", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1,"window_ms":1000,"cost":-1`)}, 400, "invalid_request", []string{"cost must be a non-negative integer"}},
		{"negative limit", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":-5,"window_ms":1000`)}, 400, "invalid_request", []string{"limit must be an integer from 1 to 1000000000"}},
		{"negative window beyond int64", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1,"window_ms":-99999999999999999999`)}, 400, "invalid_request", []string{"window_ms must be an integer from 1 to 31622400000"}},
		{"beyond int64", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1,"window_ms":9223372036854775808`)}, 400, "invalid_request", []string{"window_ms"}},
		{"beyond int64 cost", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1,"window_ms":1000,"cost":100000000000000000000000`)}, 400, "invalid_request", []string{"cost"}},
		{"member name invalid UTF-8", req{method: "POST", path: pLimit, key: keyAcme, body: "{\"namespace\":\"ns\",\"k\xffey\":\"k\"}"}, 400, "invalid_request", []string{`unknown field "k\xffey"`}},
		{"member name lone surrogate", req{method: "POST", path: pLeases, key: keyAcme, body: `{"k\udc00ey":"k"}`}, 400, "invalid_request", []string{`unknown field "k`}},
		{"member name invalid UTF-8 before syntax error", req{method: "PUT", path: pWebhook, key: keyAcme, body: "{\"\xe0\""}, 400, "invalid_request", []string{`unknown field "\xe0"`}},
		{"duplicate key", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":"ns","key":"a","key":"b","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{`duplicate field "key"`}},
		{"duplicate escaped", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":"ns","key":"a","k\u0065y":"b","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{`duplicate field "key"`}},
		{"duplicate null", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":null,"limit":1,"window_ms":1000`)}, 400, "invalid_request", []string{`duplicate field "limit"`}},
		{"array body", req{method: "POST", path: pLimit, key: keyAcme, body: `[1]`}, 400, "invalid_request", []string{"JSON object"}},
		{"string body", req{method: "POST", path: pLimit, key: keyAcme, body: `"x"`}, 400, "invalid_request", []string{"JSON object"}},
		{"null body", req{method: "POST", path: pLimit, key: keyAcme, body: `null`}, 400, "invalid_request", []string{"JSON object"}},
		{"trailing object", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1,"window_ms":1000`) + ` {}`}, 400, "invalid_request", []string{"nothing after"}},
		{"trailing garbage", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1,"window_ms":1000`) + `x`}, 400, "invalid_request", []string{"nothing after"}},
		{"empty body", req{method: "POST", path: pLimit, key: keyAcme}, 400, "invalid_request", []string{"body is required"}},
		{"blank body", req{method: "POST", path: pLimit, key: keyAcme, body: " \n "}, 400, "invalid_request", []string{"body is required"}},
		{"truncated", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":`}, 400, "invalid_request", []string{"not valid JSON"}},
		{"syntax in field", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":01`)}, 400, "invalid_request", []string{"not valid JSON", "limit"}},
		// invalid_request: bad namespace and key.
		{"namespace empty", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":"","key":"k","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"namespace"}},
		{"namespace missing", req{method: "POST", path: pLimit, key: keyAcme, body: `{"key":"k","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"namespace"}},
		{"namespace leading dot", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":".ns","key":"k","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"namespace"}},
		{"namespace space", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":"a b","key":"k","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"namespace"}},
		{"namespace too long", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":"` + strings.Repeat("n", 129) + `","key":"k","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"namespace"}},
		{"namespace in path", req{method: "GET", path: "/v1/namespaces/-bad/rules", key: keyAcme}, 400, "invalid_request", []string{"namespace"}},
		{"namespace in path stats", req{method: "GET", path: "/v1/namespaces/a%20b/stats", key: keyAcme}, 400, "invalid_request", []string{"namespace"}},
		{"namespace in path rule post", req{method: "POST", path: "/v1/namespaces/_x/rules", key: keyAcme, body: `{"algorithm":"fixed_window","limit":1,"window_ms":1}`}, 400, "invalid_request", []string{"namespace"}},
		{"namespace in path rule delete", req{method: "DELETE", path: "/v1/namespaces/" + strings.Repeat("n", 129) + "/rules/rate", key: keyAcme}, 400, "invalid_request", []string{"namespace"}},
		{"key empty", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":"ns","key":"","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"key"}},
		{"key control char", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":"ns","key":"a\u0001b","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"key"}},
		{"key DEL", req{method: "POST", path: pLimit, key: keyAcme, body: "{\"namespace\":\"ns\",\"key\":\"a\x7fb\",\"limit\":1,\"window_ms\":1000}"}, 400, "invalid_request", []string{"key"}},
		{"key C1 control", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":"ns","key":"a\u0085b","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"key"}},
		{"key too long", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":"ns","key":"` + long + `","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"key"}},
		{"key invalid UTF-8", req{method: "POST", path: pLimit, key: keyAcme, body: "{\"namespace\":\"ns\",\"key\":\"a\xffb\",\"limit\":1,\"window_ms\":1000}"}, 400, "invalid_request", []string{"key must be valid UTF-8"}},
		{"key lone surrogate", req{method: "POST", path: pLimit, key: keyAcme, body: `{"namespace":"ns","key":"a\ud800b","limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"key must be valid UTF-8"}},
		{"key raw newline", req{method: "POST", path: pLimit, key: keyAcme, body: "{\"namespace\":\"ns\",\"key\":\"a\nb\",\"limit\":1,\"window_ms\":1000}"}, 400, "invalid_request", []string{"key"}},
		// invalid_request: values the engine rejects.
		{"cost above limit", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":5,"window_ms":1000,"cost":6`)}, 400, "invalid_request", []string{"cost"}},
		{"concurrent_limit on limit", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"algorithm":"concurrent_limit","limit":5,"window_ms":1000`)}, 400, "invalid_request", []string{"concurrent_limit"}},
		{"inline limit zero", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":0,"window_ms":1000`)}, 400, "invalid_request", []string{"limit"}},
		{"inline window above max", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1,"window_ms":31622400001`)}, 400, "invalid_request", []string{"window_ms"}},
		{"lease limit above max", req{method: "POST", path: pLeases, key: keyAcme, body: lim(`"limit":1000000001,"window_ms":1000`)}, 400, "invalid_request", []string{"limit"}},
		{"lease unknown field", req{method: "POST", path: pLeases, key: keyAcme, body: lim(`"limit":1,"window_ms":1000,"algorithm":"concurrent_limit"`)}, 400, "invalid_request", []string{`unknown field "algorithm"`}},
		{"renew negative window", req{method: "POST", path: "/v1/leases/x/renew", key: keyAcme, body: `{"window_ms":-1}`}, 400, "invalid_request", []string{"window_ms must be an integer from 1 to 31622400000"}},
		{"renew unknown field", req{method: "POST", path: "/v1/leases/x/renew", key: keyAcme, body: `{"ttl":1}`}, 400, "invalid_request", []string{`unknown field "ttl"`}},
		{"reset wrong type", req{method: "POST", path: pReset, key: keyAcme, body: lim(`"window_ms":true`)}, 400, "invalid_request", []string{"window_ms"}},
		// missing_limit, unknown_algorithm.
		{"missing limit", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"window_ms":1000`)}, 400, "missing_limit", nil},
		{"missing window", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":10`)}, 400, "missing_limit", nil},
		{"missing lease limit", req{method: "POST", path: pLeases, key: keyAcme, body: lim(`"window_ms":1000`)}, 400, "missing_limit", nil},
		{"reset missing window", req{method: "POST", path: pReset, key: keyAcme, body: lim("")}, 400, "missing_limit", nil},
		{"unknown algorithm", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"algorithm":"leaky_bucket","limit":1,"window_ms":1000`)}, 400, "unknown_algorithm", nil},
		{"unknown algorithm rule", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"nope","limit":1,"window_ms":1}`}, 400, "unknown_algorithm", nil},
		// Rules: invalid_request versus invalid_rule (spec §6.3).
		{"rule limit 0", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":0,"window_ms":1000}`}, 400, "invalid_rule", []string{"limit"}},
		{"rule limit above max", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":1000000001,"window_ms":1000}`}, 400, "invalid_rule", []string{"limit"}},
		{"rule window above max", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":1,"window_ms":31622400001}`}, 400, "invalid_rule", []string{"window_ms"}},
		{"rule window 0", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":1,"window_ms":0}`}, 400, "invalid_rule", []string{"window_ms"}},
		{"rule limit beyond int64", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":9223372036854775808,"window_ms":1000}`}, 400, "invalid_rule", []string{"limit"}},
		{"rule window far beyond int64", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":1,"window_ms":123456789012345678901234567890}`}, 400, "invalid_rule", []string{"window_ms"}},
		{"rule limit negative", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":-1,"window_ms":1000}`}, 400, "invalid_request", []string{"limit must be an integer from 1 to 1000000000"}},
		{"rule limit fraction", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":1.5,"window_ms":1000}`}, 400, "invalid_request", []string{"limit"}},
		{"rule limit 1.0", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":1.0,"window_ms":1000}`}, 400, "invalid_request", []string{"limit"}},
		{"rule window string", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":1,"window_ms":"1000"}`}, 400, "invalid_request", []string{"window_ms"}},
		{"rule limit missing", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","window_ms":1000}`}, 400, "invalid_request", []string{"limit"}},
		{"rule limit null", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":null,"window_ms":1000}`}, 400, "invalid_request", []string{"limit"}},
		{"rule algorithm missing", req{method: "POST", path: pRules, key: keyAcme, body: `{"limit":1,"window_ms":1000}`}, 400, "invalid_request", []string{"algorithm"}},
		{"rule name wrong type", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":1,"window_ms":1000,"name":7}`}, 400, "invalid_request", []string{"name"}},
		{"rule name too long", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":1,"window_ms":1000,"name":"` + strings.Repeat("x", 257) + `"}`}, 400, "invalid_request", []string{"name"}},
		{"rule namespace wrong type", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":1,"window_ms":1000,"namespace":1}`}, 400, "invalid_request", []string{"namespace"}},
		{"rule unknown field", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":1,"window_ms":1000,"cost":1}`}, 400, "invalid_request", []string{`unknown field "cost"`}},
		// invalid_lease_id.
		{"lease id garbage release", req{method: "DELETE", path: "/v1/leases/garbage", key: keyAcme}, 400, "invalid_lease_id", nil},
		{"lease id garbage renew", req{method: "POST", path: "/v1/leases/garbage/renew", key: keyAcme}, 400, "invalid_lease_id", nil},
		{"lease id truncated", req{method: "DELETE", path: "/v1/leases/l1.bnM.aw.AAAA", key: keyAcme}, 400, "invalid_lease_id", nil},
		// unauthorized.
		{"no key", req{method: "POST", path: pLimit, body: lim(`"limit":1,"window_ms":1000`)}, 401, "unauthorized", []string{"missing or invalid API key"}},
		{"unknown key", req{method: "POST", path: pLimit, key: "nope", body: lim(`"limit":1,"window_ms":1000`)}, 401, "unauthorized", []string{"missing or invalid API key"}},
		{"wrong scheme", req{method: "POST", path: pLimit, auth: "Basic " + keyAcme, body: lim(`"limit":1,"window_ms":1000`)}, 401, "unauthorized", nil},
		{"scheme only", req{method: "GET", path: pRules, auth: "Bearer"}, 401, "unauthorized", nil},
		{"scheme and spaces", req{method: "GET", path: pRules, auth: "Bearer   "}, 401, "unauthorized", nil},
		{"key without scheme", req{method: "GET", path: pRules, auth: keyAcme}, 401, "unauthorized", nil},
		{"no key stats", req{method: "GET", path: "/v1/namespaces/ns/stats"}, 401, "unauthorized", nil},
		{"no key release", req{method: "DELETE", path: "/v1/leases/garbage"}, 401, "unauthorized", nil},
		// Plan gates.
		{"token_bucket on free", req{method: "POST", path: pLimit, key: keyFree, body: lim(`"algorithm":"token_bucket","limit":1,"window_ms":1000`)}, 403, "algorithm_not_on_plan", []string{"token_bucket"}},
		{"token_bucket rule on free", req{method: "POST", path: pRules, key: keyFree, body: `{"algorithm":"token_bucket","limit":1,"window_ms":1000}`}, 403, "algorithm_not_on_plan", nil},
		{"concurrent rule on free", req{method: "POST", path: pRules, key: keyFree, body: `{"algorithm":"concurrent_limit","limit":1,"window_ms":1000}`}, 403, "algorithm_not_on_plan", nil},
		{"token_bucket reset on free", req{method: "POST", path: pReset, key: keyFree, body: lim(`"algorithm":"token_bucket","window_ms":1000`)}, 403, "algorithm_not_on_plan", nil},
		{"leases on free", req{method: "POST", path: pLeases, key: keyFree, body: lim(`"limit":1,"window_ms":1000`)}, 403, "concurrent_not_on_plan", nil},
		{"webhook on free", req{method: "PUT", path: pWebhook, key: keyFree, body: `{"url":"https://hooks.example.com/"}`}, 403, "webhook_not_on_plan", []string{"free"}},
		{"webhook test on free", req{method: "POST", path: pWebhookTest, key: keyFree}, 403, "webhook_not_on_plan", nil},
		// webhook_not_found, webhook_url_rejected.
		{"no webhook", req{method: "GET", path: pWebhook, key: keyAcme}, 404, "webhook_not_found", nil},
		{"no webhook to test", req{method: "POST", path: pWebhookTest, key: keyAcme}, 404, "webhook_not_found", nil},
		{"webhook http", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":"http://hooks.example.com/"}`}, 422, "webhook_url_rejected", []string{"https"}},
		{"webhook metadata", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":"https://169.254.169.254/latest"}`}, 422, "webhook_url_rejected", nil},
		{"webhook loopback decimal", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":"https://2130706433/"}`}, 422, "webhook_url_rejected", nil},
		{"webhook localhost", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":"https://localhost/"}`}, 422, "webhook_url_rejected", nil},
		{"webhook userinfo", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":"https://u:p@hooks.example.com/"}`}, 422, "webhook_url_rejected", []string{"userinfo"}},
		{"webhook resolves private", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":"https://private.example.com/"}`}, 422, "webhook_url_rejected", []string{"resolves"}},
		{"webhook does not resolve", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":"https://nowhere.example.com/"}`}, 422, "webhook_url_rejected", []string{"does not resolve"}},
		{"webhook too long", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":"https://hooks.example.com/` + strings.Repeat("a", 2048) + `"}`}, 422, "webhook_url_rejected", []string{"2048"}},
		{"webhook empty url", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":""}`}, 422, "webhook_url_rejected", nil},
		// invalid_request on webhook bodies.
		{"webhook url missing", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{}`}, 400, "invalid_request", []string{"url is required"}},
		{"webhook url null", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":null}`}, 400, "invalid_request", []string{"url is required"}},
		{"webhook url wrong type", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":["https://hooks.example.com/"]}`}, 400, "invalid_request", []string{"url must be a string"}},
		{"webhook unknown field", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":"https://hooks.example.com/","secret":"x"}`}, 400, "invalid_request", []string{`unknown field "secret"`}},
		{"webhook duplicate url", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":"https://hooks.example.com/","url":"https://hooks.example.com/"}`}, 400, "invalid_request", []string{`duplicate field "url"`}},
		{"webhook no body", req{method: "PUT", path: pWebhook, key: keyAcme}, 400, "invalid_request", []string{"body is required"}},
		{"no key webhook", req{method: "GET", path: pWebhook}, 401, "unauthorized", nil},
		{"no key webhook test", req{method: "POST", path: pWebhookTest}, 401, "unauthorized", nil},
		// key_not_found.
		{"reset fresh counter", req{method: "POST", path: pReset, key: keyAcme, body: lim(`"window_ms":1000`)}, 404, "key_not_found", nil},
		// Routing.
		{"unknown path", req{method: "GET", path: "/v1/nope", key: keyAcme}, 404, "not_found", nil},
		{"root", req{method: "GET", path: "/"}, 404, "not_found", nil},
		{"trailing slash", req{method: "POST", path: "/v1/limit/", key: keyAcme, body: lim("")}, 404, "not_found", nil},
		{"unclean path", req{method: "POST", path: "/v1//limit", key: keyAcme, body: lim("")}, 404, "not_found", nil},
		{"dot segment", req{method: "POST", path: "/v1/leases/../limit", key: keyAcme, body: lim("")}, 404, "not_found", nil},
		{"webhook test subpath", req{method: "POST", path: "/v1/webhook/test/x", key: keyAcme}, 404, "not_found", nil},
		{"bad rule kind", req{method: "DELETE", path: "/v1/namespaces/ns/rules/foo", key: keyAcme}, 404, "not_found", nil},
		{"bad rule kind before auth", req{method: "DELETE", path: "/v1/namespaces/ns/rules/foo"}, 404, "not_found", nil},
		{"bad rule kind other method", req{method: "GET", path: "/v1/namespaces/ns/rules/foo"}, 404, "not_found", nil},
		{"too deep", req{method: "GET", path: "/v1/namespaces/ns/rules/rate/x"}, 404, "not_found", nil},
		// request_too_large, unsupported_media_type.
		{"too large", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"name":"` + strings.Repeat("x", 64<<10) + `"`)}, 413, "request_too_large", nil},
		{"text/plain", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1,"window_ms":1000`), contentType: "text/plain"}, 415, "unsupported_media_type", nil},
		{"form", req{method: "POST", path: pRules, key: keyAcme, body: `a=b`, contentType: "application/x-www-form-urlencoded"}, 415, "unsupported_media_type", nil},
		{"json suffix type", req{method: "POST", path: pLeases, key: keyAcme, body: lim(`"limit":1,"window_ms":1000`), contentType: "application/problem+json"}, 415, "unsupported_media_type", nil},
		{"renew with body of other type", req{method: "POST", path: "/v1/leases/x/renew", key: keyAcme, body: `{}`, contentType: "text/plain"}, 415, "unsupported_media_type", nil},
		{"empty body of other type", req{method: "POST", path: pLimit, key: keyAcme, contentType: "text/plain"}, 415, "unsupported_media_type", nil},
	}
	e := newEnv(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.t = t
			r := e.do(tt.q)
			mustError(t, r, tt.status, tt.code, tt.msg...)
			if tt.status == http.StatusUnauthorized && r.hdr.Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("WWW-Authenticate %q, want Bearer", r.hdr.Get("WWW-Authenticate"))
			}
		})
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct{ method, path, allow string }{
		{"GET", "/v1/limit", "POST"},
		{"PUT", "/v1/limit/reset", "POST"},
		{"HEAD", "/v1/leases", "POST"},
		{"GET", "/v1/leases/abc", "DELETE"},
		{"DELETE", "/v1/leases/abc/renew", "POST"},
		{"PUT", "/v1/namespaces/ns/rules", "GET, HEAD, POST"},
		{"POST", "/v1/namespaces/ns/rules/rate", "DELETE"},
		{"GET", "/v1/namespaces/ns/rules/concurrent", "DELETE"},
		{"POST", "/v1/namespaces/ns/stats", "GET, HEAD"},
		{"OPTIONS", "/v1/limit", "POST"},
		{"POST", pWebhook, "DELETE, GET, HEAD, PUT"},
		{"GET", pWebhookTest, "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			e.t = t
			// No API key at all: routing is decided before auth.
			r := e.do(req{method: tt.method, path: tt.path, body: `{"x":1}`, contentType: "text/plain"})
			mustError(t, r, 405, "method_not_allowed")
			if got := r.hdr.Get("Allow"); got != tt.allow {
				t.Fatalf("Allow %q, want %q", got, tt.allow)
			}
		})
	}
}

// TestCheckOrder pins the order of spec §3.7 where two failures meet.
func TestCheckOrder(t *testing.T) {
	e := newEnv(t, nil)
	big := lim(`"name":"` + strings.Repeat("x", 64<<10) + `"`)
	tests := []struct {
		name   string
		q      req
		status int
		code   string
	}{
		{"405 before 401", req{method: "GET", path: pLimit}, 405, "method_not_allowed"},
		{"404 before 401", req{method: "POST", path: "/v1/limits", body: "x"}, 404, "not_found"},
		{"401 before 400", req{method: "POST", path: pLimit, key: "wrong", body: `{"bogus":`}, 401, "unauthorized"},
		{"401 before 415", req{method: "POST", path: pLimit, body: `{}`, contentType: "text/plain"}, 401, "unauthorized"},
		{"401 before 413", req{method: "POST", path: pLimit, body: big}, 401, "unauthorized"},
		{"401 before 403", req{method: "POST", path: pLeases, key: "wrong", body: lim(`"limit":1,"window_ms":1`)}, 401, "unauthorized"},
		{"401 before invalid lease id", req{method: "DELETE", path: "/v1/leases/garbage", key: "wrong"}, 401, "unauthorized"},
		{"413 before 415", req{method: "POST", path: pLimit, key: keyAcme, body: big, contentType: "text/plain"}, 413, "request_too_large"},
		{"415 before 400", req{method: "POST", path: pLimit, key: keyAcme, body: `{"bogus":`, contentType: "text/plain"}, 415, "unsupported_media_type"},
		{"415 before 403 on leases", req{method: "POST", path: pLeases, key: keyFree, body: `{}`, contentType: "text/html"}, 415, "unsupported_media_type"},
		{"413 before 403 on leases", req{method: "POST", path: pLeases, key: keyFree, body: big}, 413, "request_too_large"},
		{"403 before 400 on leases", req{method: "POST", path: pLeases, key: keyFree, body: `{"bogus":true`}, 403, "concurrent_not_on_plan"},
		{"403 before empty body on leases", req{method: "POST", path: pLeases, key: keyFree}, 403, "concurrent_not_on_plan"},
		{"400 body before missing_limit", req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"bogus":1`)}, 400, "invalid_request"},
		{"unknown_algorithm before plan", req{method: "POST", path: pLimit, key: keyFree, body: lim(`"algorithm":"nope","limit":1,"window_ms":1`)}, 400, "unknown_algorithm"},
		{"missing_limit before plan", req{method: "POST", path: pLimit, key: keyFree, body: lim(`"algorithm":"token_bucket"`)}, 400, "missing_limit"},
		{"invalid_request before invalid_rule", req{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":0,"window_ms":-1}`}, 400, "invalid_request"},
		{"invalid_rule before plan", req{method: "POST", path: pRules, key: keyFree, body: `{"algorithm":"token_bucket","limit":0,"window_ms":1}`}, 400, "invalid_rule"},
		{"path namespace before body", req{method: "POST", path: "/v1/namespaces/-x/rules", key: keyAcme, body: `{"bogus":1}`}, 400, "invalid_request"},
		// Webhooks: auth, plan, body, URL screening (spec §8.1).
		{"401 before 403 on webhook", req{method: "PUT", path: pWebhook, key: "wrong", body: `{"url":"https://hooks.example.com/"}`}, 401, "unauthorized"},
		{"415 before 403 on webhook", req{method: "PUT", path: pWebhook, key: keyFree, body: `{}`, contentType: "text/plain"}, 415, "unsupported_media_type"},
		{"403 before 400 on webhook", req{method: "PUT", path: pWebhook, key: keyFree, body: `{"bogus":`}, 403, "webhook_not_on_plan"},
		{"403 before 422 on webhook", req{method: "PUT", path: pWebhook, key: keyFree, body: `{"url":"http://127.0.0.1/"}`}, 403, "webhook_not_on_plan"},
		{"400 before 422 on webhook", req{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":"http://127.0.0.1/","x":1}`}, 400, "invalid_request"},
		{"403 before 404 on webhook test", req{method: "POST", path: pWebhookTest, key: keyFree}, 403, "webhook_not_on_plan"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.t = t
			mustError(t, e.do(tt.q), tt.status, tt.code)
		})
	}
	// The path namespace is named, not the body's unknown field.
	e.t = t
	mustError(t, e.do(req{method: "POST", path: "/v1/namespaces/-x/rules", key: keyAcme, body: `{"bogus":1}`}), 400, "invalid_request", "namespace must be")
}

// TestMediaTypes checks the Content-Type forms that are JSON (spec §3.2).
func TestMediaTypes(t *testing.T) {
	e := newEnv(t, nil)
	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "Application/Json ;foo=bar", "-", ""} {
		q := req{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":100,"window_ms":1000`), contentType: ct}
		if ct == "" {
			q.header = map[string]string{"Content-Type": ""}
			q.contentType = "-"
		}
		if r := e.do(q); r.code != 200 {
			t.Fatalf("%d: Content-Type %q: %d %s", i, ct, r.code, r.body)
		}
	}
}

// TestHardCap fills a plan's tiny hard cap and checks 429 with Retry-After to the end of
// the UTC month on both endpoints it gates.
func TestHardCap(t *testing.T) {
	e := newEnv(t, nil)
	for i := range 4 {
		r := e.post(pLimit, keyTiny, lim(`"algorithm":"fixed_window","limit":100,"window_ms":1000`))
		mustBody(t, r, 200, `{"allowed":true,"limit":100,"remaining":`+strconv.Itoa(99-i)+`,"reset_ms":1000}`)
	}
	e.flush()
	want := strconv.Itoa(secondsToMonthEnd)
	for _, path := range []string{pLimit, pLeases} {
		r := e.post(path, keyTiny, lim(`"limit":100,"window_ms":1000`))
		mustError(t, r, 429, "hard_cap_exceeded")
		if got := r.hdr.Get("Retry-After"); got != want {
			t.Fatalf("%s: Retry-After %q, want %q", path, got, want)
		}
	}
	// Each refusal is counted for the account and endpoint (spec §12.2).
	for _, endpoint := range []string{"limit", "leases"} {
		if n := metricValue(t, e, "leash_hard_cap_denials_total", map[string]string{"endpoint": endpoint, "account": "tiny"}); n != 1 {
			t.Errorf("leash_hard_cap_denials_total{endpoint=%q,account=\"tiny\"} = %v, want 1", endpoint, n)
		}
	}
	// Other accounts are not capped; resets, rules and stats still work for this one.
	mustBody(t, e.post(pLimit, keyAcme, lim(`"algorithm":"fixed_window","limit":100,"window_ms":1000`)), 200, `{"allowed":true,"limit":100,"remaining":99,"reset_ms":1000}`)
	mustBody(t, e.post(pReset, keyTiny, lim(`"algorithm":"fixed_window","window_ms":1000`)), 200, `{"reset":true}`)
	if r := e.get("/v1/namespaces/ns/stats", keyTiny); r.code != 200 {
		t.Fatalf("stats: %d %s", r.code, r.body)
	}
}

// TestUnavailable runs every endpoint on a store that always fails: 503 with
// Retry-After: 1, and nothing of the driver's error reaches the client.
func TestUnavailable(t *testing.T) {
	e := newEnv(t, func(s engine.Store) engine.Store { return errStore{s} })
	qs := []req{
		{method: "POST", path: pLimit, key: keyAcme, body: lim(`"limit":1,"window_ms":1000`)},
		{method: "POST", path: pReset, key: keyAcme, body: lim(`"window_ms":1000`)},
		{method: "POST", path: pLeases, key: keyAcme, body: lim(`"limit":1,"window_ms":1000`)},
		{method: "DELETE", path: "/v1/leases/l1.bnM.aw.AAAAAAAAAAAAAAAAAAAAAA", key: keyAcme},
		{method: "POST", path: "/v1/leases/l1.bnM.aw.AAAAAAAAAAAAAAAAAAAAAA/renew", key: keyAcme},
		{method: "GET", path: pRules, key: keyAcme},
		{method: "POST", path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":1,"window_ms":1000}`},
		{method: "DELETE", path: pRules + "/rate", key: keyAcme},
		{method: "GET", path: "/v1/namespaces/ns/stats", key: keyAcme},
		{method: "GET", path: pWebhook, key: keyAcme},
		{method: "PUT", path: pWebhook, key: keyAcme, body: `{"url":"https://hooks.example.com/"}`},
		{method: "DELETE", path: pWebhook, key: keyAcme},
		{method: "POST", path: pWebhookTest, key: keyAcme},
	}
	for _, q := range qs {
		t.Run(q.method+" "+q.path, func(t *testing.T) {
			e.t = t
			r := e.do(q)
			mustError(t, r, 503, "unavailable")
			if r.hdr.Get("Retry-After") != "1" {
				t.Fatalf("Retry-After %q, want 1", r.hdr.Get("Retry-After"))
			}
			for _, leak := range []string{"redis", "10.0.0.7", "refused", "/var/run"} {
				if strings.Contains(r.body, leak) {
					t.Fatalf("body leaks %q: %s", leak, r.body)
				}
			}
			id := r.hdr.Get("X-Request-Id")
			if logs := e.logs.String(); !strings.Contains(logs, id) || !strings.Contains(logs, "connection refused") {
				t.Fatalf("the failure is not logged with request id %s:\n%s", id, logs)
			}
		})
	}
	if strings.Contains(e.logs.String(), keyAcme) {
		t.Fatal("an API key reached the log")
	}
}

// TestInternal checks 500 internal for a broken engine invariant and for a panic.
func TestInternal(t *testing.T) {
	e := newEnv(t, func(s engine.Store) engine.Store { return brokenStore{s} })
	for _, q := range []req{
		{method: "GET", path: "/v1/namespaces/ns/stats", key: keyAcme},                                    // wrong-length usage report
		{method: "GET", path: pRules, key: keyAcme, header: map[string]string{"X-Request-Id": "panic-1"}}, // panic
	} {
		r := e.do(q)
		mustError(t, r, 500, "internal", "internal error")
		if strings.Contains(r.body, "secret") || strings.Contains(r.body, "length") {
			t.Fatalf("body leaks internals: %s", r.body)
		}
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "wrong length") || !strings.Contains(logs, "panic-1") || !strings.Contains(logs, "boom") {
		t.Fatalf("failures not logged:\n%s", logs)
	}
	// The API still serves after a panic.
	mustBody(t, e.post(pLimit, keyAcme, lim(`"algorithm":"fixed_window","limit":2,"window_ms":1000`)), 200, `{"allowed":true,"limit":2,"remaining":1,"reset_ms":1000}`)
}
