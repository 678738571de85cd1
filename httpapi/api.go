// Package httpapi serves Leash's JSON HTTP API under /v1 (spec §3 to §8) over an
// wiring.Engine. It only translates: authentication, body limits, strict JSON decoding
// and the mapping of engine errors to statuses live here; every decision is the engine's.
//
// Every /v1 call is checked in the order of spec §3.7: routing (404/405) → auth (401)
// → size and media type (413/415) → plan gates that need no body (403) → body and fields
// (400) → the engine.
package httpapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/httpapi/clientip"
	"github.com/leashd/leash/metrics"
	"github.com/leashd/leash/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// Server limits set by NewServer: the defaults of the http.* config keys.
const (
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout = 5 * time.Second
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout = 30 * time.Second
	// WriteTimeout bounds writing a response, from the end of the request headers.
	WriteTimeout = 30 * time.Second
	// IdleTimeout bounds how long a keep-alive connection waits for its next request.
	IdleTimeout = 120 * time.Second
	// MaxHeaderBytes bounds the size of a request's headers, request line included: a
	// larger request is 431 request_header_too_large with the JSON error body (spec §3.10).
	MaxHeaderBytes = 64 << 10
	// TransportHeaderBytes is net/http's own bound on the headers it reads. Headers from
	// MaxHeaderBytes up to it reach the handler, which answers 431 in JSON; only beyond
	// it does net/http answer 431 itself, in plain text.
	TransportHeaderBytes = 1 << 20
)

// MaxBodyBytes is the largest request body accepted; larger is 413 request_too_large.
const MaxBodyBytes = 64 << 10

// MaxRequestIDLen is the longest client X-Request-Id echoed; a longer one, or one with
// characters outside printable ASCII, is replaced by a generated id.
const MaxRequestIDLen = 128

// RequestIDHeader carries the request id on every response.
const RequestIDHeader = "X-Request-Id"

// unmatchedRoute labels the latency of requests no route serves (404/405), keeping the
// metric's label set bounded.
const unmatchedRoute = "unmatched"

// Timeouts are a server's bounds on slow and idle clients; a zero field takes the
// default above.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers (default ReadHeaderTimeout).
	ReadHeader time.Duration
	// Read bounds reading a whole request from its first byte (default ReadTimeout).
	Read time.Duration
	// Write bounds writing a response from the end of the headers (default WriteTimeout).
	Write time.Duration
	// Idle bounds a keep-alive connection's wait for its next request (default IdleTimeout).
	Idle time.Duration
}

// NewServer returns an http.Server for h on addr with the default timeouts and the
// header limit above.
func NewServer(addr string, h http.Handler) *http.Server {
	return NewServerWith(addr, h, Timeouts{})
}

// NewServerWith returns an http.Server for h on addr with timeouts t (zero fields take
// the defaults) and the header limit above.
func NewServerWith(addr string, h http.Handler, t Timeouts) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           limitHeaders(h),
		ReadHeaderTimeout: cmp.Or(t.ReadHeader, ReadHeaderTimeout),
		ReadTimeout:       cmp.Or(t.Read, ReadTimeout),
		WriteTimeout:      cmp.Or(t.Write, WriteTimeout),
		IdleTimeout:       cmp.Or(t.Idle, IdleTimeout),
		MaxHeaderBytes:    TransportHeaderBytes,
	}
}

// limitHeaders answers 431 request_header_too_large in JSON for a request whose headers
// exceed MaxHeaderBytes; the API does so itself, with its request id and metrics.
func limitHeaders(h http.Handler) http.Handler {
	switch h.(type) {
	case *API, *fronted:
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerBytes(r) > MaxHeaderBytes {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
			_, _ = w.Write([]byte(`{"error":"` + msgHeaderTooLarge + `","code":"` + string(codeHeaderTooLarge) + `"}`))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// fronted is a handler mounted in front of an API whose oversized requests the API
// answers itself.
type fronted struct {
	api  *API
	next http.Handler
}

// Front returns next (the console's mount, say, which passes /v1 on to api) with every
// request whose headers exceed MaxHeaderBytes answered by api: 431 with its request id
// and metrics, whatever the path (spec §3.9, §3.10).
func Front(api *API, next http.Handler) http.Handler { return &fronted{api: api, next: next} }

// ServeHTTP sends an oversized request to the API and every other one to next.
func (f *fronted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if headerBytes(r) > MaxHeaderBytes {
		f.api.ServeHTTP(w, r)
		return
	}
	f.next.ServeHTTP(w, r)
}

// headerBytes is the size of a request's header block as sent: the request line and
// every header line.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	if _, ok := r.Header["Host"]; !ok && r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2 // net/http moves Host out of Header
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// Options configures an API.
type Options struct {
	// Engine decides every call; required.
	Engine *wiring.Engine
	// Metrics receives decision counts and request latencies; nil disables them.
	Metrics *metrics.Metrics
	// Logger receives 5xx failures, recovered panics, refusals worth an operator's eye
	// and, at debug, every request (spec §12.4); default slog.Default().
	Logger *slog.Logger
	// Tracing, if set, gives every request a server span with the decision's outcome
	// (spec §12.8); nil is tracing off, at the cost of a nil check per request.
	Tracing *tracing.Tracing
	// Clock times the refusal summary's interval (spec §12.4); nil is the system clock.
	Clock engine.Clock
	// AuthGuard slows client addresses that fail authentication too often (spec §15.7);
	// nil gives the API its own.
	AuthGuard *engine.AuthGuard
	// TrustedProxies are the proxies whose X-Forwarded-For or Forwarded header names the
	// client (http.trusted_proxies, spec §15.7); none: the client is the peer.
	TrustedProxies []netip.Prefix
	// Middleware wraps every route's handler, the first outermost: ordinary
	// func(http.Handler) http.Handler middleware, which may wrap the ResponseWriter and
	// the request. It runs once the request is routed, inside the API's request id,
	// metrics, tracing and panic recovery, and sees every answer of a routed request,
	// refusals included; 404 and 405 are answered before it. A middleware must not let
	// a route's handler run on once it has returned (as http.TimeoutHandler does after
	// its timeout): the API reuses a request's state once the request is answered.
	Middleware []func(http.Handler) http.Handler
	// Backup, if set, writes a consistent copy of the store, taken while it serves, into
	// dir, a directory that does not exist yet (POST /v1/admin/backup, spec §15.11); nil:
	// the store is not one that can be backed up so (the route answers 409).
	Backup func(ctx context.Context, dir string) error
}

// API is the /v1 HTTP handler.
type API struct {
	backup func(ctx context.Context, dir string) error // Options.Backup
	eng    *wiring.Engine
	met    *metrics.Metrics
	log    *slog.Logger
	tr     *tracing.Tracing
	mux    *http.ServeMux // the routes; its own 404 and 405 are answered in JSON
	// literal holds the routes whose path has no wildcard, by path, the mux's own
	// handlers: an exact match skips the mux's pattern matching, the hot path's largest
	// routing cost (BenchmarkRouteLimit, docs/performance.md). Anything else, every 404
	// and 405 included, is the mux's.
	literal map[string][]literalRoute

	exchanges sync.Pool // *exchange: per-request transport state and buffers

	// Metric handles resolved once (nil maps and zero counters when Metrics is nil).
	observers                      map[string]*metrics.RouteObserver // by route pattern
	limitDecisions, leaseDecisions metrics.DecisionCounter

	idPrefix string
	idSeq    atomic.Uint64

	refusals *refusalLog
	guard    *engine.AuthGuard
	wrap     []func(http.Handler) http.Handler // Options.Middleware
	proxies  clientip.Proxies

	// Header values shared by every response. They are never mutated: net/http only
	// reads header value slices.
	hdrJSON   []string
	hdrBearer []string
	hdrRetry1 []string
	// hdrNoStore and hdrNosniff go on every answer.
	hdrNoStore, hdrNosniff []string
}

// New returns the API over opts.Engine.
func New(opts Options) *API {
	if opts.Engine == nil {
		panic("httpapi: Options.Engine is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var pfx [6]byte
	_, _ = rand.Read(pfx[:]) // crypto/rand.Read never fails (Go 1.24+)
	a := &API{
		eng:        opts.Engine,
		met:        opts.Metrics,
		log:        opts.Logger,
		tr:         opts.Tracing,
		mux:        http.NewServeMux(),
		idPrefix:   hex.EncodeToString(pfx[:]) + "-",
		refusals:   newRefusalLog(opts.Logger, opts.Clock),
		guard:      opts.AuthGuard,
		wrap:       opts.Middleware,
		backup:     opts.Backup,
		proxies:    clientip.Proxies(opts.TrustedProxies),
		hdrJSON:    []string{"application/json"},
		hdrBearer:  []string{"Bearer"},
		hdrRetry1:  []string{"1"},
		hdrNoStore: []string{"no-store"}, hdrNosniff: []string{"nosniff"},
	}
	if a.guard == nil {
		a.guard = engine.NewAuthGuard(engine.AuthGuardOptions{})
	}
	a.exchanges.New = func() any { return &exchange{a: a} }
	routes := routeTable()
	a.literal = make(map[string][]literalRoute)
	for i := range routes {
		rt := &routes[i]
		h := a.register(a.mux, rt)
		if !strings.Contains(rt.Path, "{") {
			a.literal[rt.Path] = append(a.literal[rt.Path], literalRoute{rt.Method, rt.pattern, h})
		}
	}
	if m := opts.Metrics; m != nil {
		a.limitDecisions, a.leaseDecisions = m.Decisions("limit"), m.Decisions("leases")
		a.observers = map[string]*metrics.RouteObserver{unmatchedRoute: m.Route(unmatchedRoute)}
		for _, rt := range routes {
			a.observers[rt.pattern] = m.Route(rt.pattern)
		}
	}
	return a
}

// ServeHTTP serves one request: it assigns the request id, dispatches through the
// router, recovers panics and records the latency.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	x := a.exchanges.Get().(*exchange)
	// The request's context carries its exchange to the route's handlers, whatever
	// writer and request a middleware hands them.
	ctx := r.Context()
	if a.tr != nil {
		// An unsampled request's span records nothing: it is not kept, and the request
		// is served as with tracing off.
		if sctx, span := a.tr.StartHTTP(r); span.IsRecording() {
			ctx, x.span = sctx, span
		}
	}
	r = r.WithContext(context.WithValue(ctx, exchangeKey{}, x))
	x.begin(w, r)
	if v := r.Header[RequestIDHeader]; len(v) > 0 && saneRequestID(v[0]) {
		x.id = v[0]
	} else {
		x.idSeq = a.idSeq.Add(1) // the id's text is only built when needed
	}
	defer a.finish(x, start)
	// Some answers carry a secret (an issued key, a webhook's secret): no /v1 answer is
	// kept by a cache or sniffed as another type (spec §3.6).
	h := w.Header()
	h["Cache-Control"], h["X-Content-Type-Options"] = a.hdrNoStore, a.hdrNosniff
	if headerBytes(r) > MaxHeaderBytes {
		x.w.Header().Set("Connection", "close")
		x.writeError(http.StatusRequestHeaderFieldsTooLarge, codeHeaderTooLarge, msgHeaderTooLarge)
		return
	}
	if !cleanPath(r.URL.EscapedPath()) {
		// ServeMux would redirect to the cleaned path, turning a POST into a GET on most
		// clients; an API path is either exact or not found.
		x.notFound()
		return
	}
	for _, rt := range a.literal[r.URL.Path] {
		if rt.method == r.Method {
			r.Pattern = rt.pattern // as the mux would set it
			rt.handler.ServeHTTP(x, r)
			return
		}
	}
	x.routed = false
	a.mux.ServeHTTP(x, r)
	a.routed(x)
}

// literalRoute is a route without wildcards, served without the mux's matching.
type literalRoute struct {
	method, pattern string
	handler         http.Handler
}

// finish recovers a panic as 500 internal (or aborts the connection if the response had
// begun), logs 5xx and refusals and records metrics. An exchange whose handler panicked
// is not returned to the pool.
func (a *API) finish(x *exchange, start time.Time) {
	x.routed = true
	if v := recover(); v != nil {
		x.rw = x // a middleware's writer may be past use: what is left is answered directly
		if v == http.ErrAbortHandler {
			// The server aborts the connection; the span still ends, marked as failed.
			if x.span != nil {
				x.span.SetStatus(codes.Error, "aborted")
				tracing.EndHTTP(x.span, x.route, x.status)
				x.span = nil
			}
			panic(v)
		}
		a.log.Error("panic serving request", "request_id", x.requestID(), "method", x.r.Method,
			"route", x.route, "panic", v, "stack", string(debug.Stack()))
		if x.status != 0 {
			// The response has begun: abort the connection rather than let a partial
			// response pass for a whole one.
			a.observe(x, start)
			panic(http.ErrAbortHandler)
		}
		x.err = nil
		x.writeError(http.StatusInternalServerError, engine.CodeInternal, msgInternal)
		a.observe(x, start)
		return
	}
	if x.status == 0 { // a handler that wrote nothing
		x.WriteHeader(http.StatusOK)
	}
	if x.status >= 400 && x.status < 500 {
		a.refusals.refused(x.r.Context(), x, x.requestID(), x.client())
	}
	if x.status >= 500 && x.err != nil {
		a.log.Error("request failed", "request_id", x.requestID(), "client", x.client().String(), "method", x.r.Method,
			"route", x.route, "status", x.status, "err", x.err)
	}
	a.observe(x, start)
	x.end()
	a.exchanges.Put(x)
}

func (a *API) observe(x *exchange, start time.Time) {
	if o := a.observers[x.route]; o != nil {
		o.Observe(x.status, time.Since(start))
	}
	if x.span != nil {
		if x.acct != nil && x.span.IsRecording() {
			x.span.SetAttributes(tracing.AttrAccount.String(x.acct.ID))
			if ns := x.r.PathValue("ns"); ns != "" { // the rules and stats routes
				x.span.SetAttributes(tracing.AttrNamespace.String(ns))
			}
		}
		tracing.EndHTTP(x.span, x.route, x.status)
		x.span = nil
	}
	if a.log.Enabled(x.r.Context(), slog.LevelDebug) {
		a.log.Debug("request", "request_id", x.requestID(), "method", x.r.Method, "route", x.route,
			"status", x.status, "duration_ms", float64(time.Since(start).Microseconds())/1000)
	}
}

// annotate adds a decision's attributes to the request's span (tracing on only).
func (x *exchange) annotate(attrs ...attribute.KeyValue) {
	if x.span != nil && x.span.IsRecording() {
		x.span.SetAttributes(attrs...)
	}
}

// client returns the request's client address (spec §15.7), resolved once per request.
func (x *exchange) client() netip.Addr {
	if !x.clientSet {
		x.clientAddr, x.clientSet = x.a.proxies.Client(x.r), true
	}
	return x.clientAddr
}

// requestID returns the call's request id: the client's, if sane, else one generated
// from the instance prefix and a counter, unique per process without any per-request
// randomness.
func (x *exchange) requestID() string {
	if x.id == "" {
		var b [40]byte
		x.id = string(x.a.appendGeneratedID(b[:0], x.idSeq))
	}
	return x.id
}

func (a *API) appendGeneratedID(b []byte, seq uint64) []byte {
	return strconv.AppendUint(append(b, a.idPrefix...), seq, 36)
}

func saneRequestID(s string) bool {
	if len(s) == 0 || len(s) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// cleanPath reports whether p is already in the form ServeMux would not redirect: no
// empty, "." or ".." segments.
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		rest := p[i+1:]
		switch {
		case len(rest) > 0 && rest[0] == '/':
			return false
		case rest == "." || rest == "..",
			len(rest) >= 2 && rest[0] == '.' && rest[1] == '/',
			len(rest) >= 3 && rest[0] == '.' && rest[1] == '.' && rest[2] == '/':
			return false
		}
	}
	return true
}
