package httpapi_test

import (
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leashd/leash/httpapi"
)

// statusLog is a logging middleware of the usual kind: it wraps the ResponseWriter in its
// own type (without Unwrap) to see the status, and records each route's answer.
type statusLog struct {
	mu    sync.Mutex
	lines []string
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (l *statusLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		l.mu.Lock()
		l.lines = append(l.lines, r.Pattern+" "+http.StatusText(sw.status))
		l.mu.Unlock()
	})
}

var leaseID = regexp.MustCompile(`"lease_id":"[^"]*"`)

// timeout is net/http's TimeoutHandler as a middleware: it hands the route a writer of
// its own that buffers the answer.
func timeout(next http.Handler) http.Handler {
	return http.TimeoutHandler(next, time.Minute, "timed out")
}

// TestMiddlewareWrapsRoutes: standard middleware that wraps the ResponseWriter (a
// logging wrapper, net/http's TimeoutHandler) composes with the API's routes: every
// answer is the same, byte for byte and header for header, as without them, and the
// middleware sees each routed request's status, refusals included.
func TestMiddlewareWrapsRoutes(t *testing.T) {
	calls := []req{
		{method: http.MethodPost, path: "/v1/limit", key: keyAcme, body: `{"namespace":"ns","key":"k","algorithm":"fixed_window","limit":1,"window_ms":60000}`},
		{method: http.MethodPost, path: "/v1/limit", key: keyAcme, body: `{"namespace":"ns","key":"k","algorithm":"fixed_window","limit":1,"window_ms":60000}`},
		{method: http.MethodPost, path: "/v1/limit", key: keyAcme, body: `{"namespace":"ns","key":"k","limit":0}`},
		{method: http.MethodPost, path: "/v1/limit", key: "nope", body: `{}`},
		{method: http.MethodPost, path: "/v1/limit", key: keyAcme, body: `{}`, contentType: "text/plain"},
		{method: http.MethodPost, path: pRules, key: keyAcme, body: `{"algorithm":"fixed_window","limit":5,"window_ms":60000}`},
		{method: http.MethodGet, path: pRules, key: keyAcme},
		{method: http.MethodPut, path: "/v1/webhook", key: keyFree, body: `{"url":"https://hooks.example.com/x"}`},
		{method: http.MethodPost, path: "/v1/leases", key: keyAcme, body: `{"namespace":"ns","key":"db","limit":2,"window_ms":30000}`},
		{method: http.MethodGet, path: "/v1/admin/accounts", key: keyAcme},
		{method: http.MethodGet, path: "/v1/account", key: keyAcme},
		{method: http.MethodGet, path: "/v1/nowhere", key: keyAcme},
		{method: http.MethodDelete, path: "/v1/limit", key: keyAcme},
	}
	serve := func(mw ...func(http.Handler) http.Handler) []resp {
		e := newEnv(t, nil)
		e.api = httpapi.New(httpapi.Options{Engine: e.eng, AuthGuard: lenientGuard(), Middleware: mw})
		out := make([]resp, len(calls))
		for i, q := range calls {
			q.header = map[string]string{"X-Request-Id": "req-1"}
			out[i] = e.do(q)
			out[i].body = leaseID.ReplaceAllString(out[i].body, `"lease_id":"…"`) // random
		}
		return out
	}
	want := serve()
	for _, c := range []struct {
		name string
		mw   func(l *statusLog) []func(http.Handler) http.Handler
	}{
		{"logging", func(l *statusLog) []func(http.Handler) http.Handler {
			return []func(http.Handler) http.Handler{l.wrap}
		}},
		{"timeout", func(l *statusLog) []func(http.Handler) http.Handler {
			return []func(http.Handler) http.Handler{l.wrap, timeout}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l statusLog
			got := serve(c.mw(&l)...)
			for i, q := range calls {
				g, w := got[i], want[i]
				if g.code != w.code || g.body != w.body || !maps.EqualFunc(g.hdr, w.hdr, slices.Equal) {
					t.Errorf("%s %s through middleware: %d %v %s, want %d %v %s", q.method, q.path,
						g.code, g.hdr, g.body, w.code, w.hdr, w.body)
				}
			}
			// Routed requests pass through the middleware; 404 and 405 are the router's.
			wantLines := []string{
				"POST /v1/limit OK", "POST /v1/limit OK", "POST /v1/limit Bad Request",
				"POST /v1/limit Unauthorized", "POST /v1/limit Unsupported Media Type",
				"POST /v1/namespaces/{ns}/rules Created", "GET /v1/namespaces/{ns}/rules OK",
				"PUT /v1/webhook Forbidden", "POST /v1/leases OK",
				"GET /v1/admin/accounts Forbidden", "GET /v1/account OK",
			}
			if got := strings.Join(l.lines, "\n"); got != strings.Join(wantLines, "\n") {
				t.Errorf("the middleware saw\n%s\nwant\n%s", got, strings.Join(wantLines, "\n"))
			}
		})
	}
}
