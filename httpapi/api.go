// Package httpapi serves Leash's JSON HTTP API under /v1 (spec §3 to §8) over an
// engine.Engine. It only translates: authentication, body limits, strict JSON decoding
// and the mapping of engine errors to statuses live here; every decision is the engine's.
//
// Every /v1 call is checked in the order of spec §3.7: routing (404/405) → auth (401)
// → size and media type (413/415) → plan gates that need no body (403) → body and fields
// (400) → the engine.
package httpapi

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/leashd/leash/engine"
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
	if _, ok := h.(*API); ok {
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
	Engine *engine.Engine
	// Metrics receives decision counts and request latencies; nil disables them.
	Metrics *metrics.Metrics
	// Logger receives 5xx failures and recovered panics; default slog.Default().
	Logger *slog.Logger
	// Tracing, if set, gives every request a server span with the decision's outcome
	// (spec §12.8); nil is tracing off, at the cost of a nil check per request.
	Tracing *tracing.Tracing
}

// API is the /v1 HTTP handler.
type API struct {
	eng    *engine.Engine
	met    *metrics.Metrics
	log    *slog.Logger
	tr     *tracing.Tracing
	mux    *http.ServeMux
	routes []route
	// literal indexes the routes without wildcards by path, so the hottest calls skip the
	// mux's pattern matching; anything else goes through the mux.
	literal map[string][]*route

	calls sync.Pool // *call: per-request state and buffers

	// Metric handles resolved once (nil maps and zero counters when Metrics is nil).
	observers                      map[string]*metrics.RouteObserver // by route pattern
	limitDecisions, leaseDecisions metrics.DecisionCounter

	idPrefix string
	idSeq    atomic.Uint64

	decodeOpts []jsontext.Options
	// Header values shared by every response. They are never mutated: net/http only
	// reads header value slices.
	hdrJSON   []string
	hdrBearer []string
	hdrRetry1 []string
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
		eng:      opts.Engine,
		met:      opts.Metrics,
		log:      opts.Logger,
		tr:       opts.Tracing,
		mux:      http.NewServeMux(),
		routes:   routeTable(),
		idPrefix: hex.EncodeToString(pfx[:]) + "-",
		decodeOpts: []jsontext.Options{
			// Duplicate names are found by the decoder's own field bitmap (every name that
			// is not a known field is already an error), and strings are UTF-8-checked per
			// field so the message can name the field.
			jsontext.AllowDuplicateNames(true),
			jsontext.AllowInvalidUTF8(true),
		},
		hdrJSON:   []string{"application/json"},
		hdrBearer: []string{"Bearer"},
		hdrRetry1: []string{"1"},
	}
	a.calls.New = func() any { return new(call) }
	a.literal = make(map[string][]*route)
	for i := range a.routes {
		rt := &a.routes[i]
		rt.handler = a.routeHandler(rt)
		a.mux.Handle(rt.pattern, rt.handler)
		if !strings.Contains(rt.Path, "{") {
			a.literal[rt.Path] = append(a.literal[rt.Path], rt)
		}
	}
	a.mux.HandleFunc("/", a.unmatched)
	if m := opts.Metrics; m != nil {
		a.limitDecisions, a.leaseDecisions = m.Decisions("limit"), m.Decisions("leases")
		a.observers = map[string]*metrics.RouteObserver{unmatchedRoute: m.Route(unmatchedRoute)}
		for _, rt := range a.routes {
			a.observers[rt.pattern] = m.Route(rt.pattern)
		}
	}
	return a
}

// ServeHTTP serves one request: it assigns the request id, dispatches through the
// router, recovers panics and records the latency.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c := a.calls.Get().(*call)
	if a.tr != nil {
		// An unsampled request's span records nothing: it is not kept, and the request
		// is served as with tracing off.
		if ctx, span := a.tr.StartHTTP(r); span.IsRecording() {
			r = r.WithContext(ctx)
			c.begin(w, r)
			c.span = span
		} else {
			c.begin(w, r)
		}
	} else {
		c.begin(w, r)
	}
	if v := r.Header[RequestIDHeader]; len(v) > 0 && saneRequestID(v[0]) {
		c.id = v[0]
	} else {
		c.idSeq = a.idSeq.Add(1) // the id's text is only built when needed
	}
	defer a.finish(c, start)
	if headerBytes(r) > MaxHeaderBytes {
		c.w.Header().Set("Connection", "close")
		a.writeError(c, http.StatusRequestHeaderFieldsTooLarge, codeHeaderTooLarge, msgHeaderTooLarge)
		return
	}
	if !cleanPath(r.URL.EscapedPath()) {
		// ServeMux would answer 301 to the cleaned path, turning a POST into a GET on
		// most clients; an API path is either exact or not found.
		a.routingError(c, http.StatusNotFound, "")
		return
	}
	for _, rt := range a.literal[r.URL.Path] {
		if rt.Method == r.Method {
			r.Pattern = rt.pattern // as the mux would set it
			rt.handler.ServeHTTP(c, r)
			return
		}
	}
	a.mux.ServeHTTP(c, r)
}

// finish recovers a panic as 500 internal (or aborts the connection if the response had
// begun), logs 5xx and records metrics. A call whose handler panicked is not returned to
// the pool.
func (a *API) finish(c *call, start time.Time) {
	if v := recover(); v != nil {
		if v == http.ErrAbortHandler {
			// The server aborts the connection; the span still ends, marked as failed.
			if c.span != nil {
				c.span.SetStatus(codes.Error, "aborted")
				tracing.EndHTTP(c.span, c.route, c.status)
				c.span = nil
			}
			panic(v)
		}
		a.log.Error("panic serving request", "request_id", a.requestID(c), "method", c.r.Method,
			"route", c.route, "panic", v, "stack", string(debug.Stack()))
		if c.status != 0 {
			// The response has begun: abort the connection rather than let a partial
			// response pass for a whole one.
			a.observe(c, start)
			panic(http.ErrAbortHandler)
		}
		c.err = nil
		a.writeError(c, http.StatusInternalServerError, engine.CodeInternal, msgInternal)
		a.observe(c, start)
		return
	}
	if c.status == 0 { // a handler that wrote nothing
		c.WriteHeader(http.StatusOK)
	}
	if c.status >= 500 && c.err != nil {
		a.log.Error("request failed", "request_id", a.requestID(c), "method", c.r.Method, "route", c.route,
			"status", c.status, "err", c.err)
	}
	a.observe(c, start)
	c.end()
	a.calls.Put(c)
}

func (a *API) observe(c *call, start time.Time) {
	if o := a.observers[c.route]; o != nil {
		o.Observe(c.status, time.Since(start))
	}
	if c.span != nil {
		if c.acct != nil && c.span.IsRecording() {
			c.span.SetAttributes(tracing.AttrAccount.String(c.acct.ID))
			if ns := c.r.PathValue("ns"); ns != "" { // the rules and stats routes
				c.span.SetAttributes(tracing.AttrNamespace.String(ns))
			}
		}
		tracing.EndHTTP(c.span, c.route, c.status)
		c.span = nil
	}
	if a.log.Enabled(c.r.Context(), slog.LevelDebug) {
		a.log.Debug("request", "request_id", a.requestID(c), "method", c.r.Method, "route", c.route,
			"status", c.status, "duration", time.Since(start))
	}
}

// annotate adds a decision's attributes to the request's span (tracing on only).
func (a *API) annotate(c *call, attrs ...attribute.KeyValue) {
	if c.span != nil && c.span.IsRecording() {
		c.span.SetAttributes(attrs...)
	}
}

// requestID returns the call's request id: the client's, if sane, else one generated
// from the instance prefix and a counter, unique per process without any per-request
// randomness.
func (a *API) requestID(c *call) string {
	if c.id == "" {
		var b [40]byte
		c.id = string(a.appendGeneratedID(b[:0], c.idSeq))
	}
	return c.id
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
