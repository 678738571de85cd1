package httpapi

import (
	"net/http"
	"net/url"
	"slices"
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

// pathEnum restricts a path wildcard to a fixed set of values; another value is
// decided as routing: 404 not_found, before auth (spec §6.5).
type pathEnum struct {
	name   string
	values []string
}

func (e *pathEnum) allows(v string) bool { return slices.Contains(e.values, v) }

// route is one entry of the table the router and Routes are built from.
type route struct {
	Route
	pattern string // "METHOD /path", the ServeMux pattern and the metrics label
	body    bodyMode
	gate    func(*engine.Account) error // plan gate needing no body (spec §3.7), or nil
	enum    *pathEnum                   // optional wildcard restriction
	serve   func(a *API, c *call)
	handler http.Handler // set by New: the checks of routeHandler, then serve
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
			enum:  &pathEnum{name: "kind", values: []string{engine.RateRule.String(), engine.ConcurrentRule.String()}},
			serve: (*API).deleteRule},
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

// routeHandler runs the checks every /v1 route shares, in the order of spec §3.7,
// then the route's own handler.
func (a *API) routeHandler(rt *route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := w.(*call)
		c.route = rt.pattern
		if rt.enum != nil && !rt.enum.allows(r.PathValue(rt.enum.name)) {
			a.routingError(c, http.StatusNotFound, "")
			return
		}
		acct, ok := a.authenticate(r)
		if !ok {
			c.w.Header()["Www-Authenticate"] = a.hdrBearer
			a.writeError(c, http.StatusUnauthorized, codeUnauthorized, msgUnauthorized)
			return
		}
		c.acct = acct
		if rt.body != noBody && !a.readBody(c, rt.body == requiredBody) {
			return
		}
		if rt.gate != nil {
			if err := rt.gate(acct); err != nil {
				a.engineError(c, err)
				return
			}
		}
		rt.serve(a, c)
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

// unmatched answers every request no route pattern matched: 405 with Allow when the
// path is served under other methods, else 404.
func (a *API) unmatched(w http.ResponseWriter, r *http.Request) {
	c := w.(*call)
	allow := a.allowed(r.URL.EscapedPath())
	if allow == "" {
		a.routingError(c, http.StatusNotFound, "")
		return
	}
	a.routingError(c, http.StatusMethodNotAllowed, allow)
}

// allowed returns the Allow header for path: the methods of every route whose path
// pattern (and wildcard restriction) matches it, HEAD included with GET; "" for none.
func (a *API) allowed(path string) string {
	var methods []string
	for i := range a.routes {
		rt := &a.routes[i]
		if !matchPath(rt, path) || slices.Contains(methods, rt.Method) {
			continue
		}
		methods = append(methods, rt.Method)
		if rt.Method == http.MethodGet {
			methods = append(methods, http.MethodHead)
		}
	}
	slices.Sort(methods)
	return strings.Join(methods, ", ")
}

// matchPath matches an escaped request path against a route's path pattern segment by
// segment, each unescaped as ServeMux does: literal segments must be equal, a {wildcard}
// matches one non-empty segment (within its restriction, if any).
func matchPath(rt *route, path string) bool {
	ps, ss := strings.Split(rt.Path, "/"), strings.Split(path, "/")
	if len(ps) != len(ss) {
		return false
	}
	for i, p := range ps {
		s := ss[i]
		if u, err := url.PathUnescape(s); err == nil {
			s = u
		}
		if !strings.HasPrefix(p, "{") {
			if p != s {
				return false
			}
			continue
		}
		if s == "" {
			return false
		}
		if rt.enum != nil && p == "{"+rt.enum.name+"}" && !rt.enum.allows(s) {
			return false
		}
	}
	return true
}
