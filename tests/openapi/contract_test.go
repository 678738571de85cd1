// Package openapi checks that docs/openapi.yaml agrees with the server: every operation is
// driven against a real `leash serve` with valid and invalid requests, and each answer's
// status, body and headers are validated against the document with kin-openapi's
// openapi3filter. It also keeps clients/api.json, the summary of the document the
// TypeScript and Python clients check themselves against, in step with the document.
package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
)

var bin string

func TestMain(m *testing.M) {
	// POST /v1/admin/backup answers a tar stream: validated as the binary string the
	// document declares.
	openapi3filter.RegisterBodyDecoder("application/x-tar", openapi3filter.FileBodyDecoder)
	os.Exit(leashproc.Main(m, &bin))
}

// root is the repository root.
func root() string { return leashproc.Root() }

// loadDoc loads and validates docs/openapi.yaml.
func loadDoc(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join(root(), "docs", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("docs/openapi.yaml is not a valid document: %v", err)
	}
	return doc
}

const (
	opKey = "key-operator"
	// The accounts the test creates through the admin API (configured accounts cannot be
	// suspended or issue their own keys).
	config = `
operators:
  - {id: ops, api_keys: [key-operator]}
webhooks: {allow_http: true, allow_private_targets: true}
`
)

// call is one request of the contract run.
type call struct {
	op, variant  string
	method, path string
	key, body    string
	header       http.Header
	want         int  // the status the variant must get; 0: any 2xx; -1: any
	from         byte // the last byte of the loopback address it is sent from (0: 127.0.0.1)
}

// clientFrom is an HTTP client whose connections leave from 127.0.0.<b>: each address's
// failed authentications count on their own (spec §15.7), so one operation's refusals do not
// slow the next one's calls.
func clientFrom(b byte) *http.Client {
	if b == 0 {
		return http.DefaultClient
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, b)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// validator sends calls to one leash and validates the answers against the document.
type validator struct {
	t      *testing.T
	doc    *openapi3.T
	router routers.Router
	url    string
	seen   map[string]bool // operationIds answered
	n      int
	last   int // the status of the last answer
}

func newValidator(t *testing.T, doc *openapi3.T, url string) *validator {
	// Route on the test server's address: the document's server is localhost:8080.
	d := *doc
	d.Servers = openapi3.Servers{{URL: url}}
	r, err := gorillamux.NewRouter(&d)
	if err != nil {
		t.Fatal(err)
	}
	return &validator{t: t, doc: &d, router: r, url: url, seen: map[string]bool{}}
}

// apiHeaders are the response headers the API sets with a meaning of their own; each one an
// answer carries must be declared by the document for that operation and status.
var apiHeaders = []string{"X-Request-Id", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After", "WWW-Authenticate", "Allow"}

// do sends c, checks its status, validates the answer and returns its body.
func (v *validator) do(c call) []byte {
	t := v.t
	t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, v.url+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	res, err := clientFrom(c.from).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.op, c.variant, err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	v.n++
	v.last = res.StatusCode
	name := fmt.Sprintf("%s (%s %s, %s): %d %s", c.op, c.method, c.path, c.variant, res.StatusCode, got)
	if c.want == 0 && (res.StatusCode < 200 || res.StatusCode > 299) || c.want > 0 && res.StatusCode != c.want {
		t.Errorf("%s: want status %d", name, c.want)
	}
	// The route is found on a request without the oversized headers (the router needs
	// only the method and the path).
	rreq, _ := http.NewRequest(c.method, v.url+c.path, nil)
	route, params, err := v.router.FindRoute(rreq)
	if err != nil {
		t.Fatalf("%s: no operation in the document: %v", name, err)
	}
	if route.Operation.OperationID != c.op {
		t.Fatalf("%s: the document routes it to %s", name, route.Operation.OperationID)
	}
	v.seen[c.op] = true
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 res.StatusCode,
		Header:                 res.Header,
		Body:                   io.NopCloser(bytes.NewReader(got)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s: the document does not describe this answer: %v", name, err)
		return got
	}
	ref := route.Operation.Responses.Status(res.StatusCode)
	if ref == nil || ref.Value == nil {
		t.Errorf("%s: the document lists no %d", name, res.StatusCode)
		return got
	}
	if res.Header.Get("X-Request-Id") == "" {
		t.Errorf("%s: no X-Request-Id", name)
	}
	// Every /v1 answer (the document's conventions, spec §3.6).
	if got := res.Header.Values("Cache-Control"); len(got) != 1 || got[0] != "no-store" {
		t.Errorf("%s: Cache-Control %q, want no-store", name, got)
	}
	if got := res.Header.Values("X-Content-Type-Options"); len(got) != 1 || got[0] != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options %q, want nosniff", name, got)
	}
	for _, h := range apiHeaders {
		if res.Header.Get(h) == "" {
			continue
		}
		if _, ok := ref.Value.Headers[h]; !ok {
			t.Errorf("%s: header %s is not declared for this status", name, h)
		}
	}
	return got
}

// field decodes one string member of a JSON body.
func field(t *testing.T, body []byte, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	s, _ := m[name].(string)
	if s == "" {
		t.Fatalf("no %q in %s", name, body)
	}
	return s
}

// TestEveryAnswerIsDocumented drives every operation of docs/openapi.yaml against a real
// leash: valid calls, a bad input, no key, the wrong kind of key, a suspended account's key
// and headers over 64 KiB; then, on a second leash, the same calls from an address slowed
// by failed authentications; and on a third, every operation while its Redis is down. Every
// answer must validate against the document.
func TestEveryAnswerIsDocumented(t *testing.T) {
	doc := loadDoc(t)
	p := leashproc.Start(t, bin, []string{"--config", leashproc.Config(t, config)})
	v := newValidator(t, doc, p.URL)

	// Set up: an account, and a suspended one, each with a key.
	v.do(call{op: "createAccount", variant: "valid", method: "POST", path: "/v1/admin/accounts", key: opKey, body: `{"id":"acme","plan":"pro"}`})
	key := field(t, v.do(call{op: "issueAccountKey", variant: "valid", method: "POST", path: "/v1/admin/accounts/acme/keys", key: opKey, body: `{"name":"ci"}`}), "key")
	v.do(call{op: "createAccount", variant: "valid", method: "POST", path: "/v1/admin/accounts", key: opKey, body: `{"id":"sleepy","plan":"pro"}`})
	susKey := field(t, v.do(call{op: "issueAccountKey", variant: "valid", method: "POST", path: "/v1/admin/accounts/sleepy/keys", key: opKey}), "key")
	v.do(call{op: "updateAccount", variant: "valid", method: "PATCH", path: "/v1/admin/accounts/sleepy", key: opKey, body: `{"suspended":true}`})

	const limitBody = `{"namespace":"api","key":"k","algorithm":"fixed_window","limit":5,"window_ms":60000}`
	const leaseBody = `{"namespace":"jobs","key":"k","limit":5,"window_ms":60000}`
	leaseID := field(t, v.do(call{op: "acquireLease", variant: "valid", method: "POST", path: "/v1/leases", key: key, body: leaseBody}), "lease_id")
	v.do(call{op: "putWebhook", variant: "valid", method: "PUT", path: "/v1/webhook", key: key, body: `{"url":"http://127.0.0.1:9/hook"}`})
	v.do(call{op: "createAccount", variant: "valid", method: "POST", path: "/v1/admin/accounts", key: opKey, body: `{"id":"gone","plan":"free"}`})
	adminKeyID := field(t, v.do(call{op: "issueAccountKey", variant: "valid", method: "POST", path: "/v1/admin/accounts/gone/keys", key: opKey}), "id")
	ownKeyID := field(t, v.do(call{op: "issueOwnKey", variant: "valid", method: "POST", path: "/v1/keys", key: key, body: `{"name":"spare"}`}), "id")

	// Each operation: its valid call (as an account or as the operator) and a bad input.
	type opCase struct {
		op, method, path, body string
		admin                  bool
		bad                    call // method, path and body of a bad input, with the status it gets
	}
	ops := []opCase{
		{op: "checkLimit", method: "POST", path: "/v1/limit", body: limitBody, bad: call{body: `{"namespace":"api","key":"k","limit":0,"window_ms":1}`, want: 400}},
		{op: "resetLimit", method: "POST", path: "/v1/limit/reset", body: limitBody, bad: call{body: `{"namespace":"api","key":"never","algorithm":"fixed_window","window_ms":60000}`, want: 404}},
		{op: "acquireLease", method: "POST", path: "/v1/leases", body: leaseBody, bad: call{body: `{"namespace":"jobs","key":"k"}`, want: 400}},
		{op: "renewLease", method: "POST", path: "/v1/leases/" + leaseID + "/renew", body: `{"window_ms":30000}`, bad: call{path: "/v1/leases/nope/renew", want: 400}},
		{op: "listLeases", method: "GET", path: "/v1/namespaces/jobs/leases?key=k", bad: call{path: "/v1/namespaces/jobs/leases", want: 400}},
		{op: "releaseLease", method: "DELETE", path: "/v1/leases/" + leaseID, bad: call{path: "/v1/leases/l1.x.y.z", want: 400}},
		{op: "putRule", method: "POST", path: "/v1/namespaces/api/rules", body: `{"algorithm":"fixed_window","limit":10,"window_ms":1000,"overrides":[{"key":"vip","limit":100}]}`, bad: call{body: `{"algorithm":"fixed_window","limit":0,"window_ms":1000}`, want: 400}},
		{op: "listRules", method: "GET", path: "/v1/namespaces/api/rules", bad: call{path: "/v1/namespaces/-bad/rules", want: 400}},
		{op: "deleteRule", method: "DELETE", path: "/v1/namespaces/api/rules/rate", bad: call{path: "/v1/namespaces/-bad/rules/rate", want: 400}},
		{op: "namespaceStats", method: "GET", path: "/v1/namespaces/api/stats", bad: call{path: "/v1/namespaces/-bad/stats", want: 400}},
		{op: "getWebhook", method: "GET", path: "/v1/webhook"},
		{op: "putWebhook", method: "PUT", path: "/v1/webhook", body: `{"url":"http://127.0.0.1:9/hook"}`, bad: call{body: `{"url":"ftp://x"}`, want: 422}},
		{op: "testWebhook", method: "POST", path: "/v1/webhook/test"},
		{op: "deleteWebhook", method: "DELETE", path: "/v1/webhook"},
		{op: "getOwnAccount", method: "GET", path: "/v1/account"},
		{op: "getUsage", method: "GET", path: "/v1/usage"},
		{op: "listNamespaces", method: "GET", path: "/v1/namespaces"},
		{op: "listOwnKeys", method: "GET", path: "/v1/keys"},
		{op: "issueOwnKey", method: "POST", path: "/v1/keys", body: `{"name":"more"}`, bad: call{body: `{"name":1}`, want: 400}},
		{op: "revokeOwnKey", method: "DELETE", path: "/v1/keys/" + ownKeyID, bad: call{path: "/v1/keys/key_0000000000000000", want: 404}},
		{op: "listOwnAudit", method: "GET", path: "/v1/audit?limit=2", bad: call{path: "/v1/audit?account=acme", want: 400}},
		{op: "listAudit", method: "GET", path: "/v1/admin/audit?account=acme&limit=2", admin: true, bad: call{path: "/v1/admin/audit?account=Not-An-Id", want: 400}},
		{op: "listAccounts", method: "GET", path: "/v1/admin/accounts?limit=2", admin: true, bad: call{path: "/v1/admin/accounts?bogus=1", want: 400}},
		{op: "getAccount", method: "GET", path: "/v1/admin/accounts/acme", admin: true, bad: call{path: "/v1/admin/accounts/nobody", want: 404}},
		{op: "updateAccount", method: "PATCH", path: "/v1/admin/accounts/acme", body: `{"plan":"pro"}`, admin: true, bad: call{body: `{"plan":"gold"}`, want: 400}},
		{op: "listAccountKeys", method: "GET", path: "/v1/admin/accounts/acme/keys", admin: true, bad: call{path: "/v1/admin/accounts/nobody/keys", want: 404}},
		{op: "issueAccountKey", method: "POST", path: "/v1/admin/accounts/acme/keys", admin: true, bad: call{body: `{"name":1}`, want: 400}},
		{op: "getAccountUsage", method: "GET", path: "/v1/admin/accounts/acme/usage", admin: true, bad: call{path: "/v1/admin/accounts/nobody/usage", want: 404}},
		{op: "revokeAccountKey", method: "DELETE", path: "/v1/admin/accounts/gone/keys/" + adminKeyID, admin: true, bad: call{path: "/v1/admin/accounts/gone/keys/key_0000000000000000", want: 404}},
		{op: "deleteAccount", method: "DELETE", path: "/v1/admin/accounts/gone", admin: true, bad: call{path: "/v1/admin/accounts/gone", want: 404}},
		{op: "createAccount", method: "POST", path: "/v1/admin/accounts", body: `{"id":"later","plan":"free"}`, admin: true, bad: call{body: `{"id":"later","plan":"free"}`, want: 409}},
		// On the disk store (the default, in the test's own folder) a tar stream; on the
		// third leash's Redis store, 409 backup_not_supported.
		{op: "backupStore", method: "POST", path: "/v1/admin/backup", admin: true},
	}
	big := http.Header{"X-Padding": {strings.Repeat("p", 70<<10)}}
	for i, o := range ops {
		own, other := key, opKey
		if o.admin {
			own, other = opKey, key
		}
		base := call{op: o.op, method: o.method, path: o.path, body: o.body}
		with := func(variant, k string, want int, h http.Header) call {
			c := base
			c.variant, c.key, c.want, c.header, c.from = variant, k, want, h, byte(10+i)
			return c
		}
		// The refusals first: the valid call may change state (a revoked key, a deleted
		// account).
		v.do(with("no key", "", 401, nil))
		v.do(with("unknown key", "lsh_nobody", 401, nil))
		v.do(with("wrong kind of key", other, 403, nil))
		v.do(with("headers over 64 KiB", own, 431, big))
		if !o.admin {
			v.do(with("suspended account", susKey, 0, nil).anyStatus())
		}
		v.do(with("valid", own, 0, nil))
		if o.bad.want != 0 {
			b := with("bad input", own, o.bad.want, nil)
			if o.bad.path != "" {
				b.path = o.bad.path
			}
			if o.bad.body != "" {
				b.body = o.bad.body
			}
			v.do(b)
		}
	}
	// Not on the plan, and past the hard cap, on a free account.
	freeKey := field(t, v.do(call{op: "issueAccountKey", variant: "valid", method: "POST", path: "/v1/admin/accounts/later/keys", key: opKey}), "key")
	v.do(call{op: "acquireLease", variant: "not on the plan", method: "POST", path: "/v1/leases", key: freeKey, body: leaseBody, want: 403})
	v.do(call{op: "checkLimit", variant: "not on the plan", method: "POST", path: "/v1/limit", key: freeKey, body: `{"namespace":"api","key":"k","algorithm":"token_bucket","limit":5,"window_ms":1000}`, want: 403})
	v.do(call{op: "putWebhook", variant: "not on the plan", method: "PUT", path: "/v1/webhook", key: freeKey, body: `{"url":"http://127.0.0.1:9/hook"}`, want: 403})
	v.do(call{op: "getWebhook", variant: "none set", method: "GET", path: "/v1/webhook", key: freeKey, want: 404})

	// The audit log (spec §15.10): pages followed by their cursor, the filters, and every
	// refusal of the query.
	audit := []call{
		{op: "listAudit", variant: "every account", path: "/v1/admin/audit", key: opKey},
		{op: "listAudit", variant: "an account's first page", path: "/v1/admin/audit?account=acme&limit=1", key: opKey},
		{op: "listAudit", variant: "an id no account has", path: "/v1/admin/audit?account=nobody", key: opKey},
		{op: "listAudit", variant: "a deleted account's", path: "/v1/admin/audit?account=gone", key: opKey},
		{op: "listAudit", variant: "empty account", path: "/v1/admin/audit?account=", key: opKey, want: 400},
		{op: "listAudit", variant: "limit 0", path: "/v1/admin/audit?limit=0", key: opKey, want: 400},
		{op: "listAudit", variant: "limit 1001", path: "/v1/admin/audit?limit=1001", key: opKey, want: 400},
		{op: "listAudit", variant: "limit not plain", path: "/v1/admin/audit?limit=01", key: opKey, want: 400},
		{op: "listAudit", variant: "not a cursor", path: "/v1/admin/audit?cursor=nope", key: opKey, want: 400},
		{op: "listAudit", variant: "limit twice", path: "/v1/admin/audit?limit=1&limit=2", key: opKey, want: 400},
		{op: "listAudit", variant: "unknown parameter", path: "/v1/admin/audit?bogus=1", key: opKey, want: 400},
		{op: "listOwnAudit", variant: "suspended account", path: "/v1/audit", key: susKey},
		{op: "listOwnAudit", variant: "first page", path: "/v1/audit?limit=1", key: key},
		{op: "listOwnAudit", variant: "limit 0", path: "/v1/audit?limit=0", key: key, want: 400},
		{op: "listOwnAudit", variant: "not a cursor", path: "/v1/audit?cursor=nope", key: key, want: 400},
		{op: "listOwnAudit", variant: "cursor twice", path: "/v1/audit?cursor=a&cursor=b", key: key, want: 400},
	}
	for _, c := range audit {
		c.method, c.from = "GET", 60
		body := v.do(c)
		if c.want != 0 || !strings.Contains(c.path, "limit=1") {
			continue
		}
		// A full page of one has a cursor; the next page is read with it.
		next := field(t, body, "next_cursor")
		c.variant, c.path = "the next page", c.path+"&cursor="+url.QueryEscape(next)
		v.do(c)
	}

	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if !v.seen[op.OperationID] {
				t.Errorf("%s %s (%s) was never called", method, path, op.OperationID)
			}
		}
	}

	// A second leash, and an address slowed by failed authentications: every operation
	// answers 429 too_many_auth_failures (or, when a slot freed meanwhile, 401).
	p2 := leashproc.Start(t, bin, []string{"--config", leashproc.Config(t, config)})
	v2 := newValidator(t, doc, p2.URL)
	throttled := 0
	for i := 0; i < 40 && throttled == 0; i++ {
		req, _ := http.NewRequest("GET", p2.URL+"/v1/account", nil)
		req.Header.Set("Authorization", "Bearer lsh_wrong")
		res, err := clientFrom(200).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode == http.StatusTooManyRequests {
			throttled++
		}
	}
	if throttled == 0 {
		t.Fatal("40 failed authentications did not slow the address")
	}
	refused := 0
	for _, o := range ops {
		v2.do(call{op: o.op, variant: "slowed address", method: o.method, path: o.path, body: o.body, key: "lsh_wrong", from: 200}.anyStatus())
		switch v2.last {
		case http.StatusTooManyRequests:
			refused++
		case http.StatusUnauthorized:
		default:
			t.Errorf("%s from a slowed address: %d, want 429 or 401", o.op, v2.last)
		}
	}
	if refused < len(ops)/2 {
		t.Errorf("only %d of %d calls from a slowed address were 429", refused, len(ops))
	}

	// A third leash, on a Redis that has stopped: every operation answers what it can
	// (503 unavailable where it needs the store), and every answer is documented.
	r := redistest.StartServer(t, false)
	p3 := leashproc.Start(t, bin, []string{"--config", leashproc.Config(t, config+redisAccounts)},
		"LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL="+r.URL(),
		"LEASH_STORE_REDIS_READ_TIMEOUT=200ms", "LEASH_STORE_REDIS_DIAL_TIMEOUT=200ms")
	r.Stop()
	v3 := newValidator(t, doc, p3.URL)
	unavailable := 0
	for i, o := range ops {
		k := "key-redis"
		if o.admin {
			k = opKey
		}
		v3.do(call{op: o.op, variant: "store down", method: o.method, path: o.path, body: o.body, key: k, from: byte(100 + i)}.anyStatus())
		if v3.last == http.StatusServiceUnavailable {
			unavailable++
		}
	}
	if unavailable < len(ops)/2 {
		t.Errorf("only %d of %d calls with the store down were 503", unavailable, len(ops))
	}
	t.Logf("%d answers validated against docs/openapi.yaml", v.n+v2.n+v3.n)
	p.NoCrash(t)
	p2.NoCrash(t)
	p3.NoCrash(t)
}

// redisAccounts adds a configured account for the leash on Redis (its directory cannot
// load accounts created through the API while Redis is down).
const redisAccounts = `
accounts:
  - {id: cfg, plan: pro, api_keys: [key-redis]}
`

// anyStatus marks a call whose status is not fixed in advance (its answer is validated all
// the same).
func (c call) anyStatus() call { c.want = -1; return c }
