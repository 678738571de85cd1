package httpapi

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/tracing"
)

// checkBody is the decoded body of POST /v1/limit and /v1/limit/reset; nil fields are absent.
type checkBody struct {
	Namespace string
	Key       string
	Algorithm *string
	Limit     *int64
	WindowMS  *int64
	Cost      *int64
	// Overdraft counts the cost even when it is denied (spec §4.12).
	Overdraft bool
}

// algorithmOf is the engine's reading of an optional algorithm name.
func algorithmOf(name *string) engine.Algorithm {
	if name == nil {
		return engine.AlgorithmUnknown
	}
	return engine.AlgorithmOf(*name)
}

// check serves POST /v1/limit (spec §4.1): a query of one item, decided by the engine.
func (a *API) check(c *call) {
	if err := a.decodeCheck(c); err != nil {
		a.engineError(c, err)
		return
	}
	body := &c.chk
	c.item[0] = engine.CheckItem(body.Key, engine.Inline{Algorithm: algorithmOf(body.Algorithm), Limit: body.Limit, WindowMS: body.WindowMS}, body.Cost)
	c.item[0].Overdraft = body.Overdraft
	c.q = engine.Query{Edge: engine.EdgeLimit, Namespace: body.Namespace, Items: c.item[:], StrictCost: true}
	if _, err := a.eng.Decide(c.r.Context(), c.acct, &c.q, c.res[:]); err != nil {
		a.engineError(c, err)
		return
	}
	r := &c.res[0]
	d := engine.Decision{Allowed: r.Allowed, Limit: r.Limit.Limit, Remaining: r.Remaining, ResetMS: r.ResetMS}
	if a.met != nil {
		a.limitDecisions.Inc(d.Allowed)
	}
	if c.span != nil { // recording: an unsampled request builds no attributes
		a.annotate(c, tracing.AttrEdge.String(string(engine.EdgeLimit)), tracing.AttrNamespace.String(c.q.Namespace),
			tracing.Outcome(d.Allowed), tracing.AttrAlgorithm.String(r.Limit.Algorithm.String()))
	}

	// X-Request-Id (when generated), RateLimit-* and Retry-After share one string and one
	// slice, so these headers cost two allocations together.
	resetSec := ceilSec(d.ResetMS)
	var nb [128]byte
	b := nb[:0]
	if c.id == "" {
		b = a.appendGeneratedID(b, c.idSeq)
	}
	e0 := len(b)
	b = strconv.AppendInt(b, d.Limit, 10)
	e1 := len(b)
	b = strconv.AppendInt(b, d.Remaining, 10)
	e2 := len(b)
	b = strconv.AppendInt(b, resetSec, 10)
	e3 := len(b)
	if !d.Allowed {
		b = strconv.AppendInt(b, max(1, resetSec), 10)
	}
	s := string(b)
	if c.id == "" {
		c.id = s[:e0]
	}
	vals := make([]string, 5)
	vals[0], vals[1], vals[2], vals[3], vals[4] = c.id, s[e0:e1], s[e1:e2], s[e2:e3], s[e3:]
	h := c.w.Header()
	h[RequestIDHeader] = vals[0:1:1]
	h["Ratelimit-Limit"] = vals[1:2:2]
	h["Ratelimit-Remaining"] = vals[2:3:3]
	h["Ratelimit-Reset"] = vals[3:4:4]
	if !d.Allowed {
		h["Retry-After"] = vals[4:5:5]
	}

	o := append(c.out[:0], `{"allowed":`...)
	o = strconv.AppendBool(o, d.Allowed)
	o = append(o, `,"limit":`...)
	o = strconv.AppendInt(o, d.Limit, 10)
	o = append(o, `,"remaining":`...)
	o = strconv.AppendInt(o, d.Remaining, 10)
	o = append(o, `,"reset_ms":`...)
	o = strconv.AppendInt(o, d.ResetMS, 10)
	o = append(o, '}')
	c.out = o
	a.writeJSON(c, http.StatusOK, o)
}

// ceilSec converts ms to whole seconds, rounded up.
func ceilSec(ms int64) int64 {
	if ms <= 0 {
		return 0
	}
	return (ms-1)/1000 + 1
}

// decodeCheck decodes the body of POST /v1/limit and /v1/limit/reset into c.chk.
func (a *API) decodeCheck(c *call) error {
	p, req := &c.p, &c.chk
	if err := p.begin(&c.body, a.decodeOpts); err != nil {
		return err
	}
	for {
		name, done, err := p.next()
		if err != nil {
			return err
		}
		if done {
			return p.finish()
		}
		switch string(name) {
		case "namespace":
			_, err = p.str(fNamespace, "namespace", &req.Namespace)
		case "key":
			_, err = p.str(fKey, "key", &req.Key)
		case "algorithm":
			err = p.algorithm(&req.Algorithm, &c.alg)
		case "limit":
			err = p.integer(fLimit, "limit", intStrict, &req.Limit, &c.limit)
		case "window_ms":
			err = p.integer(fWindow, "window_ms", intStrict, &req.WindowMS, &c.window)
		case "cost":
			err = p.integer(fCost, "cost", intStrict, &req.Cost, &c.cost)
		case "overdraft":
			err = p.boolean(fOverdraft, "overdraft", &req.Overdraft)
		default:
			err = unknown(name)
		}
		if err != nil {
			return err
		}
	}
}

// reset serves POST /v1/limit/reset: the check's fields, limit, cost and overdraft ignored
// (spec §4.11).
func (a *API) reset(c *call) {
	if err := a.decodeCheck(c); err != nil {
		a.engineError(c, err)
		return
	}
	c.rst = engine.ResetRequest{Namespace: c.chk.Namespace, Key: c.chk.Key, Algorithm: algorithmOf(c.chk.Algorithm), WindowMS: c.chk.WindowMS}
	if err := a.eng.Reset(c.r.Context(), c.acct, &c.rst); err != nil {
		a.engineError(c, err)
		return
	}
	a.writeJSON(c, http.StatusOK, append(c.out[:0], `{"reset":true}`...))
}

// acquire serves POST /v1/leases (spec §5.1).
func (a *API) acquire(c *call) {
	if err := a.decodeAcquire(c); err != nil {
		a.engineError(c, err)
		return
	}
	d, err := a.eng.Acquire(c.r.Context(), c.acct, &c.acq)
	if err != nil {
		a.engineError(c, err)
		return
	}
	if a.met != nil {
		a.leaseDecisions.Inc(d.Allowed)
	}
	if c.span != nil { // recording: an unsampled request builds no attributes
		a.annotate(c, tracing.AttrEdge.String(string(engine.EdgeLeases)), tracing.AttrNamespace.String(c.acq.Namespace),
			tracing.Outcome(d.Allowed), tracing.AttrAlgorithm.String(engine.ConcurrentLimit.String()))
	}
	o := append(c.out[:0], `{"allowed":`...)
	o = strconv.AppendBool(o, d.Allowed)
	if d.Allowed {
		o = append(o, `,"lease_id":`...)
		o, _ = jsontext.AppendQuote(o, d.LeaseID)
	}
	o = append(o, `,"active":`...)
	o = strconv.AppendInt(o, d.Active, 10)
	o = append(o, `,"limit":`...)
	o = strconv.AppendInt(o, d.Limit, 10)
	o = append(o, `,"reset_ms":`...)
	o = strconv.AppendInt(o, d.ResetMS, 10)
	o = append(o, '}')
	c.out = o
	a.writeJSON(c, http.StatusOK, o)
}

func (a *API) decodeAcquire(c *call) error {
	p, req := &c.p, &c.acq
	if err := p.begin(&c.body, a.decodeOpts); err != nil {
		return err
	}
	for {
		name, done, err := p.next()
		if err != nil {
			return err
		}
		if done {
			return p.finish()
		}
		switch string(name) {
		case "namespace":
			_, err = p.str(fNamespace, "namespace", &req.Namespace)
		case "key":
			_, err = p.str(fKey, "key", &req.Key)
		case "limit":
			err = p.integer(fLimit, "limit", intStrict, &req.Limit, &c.limit)
		case "window_ms":
			err = p.integer(fWindow, "window_ms", intStrict, &req.WindowMS, &c.window)
		default:
			err = unknown(name)
		}
		if err != nil {
			return err
		}
	}
}

// release serves DELETE /v1/leases/{lease_id}; it reads no body.
func (a *API) release(c *call) {
	res, err := a.eng.Release(c.r.Context(), c.acct, c.r.PathValue("lease_id"))
	if err != nil {
		a.engineError(c, err)
		return
	}
	o := append(c.out[:0], `{"released":`...)
	o = strconv.AppendBool(o, res.Released)
	o = append(o, `,"active":`...)
	o = strconv.AppendInt(o, res.Active, 10)
	o = append(o, '}')
	c.out = o
	a.writeJSON(c, http.StatusOK, o)
}

// renew serves POST /v1/leases/{lease_id}/renew with an optional body {window_ms?}.
func (a *API) renew(c *call) {
	var window *int64
	if len(bytes.Trim(c.body.Bytes(), " \t\r\n")) > 0 {
		if err := a.decodeRenew(c, &window); err != nil {
			a.engineError(c, err)
			return
		}
	}
	res, err := a.eng.Renew(c.r.Context(), c.acct, c.r.PathValue("lease_id"), window)
	if err != nil {
		a.engineError(c, err)
		return
	}
	o := append(c.out[:0], `{"renewed":`...)
	o = strconv.AppendBool(o, res.Renewed)
	o = append(o, `,"active":`...)
	o = strconv.AppendInt(o, res.Active, 10)
	o = append(o, `,"reset_ms":`...)
	o = strconv.AppendInt(o, res.ResetMS, 10)
	o = append(o, '}')
	c.out = o
	a.writeJSON(c, http.StatusOK, o)
}

func (a *API) decodeRenew(c *call, window **int64) error {
	p := &c.p
	if err := p.begin(&c.body, a.decodeOpts); err != nil {
		return err
	}
	for {
		name, done, err := p.next()
		if err != nil {
			return err
		}
		if done {
			return p.finish()
		}
		switch string(name) {
		case "window_ms":
			err = p.integer(fWindow, "window_ms", intStrict, window, &c.window)
		default:
			err = unknown(name)
		}
		if err != nil {
			return err
		}
	}
}

// The JSON shapes of the rule and stats responses (spec §6.2, §7.2).
type (
	ruleJSON struct {
		Namespace string         `json:"namespace"`
		Algorithm string         `json:"algorithm"`
		Limit     int64          `json:"limit"`
		WindowMS  int64          `json:"window_ms"`
		Name      *string        `json:"name"`
		Overrides []overrideJSON `json:"overrides,omitempty"` // absent when none (spec §6.7)
	}
	overrideJSON struct {
		Key      string `json:"key"`
		Limit    int64  `json:"limit"`
		WindowMS int64  `json:"window_ms,omitzero"` // absent: the rule's window
	}
	rulesJSON struct {
		Namespace string     `json:"namespace"`
		Rules     []ruleJSON `json:"rules"`
	}
	dayJSON struct {
		Day     string `json:"day"`
		Total   int64  `json:"total"`
		Blocked int64  `json:"blocked"`
	}
	monthJSON struct {
		Month     string `json:"month"`
		Total     int64  `json:"total"`
		Quota     int64  `json:"quota"`
		OverQuota bool   `json:"over_quota"`
		HardCap   *int64 `json:"hard_cap"`
	}
	statsJSON struct {
		Namespace string    `json:"namespace"`
		Total     int64     `json:"total"`
		Blocked   int64     `json:"blocked"`
		Days      []dayJSON `json:"days"`
		Month     monthJSON `json:"month"`
	}
)

func toRuleJSON(ns string, r engine.Rule) ruleJSON {
	j := ruleJSON{Namespace: ns, Algorithm: r.Algorithm.String(), Limit: r.Limit, WindowMS: r.WindowMS, Name: r.Name}
	for _, o := range r.Overrides.List() {
		j.Overrides = append(j.Overrides, overrideJSON{Key: o.Key, Limit: o.Limit, WindowMS: o.WindowMS})
	}
	return j
}

// marshal writes v as the JSON response.
func (a *API) marshal(c *call, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		a.engineError(c, err)
		return
	}
	a.writeJSON(c, status, b)
}

// listRules serves GET /v1/namespaces/{ns}/rules.
func (a *API) listRules(c *call) {
	ns := c.r.PathValue("ns")
	rules, err := a.eng.Rules(c.r.Context(), c.acct, ns)
	if err != nil {
		a.engineError(c, err)
		return
	}
	out := rulesJSON{Namespace: ns, Rules: make([]ruleJSON, 0, len(rules))}
	for _, r := range rules {
		out.Rules = append(out.Rules, toRuleJSON(ns, r))
	}
	a.marshal(c, http.StatusOK, &out)
}

// putRule serves POST /v1/namespaces/{ns}/rules: 201 created, 200 replaced.
func (a *API) putRule(c *call) {
	ns := c.r.PathValue("ns")
	if err := engine.CheckNamespace(ns); err != nil {
		a.engineError(c, err)
		return
	}
	if err := a.decodeRule(c); err != nil {
		a.engineError(c, err)
		return
	}
	rule, created, err := a.eng.PutRule(c.r.Context(), c.acct, ns, &c.rule)
	if err != nil {
		a.engineError(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	out := toRuleJSON(rule.Namespace, rule.Rule)
	a.marshal(c, status, &out)
}

func (a *API) decodeRule(c *call) error {
	p, req := &c.p, &c.rule
	if err := p.begin(&c.body, a.decodeOpts); err != nil {
		return err
	}
	for {
		name, done, err := p.next()
		if err != nil {
			return err
		}
		if done {
			return p.finish()
		}
		switch string(name) {
		case "algorithm":
			err = p.algorithm(&req.Algorithm, &c.alg)
		case "limit":
			err = p.integer(fLimit, "limit", intRule, &req.Limit, &c.limit)
		case "window_ms":
			err = p.integer(fWindow, "window_ms", intRule, &req.WindowMS, &c.window)
		case "name":
			err = p.optStr(fName, "name", &req.Name, &c.name)
		case "overrides":
			err = a.overrides(p, &req.Overrides)
		case "namespace": // the path's namespace wins; the field is accepted and ignored
			_, err = p.str(fNamespace, "namespace", &c.ignoredStr)
		default:
			err = unknown(name)
		}
		if err != nil {
			return err
		}
	}
}

// deleteRule serves DELETE /v1/namespaces/{ns}/rules/{kind}; the router has already
// restricted kind to rate or concurrent.
func (a *API) deleteRule(c *call) {
	kind, _ := engine.ParseRuleKind(c.r.PathValue("kind"))
	deleted, err := a.eng.DeleteRule(c.r.Context(), c.acct, c.r.PathValue("ns"), kind)
	if err != nil {
		a.engineError(c, err)
		return
	}
	o := append(c.out[:0], `{"deleted":`...)
	o = strconv.AppendBool(o, deleted)
	o = append(o, '}')
	c.out = o
	a.writeJSON(c, http.StatusOK, o)
}

// stats serves GET /v1/namespaces/{ns}/stats.
func (a *API) stats(c *call) {
	st, err := a.eng.Stats(c.r.Context(), c.acct, c.r.PathValue("ns"))
	if err != nil {
		a.engineError(c, err)
		return
	}
	out := statsJSON{
		Namespace: st.Namespace,
		Total:     st.Total,
		Blocked:   st.Blocked,
		Days:      make([]dayJSON, len(st.Days)),
		Month: monthJSON{
			Month:     st.Month.Month.String(),
			Total:     st.Month.Total,
			Quota:     st.Month.Quota,
			OverQuota: st.Month.OverQuota,
			HardCap:   st.Month.HardCap,
		},
	}
	for i, d := range st.Days {
		out.Days[i] = dayJSON{Day: d.Day.String(), Total: d.Total, Blocked: d.Blocked}
	}
	a.marshal(c, http.StatusOK, &out)
}
