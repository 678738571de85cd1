package httpapi_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/webhooks"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/httpapi"
	"github.com/leashd/leash/metrics"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/webhook"
	"github.com/leashd/leash/webhook/ssrf"
)

// t0 is the tests' start: minute-aligned, 8 days 14 hours before the end of the month.
var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// secondsToMonthEnd is Retry-After on hard_cap_exceeded at t0.
const secondsToMonthEnd = 8*86400 + 14*3600

// API keys of the test accounts.
const (
	keyAcme  = "key-acme"  // pro
	keyBeta  = "key-beta"  // pro
	keyFree  = "key-free"  // free
	keyScale = "key-scale" // scale: no hard cap
	keyTiny  = "key-tiny"  // pro features, quota 2, hard cap 4
)

func directory(t testing.TB) *engine.Directory {
	plans := engine.BuiltinPlans()
	tiny := plans["pro"]
	tiny.Name, tiny.MonthlyQuota = "tiny", 2
	hardCap := int64(4)
	tiny.HardCap = &hardCap
	spec := func(id string, p engine.Plan, key string) engine.AccountSpec {
		return engine.AccountSpec{ID: id, Plan: p, KeyHashes: [][32]byte{engine.HashKey(key)}}
	}
	dir, err := engine.NewDirectory([]engine.AccountSpec{
		spec("acme", plans["pro"], keyAcme),
		spec("beta", plans["pro"], keyBeta),
		spec("freebie", plans["free"], keyFree),
		spec("big", plans["scale"], keyScale),
		spec("tiny", tiny, keyTiny),
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// env is an API over an engine over the memory store with a fake clock.
type env struct {
	t     testing.TB
	clock *testkit.FakeClock
	store *memstore.Store
	eng   *wiring.Engine
	api   *httpapi.API
	met   *metrics.Metrics
	logs  *testkit.SyncBuffer
}

// newEnv builds an env; wrap, if set, wraps the memory store (to inject failures).
func newEnv(t testing.TB, wrap func(engine.Store) engine.Store) *env {
	clock := testkit.NewFakeClock(t0)
	ms := memstore.New(memstore.Options{Clock: clock})
	t.Cleanup(func() { _ = ms.Close() })
	var store engine.Store = ms
	if wrap != nil {
		store = wrap(ms)
	}
	logs := &testkit.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	met := metrics.New()
	eng := wiring.New(engine.RolesOf(store), directory(t), wiring.Options{Logger: log, Observer: met.Observer(nil, 0.8), Webhooks: webhooks.Options{Screen: webhook.Screen(ssrf.Policy{}, fakeResolver{})}})
	api := httpapi.New(httpapi.Options{Engine: eng, Metrics: met, Logger: log, AuthGuard: lenientGuard()})
	return &env{t: t, clock: clock, store: ms, eng: eng, api: api, met: met, logs: logs}
}

// fakeResolver answers webhook host lookups without DNS: hooks.example.com is public,
// private.example.com resolves to a private address, anything else does not resolve.
type fakeResolver struct{}

func (fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	switch host {
	case "hooks.example.com":
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	case "private.example.com":
		return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.1.2.3")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// resp is a recorded response.
type resp struct {
	code int
	hdr  http.Header
	body string
}

// obj decodes the body as a JSON object.
func (r resp) obj(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// req describes a request; a zero contentType sends application/json when there is a body.
type req struct {
	method, path, key, body string
	contentType             string // "-" sends none
	header                  map[string]string
	auth                    string // the whole Authorization header, instead of key
}

func (e *env) do(q req) resp {
	e.t.Helper()
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	r := httptest.NewRequest(q.method, q.path, body)
	switch {
	case q.contentType == "-":
	case q.contentType != "":
		r.Header.Set("Content-Type", q.contentType)
	case q.body != "":
		r.Header.Set("Content-Type", "application/json")
	}
	switch {
	case q.auth != "":
		r.Header.Set("Authorization", q.auth)
	case q.key != "":
		r.Header.Set("Authorization", "Bearer "+q.key)
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	e.api.ServeHTTP(w, r)
	res := resp{code: w.Code, hdr: w.Result().Header, body: w.Body.String()}
	if ct := res.hdr.Get("Content-Type"); ct != "application/json" && (res.code != http.StatusNoContent || ct != "") {
		e.t.Errorf("%s %s: Content-Type %q, want application/json", q.method, q.path, ct)
	}
	if res.hdr.Get("X-Request-Id") == "" {
		e.t.Errorf("%s %s: no X-Request-Id", q.method, q.path)
	}
	return res
}

// post sends a JSON body with key.
func (e *env) post(path, key, body string) resp {
	e.t.Helper()
	return e.do(req{method: http.MethodPost, path: path, key: key, body: body})
}

func (e *env) get(path, key string) resp {
	e.t.Helper()
	return e.do(req{method: http.MethodGet, path: path, key: key})
}

func (e *env) del(path, key string) resp {
	e.t.Helper()
	return e.do(req{method: http.MethodDelete, path: path, key: key})
}

// mustBody checks the status and the exact body.
func mustBody(t testing.TB, r resp, code int, body string) {
	t.Helper()
	if r.code != code || r.body != body {
		t.Fatalf("got %d %s\nwant %d %s", r.code, r.body, code, body)
	}
}

// mustError checks an error response: status, code, exact {error, code} shape, and that
// the message contains every one of msgParts.
func mustError(t testing.TB, r resp, code int, errCode string, msgParts ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("status %d, want %d (body %s)", r.code, code, r.body)
	}
	m := r.obj(t)
	if len(m) != 2 {
		t.Fatalf("error body %s: want exactly error and code", r.body)
	}
	if m["code"] != errCode {
		t.Fatalf("code %v, want %s (body %s)", m["code"], errCode, r.body)
	}
	msg, _ := m["error"].(string)
	if msg == "" {
		t.Fatalf("empty error message: %s", r.body)
	}
	for _, p := range msgParts {
		if !strings.Contains(msg, p) {
			t.Fatalf("message %q does not contain %q", msg, p)
		}
	}
}

func (e *env) flush() {
	e.t.Helper()
	if err := e.eng.Usage.Flush(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// errStore fails every operation with an error full of internal detail.
type errStore struct{ engine.Store }

var errDriver = errors.New("redis: dial tcp 10.0.0.7:6379: connection refused (/var/run/secret)")

func (errStore) Spend(context.Context, engine.Spend) (engine.Decision, error) {
	return engine.Decision{}, errDriver
}
func (errStore) Reset(context.Context, engine.Counter) (bool, error) { return false, errDriver }
func (errStore) Acquire(context.Context, engine.LeaseSet, string, int64, int64) (engine.LeaseDecision, error) {
	return engine.LeaseDecision{}, errDriver
}
func (errStore) Release(context.Context, engine.LeaseSet, string) (engine.ReleaseResult, error) {
	return engine.ReleaseResult{}, errDriver
}
func (errStore) Renew(context.Context, engine.LeaseSet, string, int64) (engine.RenewResult, error) {
	return engine.RenewResult{}, errDriver
}
func (errStore) Rules(context.Context, string, string) (engine.Rules, error) {
	return engine.Rules{}, errDriver
}
func (errStore) PutRule(context.Context, string, string, engine.Rule) (bool, error) {
	return false, errDriver
}
func (errStore) DeleteRule(context.Context, string, string, engine.RuleKind) (bool, error) {
	return false, errDriver
}
func (errStore) AddUsage(context.Context, engine.UsageBatch) error { return errDriver }
func (errStore) ReadUsage(context.Context, engine.UsageQuery) (engine.UsageReport, error) {
	return engine.UsageReport{}, errDriver
}
func (errStore) MonthTotals(context.Context, engine.Month, []string) ([]int64, error) {
	return nil, errDriver
}
func (errStore) Webhook(context.Context, string) (engine.Webhook, bool, error) {
	return engine.Webhook{}, false, errDriver
}
func (errStore) PutWebhook(context.Context, string, engine.Webhook) error { return errDriver }
func (errStore) DeleteWebhook(context.Context, string) (bool, error)      { return false, errDriver }
func (errStore) Enqueue(context.Context, engine.OutboxEvent, string) (bool, error) {
	return false, errDriver
}
func (errStore) NowMS(context.Context) (int64, error) { return 0, errDriver }
func (errStore) Ping(context.Context) error           { return errDriver }

// brokenStore answers usage reads with a report of the wrong length (an engine
// invariant broken: 500 internal) and panics on rule reads.
type brokenStore struct{ engine.Store }

func (brokenStore) ReadUsage(context.Context, engine.UsageQuery) (engine.UsageReport, error) {
	return engine.UsageReport{}, nil
}

func (brokenStore) Rules(context.Context, string, string) (engine.Rules, error) {
	panic("boom: /home/leash/secret.go:42")
}

// lenientGuard is an AuthGuard that never slows the tests that send many bad keys on
// purpose; accounts_test.go tests the default one.
func lenientGuard() *engine.AuthGuard {
	return engine.NewAuthGuard(engine.AuthGuardOptions{Burst: 1 << 30})
}
