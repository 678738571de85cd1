package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/httpapi"
)

// countingStore counts every call that reaches the store.
type countingStore struct {
	engine.Store
	calls atomic.Int64
}

func (s *countingStore) Spend(ctx context.Context, sp engine.Spend) (engine.Decision, error) {
	s.calls.Add(1)
	return s.Store.Spend(ctx, sp)
}
func (s *countingStore) SpendAll(ctx context.Context, sp []engine.Spend, out []engine.Decision) error {
	s.calls.Add(1)
	return s.Store.SpendAll(ctx, sp, out)
}
func (s *countingStore) Reset(ctx context.Context, c engine.Counter) (bool, error) {
	s.calls.Add(1)
	return s.Store.Reset(ctx, c)
}
func (s *countingStore) Acquire(ctx context.Context, set engine.LeaseSet, token string, limit, ttl int64) (engine.LeaseDecision, error) {
	s.calls.Add(1)
	return s.Store.Acquire(ctx, set, token, limit, ttl)
}
func (s *countingStore) Release(ctx context.Context, set engine.LeaseSet, token string) (engine.ReleaseResult, error) {
	s.calls.Add(1)
	return s.Store.Release(ctx, set, token)
}
func (s *countingStore) Renew(ctx context.Context, set engine.LeaseSet, token string, ttl int64) (engine.RenewResult, error) {
	s.calls.Add(1)
	return s.Store.Renew(ctx, set, token, ttl)
}
func (s *countingStore) Rules(ctx context.Context, account, ns string) (engine.Rules, error) {
	s.calls.Add(1)
	return s.Store.Rules(ctx, account, ns)
}
func (s *countingStore) PutRule(ctx context.Context, account, ns string, r engine.Rule) (bool, error) {
	s.calls.Add(1)
	return s.Store.PutRule(ctx, account, ns, r)
}
func (s *countingStore) DeleteRule(ctx context.Context, account, ns string, k engine.RuleKind) (bool, error) {
	s.calls.Add(1)
	return s.Store.DeleteRule(ctx, account, ns, k)
}
func (s *countingStore) AddUsage(ctx context.Context, b engine.UsageBatch) error {
	s.calls.Add(1)
	return s.Store.AddUsage(ctx, b)
}
func (s *countingStore) ReadUsage(ctx context.Context, q engine.UsageQuery) (engine.UsageReport, error) {
	s.calls.Add(1)
	return s.Store.ReadUsage(ctx, q)
}
func (s *countingStore) MonthTotals(ctx context.Context, m engine.Month, accounts []string) ([]int64, error) {
	s.calls.Add(1)
	return s.Store.MonthTotals(ctx, m, accounts)
}
func (s *countingStore) Webhook(ctx context.Context, account string) (engine.Webhook, bool, error) {
	s.calls.Add(1)
	return s.Store.Webhook(ctx, account)
}
func (s *countingStore) PutWebhook(ctx context.Context, account string, w engine.Webhook) error {
	s.calls.Add(1)
	return s.Store.PutWebhook(ctx, account, w)
}
func (s *countingStore) DeleteWebhook(ctx context.Context, account string) (bool, error) {
	s.calls.Add(1)
	return s.Store.DeleteWebhook(ctx, account)
}
func (s *countingStore) Enqueue(ctx context.Context, ev engine.OutboxEvent, once string) (bool, error) {
	s.calls.Add(1)
	return s.Store.Enqueue(ctx, ev, once)
}
func (s *countingStore) Claim(ctx context.Context, max int, vis int64) ([]engine.OutboxEvent, error) {
	s.calls.Add(1)
	return s.Store.Claim(ctx, max, vis)
}
func (s *countingStore) Ack(ctx context.Context, id string) error {
	s.calls.Add(1)
	return s.Store.Ack(ctx, id)
}
func (s *countingStore) Retry(ctx context.Context, id string, delay int64) error {
	s.calls.Add(1)
	return s.Store.Retry(ctx, id, delay)
}
func (s *countingStore) OutboxLen(ctx context.Context) (int64, error) {
	s.calls.Add(1)
	return s.Store.OutboxLen(ctx)
}
func (s *countingStore) NowMS(ctx context.Context) (int64, error) {
	s.calls.Add(1)
	return s.Store.NowMS(ctx)
}
func (s *countingStore) Ping(ctx context.Context) error {
	s.calls.Add(1)
	return s.Store.Ping(ctx)
}

// leaseIDOf builds a lease id in Leash's format for any namespace and key bytes, valid or
// not: the form a forged or corrupted id takes.
func leaseIDOf(ns, key string) string {
	b := base64.RawURLEncoding
	return "l1." + b.EncodeToString([]byte(ns)) + "." + b.EncodeToString([]byte(key)) + "." + b.EncodeToString(make([]byte, 16))
}

// TestBadNamesNeverReachTheStore sends every /v1 endpoint that takes a namespace or a key
// (in the body, the path or a lease id) names that are too long or malformed, up to the
// 64 KiB body limit, and checks each is refused with 400 (413 beyond the limit) before
// any store call; the same requests with good names do reach the store.
func TestBadNamesNeverReachTheStore(t *testing.T) {
	var cs *countingStore
	e := newEnv(t, func(s engine.Store) engine.Store { cs = &countingStore{Store: s}; return cs })

	nsTooLong := strings.Repeat("n", engine.MaxNamespace+1)
	badNamespaces := map[string]string{
		"129 chars":        nsTooLong,
		"60000 chars":      strings.Repeat("n", 60000),
		"empty":            "",
		"leading dot":      ".ns",
		"slash":            "a/b",
		"space":            "a b",
		"control U+0001":   "a\x01b",
		"NUL":              "a\x00b",
		"DEL":              "a\x7fb",
		"non-ASCII":        "caf\u00e9",
		"invalid UTF-8":    "a\xffb",
		"128 chars + é":    strings.Repeat("n", 127) + "\u00e9",
		"percent":          "a%41",
		"newline":          "a\nb",
		"unicode letters":  "\u0430\u0431",
		"zero-width space": "a\u200bb",
	}
	badKeys := map[string]string{
		"513 bytes":          strings.Repeat("k", engine.MaxKey+1),
		"513 bytes in euros": strings.Repeat("\u20ac", 171), // 171 × 3 bytes: 171 characters
		"60000 bytes":        strings.Repeat("k", 60000),
		"empty":              "",
		"NUL":                "a\x00b",
		"U+001F":             "a\x1fb",
		"DEL":                "a\x7fb",
		"C1 U+0085":          "a\u0085b",
		"C1 U+009F":          "a\u009fb",
		"invalid UTF-8":      "a\xffb",
		"truncated UTF-8":    "a\xe2\x82",
		"overlong UTF-8":     "a\xc0\xafb",
		"lone surrogate":     "a\xed\xa0\x80b",
		"tab":                "a\tb",
		"CRLF":               "a\r\nb",
	}

	// bodyStr writes s as a JSON string, escaping only what JSON requires, so invalid
	// UTF-8 stays raw (the decoder must reject it, not this helper hide it).
	bodyStr := func(s string) string {
		var b strings.Builder
		b.WriteByte('"')
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c < 0x20:
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[c>>4])
				b.WriteByte("0123456789abcdef"[c&15])
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
		return b.String()
	}
	withNS := func(ns, key, extra string) string {
		return `{"namespace":` + bodyStr(ns) + `,"key":` + bodyStr(key) + extra + `}`
	}
	const rate = `,"algorithm":"fixed_window","limit":10,"window_ms":60000`
	const lease = `,"limit":10,"window_ms":60000`

	// Each probe expects its status and code: a bad name in a body is 400 invalid_request,
	// in a lease id 400 invalid_lease_id, a body over the limit 413 request_too_large.
	type probe struct {
		name   string
		q      req
		status int
		code   string
	}
	var probes []probe
	addWant := func(name string, q req, status int, code string) {
		q.key = keyAcme
		probes = append(probes, probe{name, q, status, code})
	}
	add := func(name string, q req) { addWant(name, q, http.StatusBadRequest, "invalid_request") }
	addID := func(name string, q req) {
		if len(q.path) > httpapi.MaxHeaderBytes-1024 {
			// The id makes the request line itself too large (spec §3.10).
			addWant(name, q, http.StatusRequestHeaderFieldsTooLarge, "request_header_too_large")
			return
		}
		addWant(name, q, http.StatusBadRequest, "invalid_lease_id")
	}
	for name, ns := range badNamespaces {
		add("limit/namespace "+name, req{method: "POST", path: pLimit, body: withNS(ns, "k", rate)})
		add("reset/namespace "+name, req{method: "POST", path: pReset, body: withNS(ns, "k", rate)})
		add("leases/namespace "+name, req{method: "POST", path: pLeases, body: withNS(ns, "k", lease)})
		addID("release/namespace "+name, req{method: "DELETE", path: "/v1/leases/" + leaseIDOf(ns, "k")})
		addID("renew/namespace "+name, req{method: "POST", path: "/v1/leases/" + leaseIDOf(ns, "k") + "/renew"})
		if ns == "" || strings.Contains(ns, "/") {
			continue // a different path, not a namespace: routing (404), covered elsewhere
		}
		p := "/v1/namespaces/" + url.PathEscape(ns)
		add("rules GET/namespace "+name, req{method: "GET", path: p + "/rules"})
		add("rules POST/namespace "+name, req{method: "POST", path: p + "/rules", body: `{"algorithm":"fixed_window","limit":1,"window_ms":1000}`})
		add("rules DELETE/namespace "+name, req{method: "DELETE", path: p + "/rules/rate"})
		add("stats/namespace "+name, req{method: "GET", path: p + "/stats"})
	}
	for name, key := range badKeys {
		add("limit/key "+name, req{method: "POST", path: pLimit, body: withNS("ns", key, rate)})
		add("reset/key "+name, req{method: "POST", path: pReset, body: withNS("ns", key, rate)})
		add("leases/key "+name, req{method: "POST", path: pLeases, body: withNS("ns", key, lease)})
		addID("release/key "+name, req{method: "DELETE", path: "/v1/leases/" + leaseIDOf("ns", key)})
		addID("renew/key "+name, req{method: "POST", path: "/v1/leases/" + leaseIDOf("ns", key) + "/renew", body: `{"window_ms":1000}`})
	}
	// Just over the 64 KiB body limit: 413 without reading further.
	huge := withNS("ns", strings.Repeat("k", 64<<10), rate)
	for _, path := range []string{pLimit, pReset, pLeases, pRules} {
		addWant("over 64 KiB "+path, req{method: "POST", path: path, body: huge}, http.StatusRequestEntityTooLarge, "request_too_large")
	}
	// Rule names are not keys, but a huge one must not be stored either.
	add("rule name 60000 bytes", req{method: "POST", path: pRules, body: `{"algorithm":"fixed_window","limit":1,"window_ms":1000,"name":` + bodyStr(strings.Repeat("x", 60000)) + `}`})
	// A lease id far longer than any id Leash issues.
	addID("lease id 60000 bytes", req{method: "DELETE", path: "/v1/leases/l1." + strings.Repeat("A", 60000)})

	for _, p := range probes {
		before := cs.calls.Load()
		r := e.do(p.q)
		var body struct{ Code string }
		_ = json.Unmarshal([]byte(r.body), &body)
		if r.code != p.status || body.Code != p.code {
			t.Errorf("%s: status %d %.200s, want %d %s", p.name, r.code, r.body, p.status, p.code)
		}
		if n := cs.calls.Load() - before; n != 0 {
			t.Errorf("%s: %d store calls before the request was refused (%d %.120s)", p.name, n, r.code, r.body)
		}
	}
	t.Logf("%d malformed requests over 9 endpoints: every one refused with 0 store calls", len(probes))

	// The same endpoints with good names do reach the store: the counter works.
	good := []req{
		{method: "POST", path: pLimit, body: withNS("ns", strings.Repeat("k", engine.MaxKey), rate)},
		{method: "POST", path: pLimit, body: withNS(strings.Repeat("n", engine.MaxNamespace), strings.Repeat("\u20ac", 170), rate)},
		{method: "POST", path: pReset, body: withNS("ns", "k", rate)},
		{method: "POST", path: pLeases, body: withNS("ns", "k", lease)},
		{method: "DELETE", path: "/v1/leases/" + leaseIDOf("ns", "k")},
		{method: "POST", path: "/v1/leases/" + leaseIDOf("ns", "k") + "/renew"},
		{method: "GET", path: pRules},
		{method: "POST", path: pRules, body: `{"algorithm":"fixed_window","limit":1,"window_ms":1000}`},
		{method: "DELETE", path: pRules + "/rate"},
		{method: "GET", path: "/v1/namespaces/ns/stats"},
	}
	for _, q := range good {
		q.key = keyAcme
		before := cs.calls.Load()
		r := e.do(q)
		if r.code >= 300 && r.code != http.StatusNotFound {
			t.Errorf("good %s %s: %d %s", q.method, q.path, r.code, r.body)
		}
		if cs.calls.Load() == before {
			t.Errorf("good %s %s: no store call counted", q.method, q.path)
		}
	}
}
