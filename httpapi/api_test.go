package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/leashd/leash/httpapi"
)

func TestLimitSuccessAndHeaders(t *testing.T) {
	e := newEnv(t, nil)
	body := lim(`"algorithm":"fixed_window","limit":2,"window_ms":60000`)
	e.clock.Advance(58500 * time.Millisecond) // 1.5 s before the window ends

	r := e.post(pLimit, keyAcme, body)
	mustBody(t, r, 200, `{"allowed":true,"limit":2,"remaining":1,"reset_ms":1500}`)
	wantHeaders(t, r, map[string]string{"RateLimit-Limit": "2", "RateLimit-Remaining": "1", "RateLimit-Reset": "2", "Retry-After": ""})

	r = e.post(pLimit, keyAcme, body)
	mustBody(t, r, 200, `{"allowed":true,"limit":2,"remaining":0,"reset_ms":1500}`)

	e.clock.Advance(501 * time.Millisecond) // 999 ms left
	r = e.post(pLimit, keyAcme, body)
	mustBody(t, r, 200, `{"allowed":false,"limit":2,"remaining":0,"reset_ms":999}`)
	wantHeaders(t, r, map[string]string{"RateLimit-Limit": "2", "RateLimit-Remaining": "0", "RateLimit-Reset": "1", "Retry-After": "1"})

	e.clock.Advance(998 * time.Millisecond) // 1 ms left: Retry-After is still at least 1
	r = e.post(pLimit, keyAcme, body)
	mustBody(t, r, 200, `{"allowed":false,"limit":2,"remaining":0,"reset_ms":1}`)
	wantHeaders(t, r, map[string]string{"RateLimit-Reset": "1", "Retry-After": "1"})

	e.clock.Advance(time.Millisecond) // the next window
	r = e.post(pLimit, keyAcme, lim(`"algorithm":"fixed_window","limit":2,"window_ms":60000,"cost":0`))
	mustBody(t, r, 200, `{"allowed":true,"limit":2,"remaining":2,"reset_ms":0}`)
	wantHeaders(t, r, map[string]string{"RateLimit-Remaining": "2", "RateLimit-Reset": "0", "Retry-After": ""})

	// A denial with a long wait rounds up.
	r = e.post(pLimit, keyAcme, lim(`"algorithm":"fixed_window","limit":1,"window_ms":3600000,"cost":1`))
	mustBody(t, r, 200, `{"allowed":true,"limit":1,"remaining":0,"reset_ms":3540000}`)
	e.clock.Advance(1500 * time.Millisecond)
	r = e.post(pLimit, keyAcme, lim(`"algorithm":"fixed_window","limit":1,"window_ms":3600000`))
	mustBody(t, r, 200, `{"allowed":false,"limit":1,"remaining":0,"reset_ms":3538500}`)
	wantHeaders(t, r, map[string]string{"RateLimit-Reset": "3539", "Retry-After": "3539"})

	// null members are absent; bearer is case-insensitive.
	r = e.do(req{method: "POST", path: pLimit, auth: "bEaReR " + keyAcme,
		body: `{"namespace":"ns","key":"nulls","algorithm":null,"limit":3,"window_ms":1000,"cost":null}`})
	if r.code != 200 || !strings.HasPrefix(r.body, `{"allowed":true,"limit":3,"remaining":2,`) {
		t.Fatalf("got %d %s", r.code, r.body)
	}
}

func wantHeaders(t *testing.T, r resp, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := r.hdr[http.CanonicalHeaderKey(k)]
		switch {
		case v == "" && ok:
			t.Errorf("header %s = %q, want none", k, got)
		case v != "" && (len(got) != 1 || got[0] != v):
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

func TestReset(t *testing.T) {
	e := newEnv(t, nil)
	body := lim(`"algorithm":"fixed_window","limit":1,"window_ms":1000`)
	mustBody(t, e.post(pLimit, keyAcme, body), 200, `{"allowed":true,"limit":1,"remaining":0,"reset_ms":1000}`)
	mustBody(t, e.post(pLimit, keyAcme, body), 200, `{"allowed":false,"limit":1,"remaining":0,"reset_ms":1000}`)
	// limit and cost are accepted and ignored.
	mustBody(t, e.post(pReset, keyAcme, lim(`"algorithm":"fixed_window","window_ms":1000,"limit":99,"cost":5`)), 200, `{"reset":true}`)
	mustBody(t, e.post(pLimit, keyAcme, body), 200, `{"allowed":true,"limit":1,"remaining":0,"reset_ms":1000}`)
	// Another algorithm or window is another counter.
	mustError(t, e.post(pReset, keyAcme, lim(`"algorithm":"fixed_window","window_ms":2000`)), 404, "key_not_found")
	mustError(t, e.post(pReset, keyAcme, lim(`"algorithm":"sliding_window","window_ms":1000`)), 404, "key_not_found")
	// Resolved through the rate rule like a check.
	mustBody(t, e.post(pRules, keyAcme, `{"algorithm":"fixed_window","limit":5,"window_ms":1000}`), 201,
		`{"namespace":"ns","algorithm":"fixed_window","limit":5,"window_ms":1000}`)
	mustBody(t, e.post(pReset, keyAcme, lim("")), 200, `{"reset":true}`)
	mustError(t, e.post(pReset, keyAcme, lim("")), 404, "key_not_found")
}

// TestRuleFallback checks that inline values win field by field over the rate rule.
func TestRuleFallback(t *testing.T) {
	e := newEnv(t, nil)
	mustBody(t, e.post(pRules, keyAcme, `{"algorithm":"fixed_window","limit":5,"window_ms":60000,"name":"api"}`), 201,
		`{"namespace":"ns","algorithm":"fixed_window","limit":5,"window_ms":60000,"name":"api"}`)
	// All from the rule.
	mustBody(t, e.post(pLimit, keyAcme, lim("")), 200, `{"allowed":true,"limit":5,"remaining":4,"reset_ms":60000}`)
	// Inline limit, the rule's algorithm and window: same counter (changing the limit keeps the count).
	mustBody(t, e.post(pLimit, keyAcme, lim(`"limit":2`)), 200, `{"allowed":true,"limit":2,"remaining":0,"reset_ms":60000}`)
	// Inline window: another counter, the rule's limit.
	mustBody(t, e.post(pLimit, keyAcme, lim(`"window_ms":1000`)), 200, `{"allowed":true,"limit":5,"remaining":4,"reset_ms":1000}`)
	// Inline algorithm: another counter, the rule's limit and window.
	r := e.post(pLimit, keyAcme, lim(`"algorithm":"token_bucket"`))
	if r.code != 200 || !strings.HasPrefix(r.body, `{"allowed":true,"limit":5,"remaining":4,`) {
		t.Fatalf("token_bucket from rule: %d %s", r.code, r.body)
	}
	// Without a rule the algorithm defaults to sliding_window and limits are required.
	mustError(t, e.post(pLimit, keyAcme, `{"namespace":"other","key":"k","limit":5}`), 400, "missing_limit")
	if r := e.post(pLimit, keyAcme, `{"namespace":"other","key":"k","limit":5,"window_ms":1000}`); r.code != 200 {
		t.Fatalf("inline only: %d %s", r.code, r.body)
	}
	// A concurrent rule feeds leases, never checks.
	mustBody(t, e.post("/v1/namespaces/conc/rules", keyAcme, `{"algorithm":"concurrent_limit","limit":2,"window_ms":30000}`), 201,
		`{"namespace":"conc","algorithm":"concurrent_limit","limit":2,"window_ms":30000}`)
	mustError(t, e.post(pLimit, keyAcme, `{"namespace":"conc","key":"k"}`), 400, "missing_limit")
}

func TestRules(t *testing.T) {
	e := newEnv(t, nil)
	mustBody(t, e.get(pRules, keyAcme), 200, `{"namespace":"ns","rules":[]}`)
	// The body's namespace is ignored; the path's wins.
	mustBody(t, e.post(pRules, keyAcme, `{"namespace":"elsewhere","algorithm":"sliding_window","limit":10,"window_ms":1000}`), 201,
		`{"namespace":"ns","algorithm":"sliding_window","limit":10,"window_ms":1000}`)
	mustBody(t, e.post(pRules, keyAcme, `{"algorithm":"token_bucket","limit":1000000000,"window_ms":31622400000,"name":"max"}`), 200,
		`{"namespace":"ns","algorithm":"token_bucket","limit":1000000000,"window_ms":31622400000,"name":"max"}`)
	mustBody(t, e.post(pRules, keyAcme, `{"algorithm":"concurrent_limit","limit":1,"window_ms":1}`), 201,
		`{"namespace":"ns","algorithm":"concurrent_limit","limit":1,"window_ms":1}`)
	mustBody(t, e.get(pRules, keyAcme), 200, `{"namespace":"ns","rules":[`+
		`{"namespace":"ns","algorithm":"token_bucket","limit":1000000000,"window_ms":31622400000,"name":"max"},`+
		`{"namespace":"ns","algorithm":"concurrent_limit","limit":1,"window_ms":1}]}`)
	mustBody(t, e.del(pRules+"/rate", keyAcme), 200, `{"deleted":true}`)
	mustBody(t, e.del(pRules+"/rate", keyAcme), 200, `{"deleted":false}`)
	mustBody(t, e.get(pRules, keyAcme), 200, `{"namespace":"ns","rules":[{"namespace":"ns","algorithm":"concurrent_limit","limit":1,"window_ms":1}]}`)
	mustBody(t, e.del(pRules+"/concurrent", keyAcme), 200, `{"deleted":true}`)
	mustBody(t, e.get(pRules, keyAcme), 200, `{"namespace":"ns","rules":[]}`)
	// Names with escapes come back escaped as JSON.
	mustBody(t, e.post(pRules, keyAcme, `{"algorithm":"fixed_window","limit":1,"window_ms":1,"name":"a\"b\u00e9\n"}`), 201,
		`{"namespace":"ns","algorithm":"fixed_window","limit":1,"window_ms":1,"name":"a\"bé\n"}`)
	// A free plan may set the algorithms it has.
	if r := e.post(pRules, keyFree, `{"algorithm":"fixed_window","limit":1,"window_ms":1}`); r.code != 201 {
		t.Fatalf("free plan fixed_window rule: %d %s", r.code, r.body)
	}
}

func TestLeases(t *testing.T) {
	e := newEnv(t, nil)
	body := lim(`"limit":2,"window_ms":30000`)
	var ids []string
	for i := range 2 {
		r := e.post(pLeases, keyAcme, body)
		m := r.obj(t)
		id, _ := m["lease_id"].(string)
		if r.code != 200 || id == "" || len(m) != 5 {
			t.Fatalf("acquire %d: %d %s", i, r.code, r.body)
		}
		mustBody(t, r, 200, `{"allowed":true,"lease_id":"`+id+`","active":`+strconv.Itoa(i+1)+`,"limit":2,"reset_ms":30000}`)
		ids = append(ids, id)
		e.clock.Advance(time.Second)
	}
	// Full: denied, no lease_id, reset_ms until the soonest lease expires.
	mustBody(t, e.post(pLeases, keyAcme, body), 200, `{"allowed":false,"active":2,"limit":2,"reset_ms":28000}`)

	// Another account cannot release it: released false and its own count (spec §5.4).
	mustBody(t, e.del("/v1/leases/"+ids[0], keyBeta), 200, `{"released":false,"active":0}`)
	mustBody(t, e.post("/v1/leases/"+ids[0]+"/renew", keyBeta, ""), 200, `{"renewed":false,"active":0,"reset_ms":0}`)

	mustBody(t, e.del("/v1/leases/"+ids[0], keyAcme), 200, `{"released":true,"active":1}`)
	mustBody(t, e.del("/v1/leases/"+ids[0], keyAcme), 200, `{"released":false,"active":1}`)

	// Renew: an empty body without Content-Type keeps the original ttl; a body sets it.
	mustBody(t, e.do(req{method: "POST", path: "/v1/leases/" + ids[1] + "/renew", key: keyAcme, contentType: "-"}), 200,
		`{"renewed":true,"active":1,"reset_ms":30000}`)
	mustBody(t, e.post("/v1/leases/"+ids[1]+"/renew", keyAcme, `{"window_ms":5000}`), 200, `{"renewed":true,"active":1,"reset_ms":5000}`)
	if r := e.post("/v1/leases/"+ids[1]+"/renew", keyAcme, `{"window_ms":null}`); r.code != 200 || !strings.HasPrefix(r.body, `{"renewed":true,"active":1,"reset_ms":`) {
		t.Fatalf("renew with null window: %d %s", r.code, r.body)
	}
	mustError(t, e.post("/v1/leases/"+ids[1]+"/renew", keyAcme, `{"window_ms":0}`), 400, "invalid_request", "window_ms")
	e.clock.Advance(31 * time.Second)
	mustBody(t, e.post("/v1/leases/"+ids[1]+"/renew", keyAcme, "  "), 200, `{"renewed":false,"active":0,"reset_ms":0}`)
	mustBody(t, e.del("/v1/leases/"+ids[1], keyAcme), 200, `{"released":false,"active":0}`)

	// The concurrent rule fills limit and window field by field.
	mustBody(t, e.post(pRules, keyAcme, `{"algorithm":"concurrent_limit","limit":1,"window_ms":10000}`), 201,
		`{"namespace":"ns","algorithm":"concurrent_limit","limit":1,"window_ms":10000}`)
	r := e.post(pLeases, keyAcme, `{"namespace":"ns","key":"r"}`)
	if m := r.obj(t); r.code != 200 || m["allowed"] != true || m["limit"] != float64(1) || m["reset_ms"] != float64(10000) {
		t.Fatalf("from rule: %d %s", r.code, r.body)
	}
	mustBody(t, e.post(pLeases, keyAcme, `{"namespace":"ns","key":"r"}`), 200, `{"allowed":false,"active":1,"limit":1,"reset_ms":10000}`)
	r = e.post(pLeases, keyAcme, `{"namespace":"ns","key":"r","limit":2,"window_ms":null}`)
	if m := r.obj(t); r.code != 200 || m["allowed"] != true || m["active"] != float64(2) || m["reset_ms"] != float64(10000) {
		t.Fatalf("inline limit, rule window: %d %s", r.code, r.body)
	}
}

func TestStats(t *testing.T) {
	e := newEnv(t, nil)
	// Yesterday: 2 checks in "ns", 1 blocked.
	e.clock.Advance(-24 * time.Hour)
	for range 2 {
		e.post(pLimit, keyTiny, lim(`"algorithm":"fixed_window","limit":1,"window_ms":1000`))
	}
	e.flush()
	e.clock.Advance(24 * time.Hour)
	// Today: 1 check in "ns", 1 lease in "other" (month rollup across namespaces).
	e.post(pLimit, keyTiny, lim(`"algorithm":"fixed_window","limit":1,"window_ms":1000`))
	e.post(pLeases, keyTiny, `{"namespace":"other","key":"k","limit":1,"window_ms":1000}`)
	e.flush()

	r := e.get("/v1/namespaces/ns/stats", keyTiny)
	m := r.obj(t)
	if r.code != 200 || len(m) != 5 || m["namespace"] != "ns" || m["total"] != float64(3) || m["blocked"] != float64(1) {
		t.Fatalf("stats: %d %s", r.code, r.body)
	}
	days := m["days"].([]any)
	if len(days) != 30 {
		t.Fatalf("%d days", len(days))
	}
	for i, d := range days {
		day := d.(map[string]any)
		want := t0.AddDate(0, 0, i-29).Format(time.DateOnly)
		total, blocked := float64(0), float64(0)
		switch i {
		case 28:
			total, blocked = 2, 1
		case 29:
			total = 1
		}
		if len(day) != 3 || day["day"] != want || day["total"] != total || day["blocked"] != blocked {
			t.Fatalf("day %d = %v, want %s %v/%v", i, day, want, total, blocked)
		}
	}
	month := m["month"].(map[string]any)
	if len(month) != 5 || month["month"] != "2026-11" || month["total"] != float64(4) || month["quota"] != float64(2) ||
		month["over_quota"] != true || month["hard_cap"] != float64(4) {
		t.Fatalf("month %v", month)
	}

	// A namespace never used: zero-filled; a plan without a hard cap: null.
	r = e.get("/v1/namespaces/unused/stats", keyScale)
	if !strings.Contains(r.body, `"total":0,"blocked":0,"days":[{"day":"2026-10-24","total":0,"blocked":0},`) ||
		!strings.HasSuffix(r.body, `"month":{"month":"2026-11","total":0,"quota":1000000000,"over_quota":false,"hard_cap":null}}`) {
		t.Fatalf("unused: %s", r.body)
	}
}

// TestIsolation runs every endpoint as two accounts on the same namespace and key.
func TestIsolation(t *testing.T) {
	e := newEnv(t, nil)
	body := lim(`"algorithm":"fixed_window","limit":1,"window_ms":1000`)
	mustBody(t, e.post(pLimit, keyAcme, body), 200, `{"allowed":true,"limit":1,"remaining":0,"reset_ms":1000}`)
	mustBody(t, e.post(pLimit, keyAcme, body), 200, `{"allowed":false,"limit":1,"remaining":0,"reset_ms":1000}`)
	mustBody(t, e.post(pLimit, keyBeta, body), 200, `{"allowed":true,"limit":1,"remaining":0,"reset_ms":1000}`)

	// Reset one account's counter: the other's stays.
	mustBody(t, e.post(pReset, keyBeta, lim(`"algorithm":"fixed_window","window_ms":1000`)), 200, `{"reset":true}`)
	mustBody(t, e.post(pLimit, keyAcme, body), 200, `{"allowed":false,"limit":1,"remaining":0,"reset_ms":1000}`)
	mustError(t, e.post(pReset, keyBeta, lim(`"algorithm":"fixed_window","window_ms":1000`)), 404, "key_not_found")

	// Rules.
	e.post(pRules, keyAcme, `{"algorithm":"fixed_window","limit":7,"window_ms":1000}`)
	mustBody(t, e.get(pRules, keyBeta), 200, `{"namespace":"ns","rules":[]}`)
	mustError(t, e.post(pLimit, keyBeta, lim("")), 400, "missing_limit")
	mustBody(t, e.post(pRules, keyBeta, `{"algorithm":"fixed_window","limit":3,"window_ms":1000}`), 201,
		`{"namespace":"ns","algorithm":"fixed_window","limit":3,"window_ms":1000}`)
	mustBody(t, e.del(pRules+"/rate", keyBeta), 200, `{"deleted":true}`)
	mustBody(t, e.get(pRules, keyAcme), 200, `{"namespace":"ns","rules":[{"namespace":"ns","algorithm":"fixed_window","limit":7,"window_ms":1000}]}`)

	// Leases: same namespace and key, separate sets.
	lease := lim(`"limit":1,"window_ms":10000`)
	ra := e.post(pLeases, keyAcme, lease).obj(t)
	rb := e.post(pLeases, keyBeta, lease).obj(t)
	if ra["allowed"] != true || rb["allowed"] != true || rb["active"] != float64(1) {
		t.Fatalf("leases: %v %v", ra, rb)
	}
	idA := ra["lease_id"].(string)
	mustBody(t, e.del("/v1/leases/"+idA, keyBeta), 200, `{"released":false,"active":1}`)
	mustBody(t, e.post(pLeases, keyAcme, lease), 200, `{"allowed":false,"active":1,"limit":1,"reset_ms":10000}`)
	mustBody(t, e.del("/v1/leases/"+idA, keyAcme), 200, `{"released":true,"active":0}`)

	// Stats: acme counted 4 checks and 2 leases here, beta 1 check and 1 lease.
	e.flush()
	ma := e.get("/v1/namespaces/ns/stats", keyAcme).obj(t)
	mb := e.get("/v1/namespaces/ns/stats", keyBeta).obj(t)
	if ma["total"] != float64(5) || ma["blocked"] != float64(3) || mb["total"] != float64(2) || mb["blocked"] != float64(0) {
		t.Fatalf("stats acme %v/%v beta %v/%v", ma["total"], ma["blocked"], mb["total"], mb["blocked"])
	}
	if ma["month"].(map[string]any)["total"] != float64(5) || mb["month"].(map[string]any)["total"] != float64(2) {
		t.Fatalf("month totals %v %v", ma["month"], mb["month"])
	}
}

func TestRequestID(t *testing.T) {
	e := newEnv(t, nil)
	echo := func(id string) string {
		return e.do(req{method: "GET", path: pRules, key: keyAcme, header: map[string]string{"X-Request-Id": id}}).hdr.Get("X-Request-Id")
	}
	for _, id := range []string{"abc-123", strings.Repeat("x", 128), "with space", "~!@#"} {
		if got := echo(id); got != id {
			t.Errorf("X-Request-Id %q echoed as %q", id, got)
		}
	}
	seen := map[string]bool{}
	for _, id := range []string{"", strings.Repeat("x", 129), "caf\u00e9", "a\tb"} {
		got := echo(id)
		if got == id || got == "" || seen[got] || len(got) > 128 {
			t.Errorf("X-Request-Id %q: got %q, want a fresh generated id", id, got)
		}
		seen[got] = true
	}
	// Errors and unmatched routes carry one too (checked by e.do).
	e.do(req{method: "GET", path: "/nope"})
	e.do(req{method: "GET", path: pLimit})
}

// TestChunkedTooLarge sends an oversized body without Content-Length through a real server.
func TestChunkedTooLarge(t *testing.T) {
	e := newEnv(t, nil)
	srv := httptest.NewServer(e.api)
	defer srv.Close()
	big := lim(`"name":"` + strings.Repeat("x", 70<<10) + `"`)
	for _, chunked := range []bool{true, false} {
		var body io.Reader = bytes.NewReader([]byte(big))
		if chunked {
			body = io.MultiReader(body) // hides the length: chunked encoding
		}
		rq, _ := http.NewRequest("POST", srv.URL+pLimit, body)
		rq.Header.Set("Authorization", "Bearer "+keyAcme)
		rq.Header.Set("Content-Type", "application/json")
		res, err := srv.Client().Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 413 || !strings.Contains(string(b), `"code":"request_too_large"`) {
			t.Fatalf("chunked=%v: %d %s", chunked, res.StatusCode, b)
		}
		if chunked != (rq.ContentLength <= 0) {
			t.Fatalf("chunked=%v but ContentLength %d", chunked, rq.ContentLength)
		}
	}
	// Exactly the maximum is accepted by the size check.
	pad := httpapi.MaxBodyBytes - len(lim(`"limit":1,"window_ms":1000`))
	ok := lim(`"limit":1,"window_ms":1000`) + strings.Repeat(" ", pad)
	rq, _ := http.NewRequest("POST", srv.URL+pLimit, io.MultiReader(strings.NewReader(ok)))
	rq.Header.Set("Authorization", "Bearer "+keyAcme)
	res, err := srv.Client().Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("a body of exactly %d bytes: status %d", httpapi.MaxBodyBytes, res.StatusCode)
	}
}

// TestRoutesServed checks that every route of the table is served by the router.
func TestRoutesServed(t *testing.T) {
	e := newEnv(t, nil)
	r := strings.NewReplacer("{ns}", "ns", "{lease_id}", "x", "{kind}", "rate")
	for _, rt := range httpapi.Routes() {
		// Without a key a served route answers 401; an unserved one 404 or 405.
		mustError(t, e.do(req{method: rt.Method, path: r.Replace(rt.Path)}), 401, "unauthorized")
	}
}

func TestNewServer(t *testing.T) {
	s := httpapi.NewServer(":0", http.NotFoundHandler())
	if s.ReadHeaderTimeout != 5*time.Second || s.ReadTimeout != 30*time.Second || s.WriteTimeout != 30*time.Second ||
		s.IdleTimeout != 120*time.Second || s.MaxHeaderBytes != httpapi.TransportHeaderBytes || s.Addr != ":0" {
		t.Fatalf("server %+v", s)
	}
	// Zero fields take the defaults; set ones win.
	s = httpapi.NewServerWith(":1", http.NotFoundHandler(), httpapi.Timeouts{ReadHeader: time.Second, Idle: 3 * time.Second})
	if s.ReadHeaderTimeout != time.Second || s.ReadTimeout != 30*time.Second || s.WriteTimeout != 30*time.Second ||
		s.IdleTimeout != 3*time.Second || s.MaxHeaderBytes != httpapi.TransportHeaderBytes || s.Addr != ":1" {
		t.Fatalf("server %+v", s)
	}
}

// metricValue sums the samples of a metric family whose labels include want (counters:
// the value; histograms: the sample count).
func metricValue(t *testing.T, e *env, family string, want map[string]string) float64 {
	t.Helper()
	mfs, err := e.met.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			sum += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, nil)
	body := lim(`"algorithm":"fixed_window","limit":1,"window_ms":1000`)
	e.post(pLimit, keyAcme, body)
	e.post(pLimit, keyAcme, body)
	e.post(pLeases, keyAcme, lim(`"limit":1,"window_ms":1000`))
	e.post(pLimit, keyAcme, `{}`) // an error: no decision
	e.get("/v1/nope", keyAcme)
	e.do(req{method: "GET", path: pLimit})
	e.del("/v1/namespaces/ns/rules/x", keyAcme)
	e.get("/v1/namespaces/ns/rules", keyAcme)

	for _, c := range []struct {
		family string
		labels map[string]string
		want   float64
	}{
		{"leash_decisions_total", map[string]string{"endpoint": "limit", "outcome": "allowed"}, 1},
		{"leash_decisions_total", map[string]string{"endpoint": "limit", "outcome": "denied"}, 1},
		{"leash_decisions_total", map[string]string{"endpoint": "leases", "outcome": "allowed"}, 1},
		{"leash_http_request_duration_seconds", map[string]string{"route": "POST /v1/limit", "code": "200"}, 2},
		{"leash_http_request_duration_seconds", map[string]string{"route": "POST /v1/limit", "code": "400"}, 1},
		{"leash_http_request_duration_seconds", map[string]string{"route": "POST /v1/leases", "code": "200"}, 1},
		{"leash_http_request_duration_seconds", map[string]string{"route": "GET /v1/namespaces/{ns}/rules", "code": "200"}, 1},
		{"leash_http_request_duration_seconds", map[string]string{"route": "unmatched", "code": "404"}, 2},
		{"leash_http_request_duration_seconds", map[string]string{"route": "unmatched", "code": "405"}, 1},
	} {
		if got := metricValue(t, e, c.family, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.family, c.labels, got, c.want)
		}
	}
}

// TestConcurrent serves many requests at once through a real server (headers are written
// after the handler returns, so a pooled call must not leak into them) and checks that
// every response is consistent with itself.
func TestConcurrent(t *testing.T) {
	e := newEnv(t, nil)
	srv := httptest.NewServer(e.api)
	defer srv.Close()
	const workers, each = 8, 60
	ids := make(chan string, workers*each)
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			errs <- func() error {
				for i := range each {
					key := "k" + strconv.Itoa(w)
					body := `{"namespace":"ns","key":"` + key + `","algorithm":"fixed_window","limit":1000,"window_ms":60000}`
					var want int
					rq, _ := http.NewRequest("POST", srv.URL+pLimit, strings.NewReader(body))
					rq.Header.Set("Authorization", "Bearer "+keyAcme)
					if i%3 == 2 { // an error now and then
						rq, _ = http.NewRequest("POST", srv.URL+pLimit, strings.NewReader(`{"bogus":1}`))
						rq.Header.Set("Authorization", "Bearer "+keyAcme)
						want = 400
					} else {
						want = 200
					}
					if i%2 == 0 {
						rq.Header.Set("X-Request-Id", "w"+strconv.Itoa(w)+"-"+strconv.Itoa(i))
					}
					res, err := srv.Client().Do(rq)
					if err != nil {
						return err
					}
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if res.StatusCode != want {
						return fmt.Errorf("status %d: %s", res.StatusCode, b)
					}
					id := res.Header.Get("X-Request-Id")
					if i%2 == 0 && id != "w"+strconv.Itoa(w)+"-"+strconv.Itoa(i) {
						return fmt.Errorf("request id %q not echoed", id)
					}
					ids <- id
					if want == 200 {
						var m struct {
							Remaining int64 `json:"remaining"`
						}
						if err := json.Unmarshal(b, &m); err != nil {
							return err
						}
						if res.Header.Get("RateLimit-Remaining") != strconv.FormatInt(m.Remaining, 10) || res.Header.Get("RateLimit-Limit") != "1000" {
							return fmt.Errorf("headers %v do not match body %s", res.Header, b)
						}
					}
				}
				return nil
			}()
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("request id %q given twice", id)
		}
		seen[id] = true
	}
}
