package httpapi

import (
	"net/http"
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
	serve func(a *API, x *exchange)
}

// routeTable returns the routes, built fresh so no caller can alter another's table.
func routeTable() []route {
	t := []route{
		{Route: Route{http.MethodPost, "/v1/limit"}, body: requiredBody, serve: (*API).check},
		{Route: Route{http.MethodPost, "/v1/limit/reset"}, body: requiredBody, serve: (*API).reset},
		{Route: Route{http.MethodPost, "/v1/leases"}, body: requiredBody, gate: engine.LeasesAllowed, serve: (*API).acquire},
		{Route: Route{http.MethodDelete, "/v1/leases/{lease_id}"}, serve: (*API).release},
		{Route: Route{http.MethodPost, "/v1/leases/{lease_id}/renew"}, body: optionalBody, serve: (*API).renew},
		{Route: Route{http.MethodGet, "/v1/namespaces/{ns}/rules"}, serve: (*API).listRules},
		{Route: Route{http.MethodPost, "/v1/namespaces/{ns}/rules"}, body: requiredBody, serve: (*API).putRule},
		{Route: Route{http.MethodDelete, "/v1/namespaces/{ns}/rules/{kind}"},
			kinds: []string{engine.RateRule.String(), engine.ConcurrentRule.String()}, serve: (*API).deleteRule},
		{Route: Route{http.MethodGet, "/v1/namespaces/{ns}/stats"}, serve: (*API).stats},
		{Route: Route{http.MethodGet, "/v1/webhook"}, serve: (*API).getWebhook},
		{Route: Route{http.MethodPut, "/v1/webhook"}, body: requiredBody, gate: engine.WebhooksAllowed, serve: (*API).putWebhook},
		{Route: Route{http.MethodDelete, "/v1/webhook"}, serve: (*API).deleteWebhook},
		{Route: Route{http.MethodPost, "/v1/webhook/test"}, gate: engine.WebhooksAllowed, serve: (*API).testWebhook},
	}
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

// routeHandler runs the checks every /v1 route shares, in the order of spec §3.7,
// then the route's own handler.
func (a *API) routeHandler(rt *route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := w.(*exchange)
		x.routed, x.route = true, rt.pattern
		acct, ok := a.authenticate(r)
		if !ok {
			x.w.Header()["Www-Authenticate"] = a.hdrBearer
			a.writeError(x, http.StatusUnauthorized, codeUnauthorized, msgUnauthorized)
			return
		}
		x.acct = acct
		if rt.body != noBody && !a.readBody(x, rt.body == requiredBody) {
			return
		}
		if rt.gate != nil {
			if err := rt.gate(acct); err != nil {
				a.engineError(x, err)
				return
			}
		}
		rt.serve(a, x)
	})
}

// authenticate finds the account of the request's bearer key (scheme name
// case-insensitive). The key itself is never logged.
func (a *API) authenticate(r *http.Request) (*engine.Account, bool) {
	h := r.Header["Authorization"]
	if len(h) == 0 {
		return nil, false
	}
	v := h[0]
	const scheme = "bearer"
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) || (v[len(scheme)] != ' ' && v[len(scheme)] != '\t') {
		return nil, false
	}
	key := strings.TrimLeft(v[len(scheme):], " \t")
	if key == "" {
		return nil, false
	}
	return a.eng.Authenticate(key)
}
