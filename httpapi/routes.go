package httpapi

import (
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/leashd/leash/engine"
)

// Route is one (method, path pattern) the API serves, in net/http ServeMux syntax.
type Route struct {
	Method string // GET, PUT, POST or DELETE; a GET route also answers HEAD
	Path   string // e.g. /v1/leases/{lease_id}
}

// Routes returns every route the API serves, in the order they are registered. The router
// is built from the same table, so this list cannot drift from what is served.
func Routes() []Route {
	t := routeTable()
	out := make([]Route, len(t))
	for i, rt := range t {
		out[i] = rt.Route
	}
	return out
}

// bodyMode says whether a route reads a request body.
type bodyMode uint8

const (
	noBody       bodyMode = iota // any body is ignored and never read
	requiredBody                 // a JSON object is required
	optionalBody                 // empty, or a JSON object
)

// route is one entry of the table the router and Routes are built from.
type route struct {
	Route
	pattern string // "METHOD /path", the metrics label
	body    bodyMode
	gate    func(*engine.Account) error // plan gate needing no body (spec §3.7), or nil
	// kinds, if set, are the only values of the path's last segment, a {wildcard}: the
	// route is registered once per value, so any other is not found, decided as routing
	// before auth (spec §6.5).
	kinds []string
	// operator routes authenticate an operator, not an account (spec §15.1).
	operator bool
	// audited routes make changes the audit log records (spec §15.10): their context
	// carries the request's origin.
	audited bool
	serve   func(x *exchange)
}

// routeTable returns the routes, built fresh so no caller can alter another's table.
func routeTable() []route {
	t := []route{
		{Route: Route{http.MethodPost, "/v1/limit"}, body: requiredBody, serve: check},
		{Route: Route{http.MethodPost, "/v1/limit/reset"}, body: requiredBody, audited: true, serve: reset},
		{Route: Route{http.MethodPost, "/v1/leases"}, body: requiredBody, gate: engine.LeasesAllowed, serve: acquire},
		{Route: Route{http.MethodDelete, "/v1/leases/{lease_id}"}, serve: release},
		{Route: Route{http.MethodPost, "/v1/leases/{lease_id}/renew"}, body: optionalBody, serve: renew},
		{Route: Route{http.MethodGet, "/v1/namespaces/{ns}/rules"}, serve: listRules},
		{Route: Route{http.MethodPost, "/v1/namespaces/{ns}/rules"}, body: requiredBody, audited: true, serve: putRule},
		{Route: Route{http.MethodDelete, "/v1/namespaces/{ns}/rules/{kind}"},
			kinds: []string{engine.RateRule.String(), engine.ConcurrentRule.String()}, audited: true, serve: deleteRule},
		{Route: Route{http.MethodGet, "/v1/namespaces/{ns}/stats"}, serve: stats},
		{Route: Route{http.MethodGet, "/v1/webhook"}, serve: getWebhook},
		{Route: Route{http.MethodPut, "/v1/webhook"}, body: requiredBody, gate: engine.WebhooksAllowed, audited: true, serve: putWebhook},
		{Route: Route{http.MethodDelete, "/v1/webhook"}, audited: true, serve: deleteWebhook},
		{Route: Route{http.MethodPost, "/v1/webhook/test"}, gate: engine.WebhooksAllowed, serve: testWebhook},
	}
	t = append(t, accountRoutes()...)
	for i := range t {
		t[i].pattern = t[i].Method + " " + t[i].Path
	}
	return t
}

// register adds rt to mux, its pattern or one literal pattern per allowed kind, and
// returns its handler.
func (a *API) register(mux *http.ServeMux, rt *route) http.Handler {
	h := a.routeHandler(rt)
	if rt.kinds == nil {
		mux.Handle(rt.pattern, h)
		return h
	}
	base := rt.pattern[:strings.LastIndexByte(rt.pattern, '/')+1]
	for _, k := range rt.kinds {
		mux.Handle(base+k, h)
	}
	return h
}

// routeHandler composes rt's handler from the checks every /v1 route shares, each an
// ordinary middleware, in the order of spec §3.7: auth (401), size and media type
// (413, 415), the plan gate needing no body (403), the audit origin; then the route's
// own handler. Options.Middleware wraps the whole, inside the mark of the route.
func (a *API) routeHandler(rt *route) http.Handler {
	h := serve(rt.serve)
	if rt.audited {
		h = withOrigin(h)
	}
	if rt.gate != nil {
		h = planGate(rt.gate, h)
	}
	if rt.body != noBody {
		h = limitBody(rt.body == requiredBody, h)
	}
	h = authenticate(rt.operator, h)
	for _, mw := range slices.Backward(a.wrap) {
		h = mw(h)
	}
	return markRoute(rt.pattern, h)
}

// exchangeKey is the context key of a request's exchange.
type exchangeKey struct{}

// enter returns the exchange of the request a handler was given, now running with w
// and r: what it writes goes through w, and what it reads is r's.
func enter(w http.ResponseWriter, r *http.Request) *exchange {
	x := r.Context().Value(exchangeKey{}).(*exchange)
	x.rw, x.r = w, r
	return x
}

// markRoute marks the request as routed to pattern: from here on, what is written is the
// route's answer, not the router's 404 or 405.
func markRoute(pattern string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := enter(w, r)
		x.routed, x.route = true, pattern
		next.ServeHTTP(w, r)
	})
}

// serve runs a route's own handler.
func serve(h func(*exchange)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(enter(w, r)) })
}

// authenticate admits a request whose bearer key authenticates as an account, or on an
// operator route as an operator (spec §3.1, §15.1), and answers any other itself.
func authenticate(operator bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if authorize(enter(w, r), operator) {
			next.ServeHTTP(w, r)
		}
	})
}

// limitBody admits a request whose body passes the size and media-type checks (413,
// 415), read into the exchange; a required body must be there.
func limitBody(required bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if enter(w, r).readBody(required) {
			next.ServeHTTP(w, r)
		}
	})
}

// planGate admits a request whose account's plan passes gate (spec §3.7).
func planGate(gate func(*engine.Account) error, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := enter(w, r)
		if err := gate(x.acct); err != nil {
			x.engineError(err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withOrigin gives the request's context the origin the audit log records (spec
// §15.10): the client, the request id and the key.
func withOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := enter(w, r)
		next.ServeHTTP(w, r.WithContext(engine.WithOrigin(r.Context(),
			engine.Origin{Client: x.client().String(), RequestID: x.requestID(), KeyID: x.keyID})))
	})
}

// authorize authenticates the request's bearer key as an account, or on an operator
// route as an operator (spec §3.1, §15.1), refusing a client address that failed too often
// (spec §15.7). It answers the refusal itself and returns false.
func authorize(x *exchange, operator bool) bool {
	a := x.a
	r := x.r
	var addr netip.Addr
	if a.guard.Tracking() {
		addr = x.client()
		if retry, ok := a.guard.Check(addr); !ok {
			x.rw.Header()["Retry-After"] = []string{strconv.FormatInt(retry, 10)}
			x.writeError(http.StatusTooManyRequests, engine.CodeTooManyAuthFailures, msgTooManyAuthFailures)
			return false
		}
	}
	key := bearerKey(r)
	if operator {
		if op, ok := a.eng.Accounts.AuthenticateOperator(key); ok {
			x.op = op
			return true
		}
		if _, ok := a.eng.Accounts.Authenticate(key); ok {
			x.writeError(http.StatusForbidden, codeOperatorKeyRequired, msgOperatorKeyRequired)
			return false
		}
	} else {
		if acct, keyID, ok := a.eng.Accounts.Directory().LookupKey(key); ok {
			x.acct, x.keyID = acct, keyID
			return true
		}
		if _, ok := a.eng.Accounts.AuthenticateOperator(key); ok {
			x.writeError(http.StatusForbidden, codeAccountKeyRequired, msgAccountKeyRequired)
			return false
		}
	}
	if !addr.IsValid() {
		addr = x.client()
	}
	a.guard.Failed(addr)
	x.rw.Header()["Www-Authenticate"] = a.hdrBearer
	x.writeError(http.StatusUnauthorized, codeUnauthorized, msgUnauthorized)
	return false
}

// bearerKey returns the key of the request's first Authorization header when it has the
// Bearer scheme (name case-insensitive), else "". The key itself is never logged.
func bearerKey(r *http.Request) string {
	h := r.Header["Authorization"]
	if len(h) == 0 {
		return ""
	}
	v := h[0]
	const scheme = "bearer"
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) || (v[len(scheme)] != ' ' && v[len(scheme)] != '\t') {
		return ""
	}
	return strings.TrimLeft(v[len(scheme):], " \t")
}
