package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/leases"
	"github.com/leashd/leash/engine/limits"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/tracing"
)

// Each handler decodes its body into its own request type (decodeBody) and answers with
// its own reply type (reply); the member types (text, count, ...) are in decode.go.

// limitRequest is the body of POST /v1/limit and /v1/limit/reset (spec §4.1, §4.11).
type limitRequest struct {
	Namespace text          `json:"namespace"`
	Key       text          `json:"key"`
	Algorithm algorithmName `json:"algorithm"`
	Limit     count         `json:"limit"`
	WindowMS  count         `json:"window_ms"`
	Cost      count         `json:"cost"`
	// Overdraft counts the cost even when it is denied (spec §4.12).
	Overdraft flag `json:"overdraft"`
}

// limitReply is the reply of POST /v1/limit.
type limitReply struct {
	Allowed   bool  `json:"allowed"`
	Limit     int64 `json:"limit"`
	Remaining int64 `json:"remaining"`
	ResetMS   int64 `json:"reset_ms"`
}

// engineAlgorithm is the engine's reading of the optional algorithm member.
func (a *algorithmName) engineAlgorithm() engine.Algorithm {
	if !a.set {
		return engine.AlgorithmUnknown
	}
	return engine.AlgorithmOf(a.name)
}

// ptr returns the name, or nil when absent.
func (a *algorithmName) ptr() *string {
	if !a.set {
		return nil
	}
	return &a.name
}

// limitCall is POST /v1/limit's own per-request state: its body, its one-item query, the
// verdict and the reply. It is pooled, as the route is the hot path: allocated per
// request these would be five more allocations (docs/performance.md).
type limitCall struct {
	req   limitRequest
	items [1]engine.Item
	q     engine.Query
	res   [1]engine.ItemResult
	reply limitReply
}

var limitCalls = sync.Pool{New: func() any { return new(limitCall) }}

// check serves POST /v1/limit (spec §4.1): a query of one item, decided by the engine.
func check(x *exchange) {
	a := x.a
	lc := limitCalls.Get().(*limitCall)
	defer func() {
		*lc = limitCall{} // a decode merges into what it is given, and nothing is pinned
		limitCalls.Put(lc)
	}()
	req := &lc.req
	if err := decodeBody(x.body.Bytes(), req); err != nil {
		x.engineError(err)
		return
	}
	lc.items[0] = engine.CheckItem(string(req.Key),
		engine.Inline{Algorithm: req.Algorithm.engineAlgorithm(), Limit: req.Limit.ptr(), WindowMS: req.WindowMS.ptr()}, req.Cost.ptr())
	lc.items[0].Overdraft = bool(req.Overdraft)
	lc.q = engine.Query{Edge: engine.EdgeLimit, Namespace: string(req.Namespace), Items: lc.items[:], StrictCost: true}
	if _, err := a.eng.Limits.Decide(x.r.Context(), x.acct, &lc.q, lc.res[:]); err != nil {
		x.engineError(err)
		return
	}
	r := &lc.res[0]
	d := &lc.reply
	*d = limitReply{Allowed: r.Allowed, Limit: r.Limit.Limit, Remaining: r.Remaining, ResetMS: r.ResetMS}
	if a.met != nil {
		a.limitDecisions.Inc(d.Allowed)
	}
	if x.span != nil { // recording: an unsampled request builds no attributes
		x.annotate(tracing.AttrEdge.String(string(engine.EdgeLimit)), tracing.AttrNamespace.String(lc.q.Namespace),
			tracing.Outcome(d.Allowed), tracing.AttrAlgorithm.String(r.Limit.Algorithm.String()))
	}
	x.rateLimitHeaders(d)
	x.out.Reset()
	x.out.Write(appendLimitReply(x.out.AvailableBuffer(), d))
	x.writeJSON(http.StatusOK, x.out.Bytes())
}

// appendLimitReply appends d as JSON, exactly as reply would write it (a test holds the
// two to the same bytes). It is the one hand-written encoder: on the hot path it is
// several times faster than the library's (BenchmarkLimitReply, docs/performance.md).
func appendLimitReply(b []byte, d *limitReply) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, `,"reset_ms":`...)
	b = strconv.AppendInt(b, d.ResetMS, 10)
	return append(b, '}')
}

// rateLimitHeaders sets X-Request-Id (when generated), RateLimit-* and Retry-After. They
// share one string and one slice, so these headers cost two allocations together.
func (x *exchange) rateLimitHeaders(d *limitReply) {
	resetSec := ceilSec(d.ResetMS)
	var nb [128]byte
	b := nb[:0]
	if x.id == "" {
		b = x.a.appendGeneratedID(b, x.idSeq)
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
	if x.id == "" {
		x.id = s[:e0]
	}
	vals := make([]string, 5)
	vals[0], vals[1], vals[2], vals[3], vals[4] = x.id, s[e0:e1], s[e1:e2], s[e2:e3], s[e3:]
	h := x.rw.Header()
	h[RequestIDHeader] = vals[0:1:1]
	h["Ratelimit-Limit"] = vals[1:2:2]
	h["Ratelimit-Remaining"] = vals[2:3:3]
	h["Ratelimit-Reset"] = vals[3:4:4]
	if !d.Allowed {
		h["Retry-After"] = vals[4:5:5]
	}
}

// ceilSec converts ms to whole seconds, rounded up.
func ceilSec(ms int64) int64 {
	if ms <= 0 {
		return 0
	}
	return (ms-1)/1000 + 1
}

// reset serves POST /v1/limit/reset: the check's fields, limit, cost and overdraft ignored
// (spec §4.11).
func reset(x *exchange) {
	a := x.a
	var req limitRequest
	if err := decodeBody(x.body.Bytes(), &req); err != nil {
		x.engineError(err)
		return
	}
	rst := limits.ResetRequest{Namespace: string(req.Namespace), Key: string(req.Key),
		Algorithm: req.Algorithm.engineAlgorithm(), WindowMS: req.WindowMS.ptr()}
	if err := a.eng.Limits.Reset(x.r.Context(), x.acct, &rst); err != nil {
		x.engineError(err)
		return
	}
	x.reply(http.StatusOK, &struct {
		Reset bool `json:"reset"`
	}{true})
}

// acquireRequest is the body of POST /v1/leases (spec §5.1).
type acquireRequest struct {
	Namespace text  `json:"namespace"`
	Key       text  `json:"key"`
	Limit     count `json:"limit"`
	WindowMS  count `json:"window_ms"`
}

// acquireReply is the reply of POST /v1/leases; lease_id only when allowed.
type acquireReply struct {
	Allowed bool   `json:"allowed"`
	LeaseID string `json:"lease_id,omitzero"`
	Active  int64  `json:"active"`
	Limit   int64  `json:"limit"`
	ResetMS int64  `json:"reset_ms"`
}

// acquire serves POST /v1/leases (spec §5.1).
func acquire(x *exchange) {
	a := x.a
	var req acquireRequest
	if err := decodeBody(x.body.Bytes(), &req); err != nil {
		x.engineError(err)
		return
	}
	acq := leases.AcquireRequest{Namespace: string(req.Namespace), Key: string(req.Key), Limit: req.Limit.ptr(), WindowMS: req.WindowMS.ptr()}
	d, err := a.eng.Leases.Acquire(x.r.Context(), x.acct, &acq)
	if err != nil {
		x.engineError(err)
		return
	}
	if a.met != nil {
		a.leaseDecisions.Inc(d.Allowed)
	}
	if x.span != nil { // recording: an unsampled request builds no attributes
		x.annotate(tracing.AttrEdge.String(string(engine.EdgeLeases)), tracing.AttrNamespace.String(acq.Namespace),
			tracing.Outcome(d.Allowed), tracing.AttrAlgorithm.String(engine.ConcurrentLimit.String()))
	}
	out := acquireReply{Allowed: d.Allowed, Active: d.Active, Limit: d.Limit, ResetMS: d.ResetMS}
	if d.Allowed {
		out.LeaseID = d.LeaseID
	}
	x.reply(http.StatusOK, &out)
}

// release serves DELETE /v1/leases/{lease_id}; it reads no body.
func release(x *exchange) {
	a := x.a
	res, err := a.eng.Leases.Release(x.r.Context(), x.acct, x.r.PathValue("lease_id"))
	if err != nil {
		x.engineError(err)
		return
	}
	x.reply(http.StatusOK, &struct {
		Released bool  `json:"released"`
		Active   int64 `json:"active"`
	}{res.Released, res.Active})
}

// renewRequest is the optional body of POST /v1/leases/{lease_id}/renew (spec §5.5).
type renewRequest struct {
	WindowMS count `json:"window_ms"`
}

// renew serves POST /v1/leases/{lease_id}/renew with an optional body {window_ms?}.
func renew(x *exchange) {
	a := x.a
	var req renewRequest
	if !emptyBody(x.body.Bytes()) {
		if err := decodeBody(x.body.Bytes(), &req); err != nil {
			x.engineError(err)
			return
		}
	}
	res, err := a.eng.Leases.Renew(x.r.Context(), x.acct, x.r.PathValue("lease_id"), req.WindowMS.ptr())
	if err != nil {
		x.engineError(err)
		return
	}
	x.reply(http.StatusOK, &struct {
		Renewed bool  `json:"renewed"`
		Active  int64 `json:"active"`
		ResetMS int64 `json:"reset_ms"`
	}{res.Renewed, res.Active, res.ResetMS})
}

// ruleRequest is the body of POST /v1/namespaces/{ns}/rules (spec §6.2, §6.7).
type ruleRequest struct {
	Algorithm algorithmName      `json:"algorithm"`
	Limit     ruleCount          `json:"limit"`
	WindowMS  ruleCount          `json:"window_ms"`
	Name      optionalText       `json:"name"`
	Overrides []*overrideRequest `json:"overrides"` // null entries are rejected
	Namespace text               `json:"namespace"` // the path's namespace wins: checked, then ignored
}

// overrideRequest is one entry of a rule's overrides, decoded as strictly as a body;
// ranges, duplicates and the count are the engine's (spec §6.3).
type overrideRequest struct {
	Key      optionalText `json:"key"`
	Limit    ruleCount    `json:"limit"`
	WindowMS ruleCount    `json:"window_ms"`
}

// engineRequest converts the decoded body for the engine.
func (r *ruleRequest) engineRequest() (rules.RuleRequest, error) {
	req := rules.RuleRequest{Algorithm: r.Algorithm.ptr(), Limit: r.Limit.ptr(), WindowMS: r.WindowMS.ptr(), Name: r.Name.ptr()}
	if r.Overrides != nil {
		req.Overrides = make([]rules.OverrideRequest, len(r.Overrides))
		for i, o := range r.Overrides {
			if o == nil {
				return rules.RuleRequest{}, engine.Invalid("overrides[" + strconv.Itoa(i) + "] must be an object")
			}
			req.Overrides[i] = rules.OverrideRequest{Key: o.Key.ptr(), Limit: o.Limit.ptr(), WindowMS: o.WindowMS.ptr()}
		}
	}
	return req, nil
}

// The JSON shapes of the rule and stats responses (spec §6.2, §7.2).
type (
	ruleJSON struct {
		Namespace string         `json:"namespace"`
		Algorithm string         `json:"algorithm"`
		Limit     int64          `json:"limit"`
		WindowMS  int64          `json:"window_ms"`
		Name      *string        `json:"name,omitzero"`       // absent when none was given
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

// listRules serves GET /v1/namespaces/{ns}/rules.
func listRules(x *exchange) {
	a := x.a
	ns := x.r.PathValue("ns")
	rules, err := a.eng.Rules.List(x.r.Context(), x.acct, ns)
	if err != nil {
		x.engineError(err)
		return
	}
	out := rulesJSON{Namespace: ns, Rules: make([]ruleJSON, 0, len(rules))}
	for _, r := range rules {
		out.Rules = append(out.Rules, toRuleJSON(ns, r))
	}
	x.reply(http.StatusOK, &out)
}

// putRule serves POST /v1/namespaces/{ns}/rules: 201 created, 200 replaced.
func putRule(x *exchange) {
	a := x.a
	ns := x.r.PathValue("ns")
	if err := engine.CheckNamespace(ns); err != nil {
		x.engineError(err)
		return
	}
	var body ruleRequest
	if err := decodeBody(x.body.Bytes(), &body); err != nil {
		x.engineError(err)
		return
	}
	req, err := body.engineRequest()
	if err != nil {
		x.engineError(err)
		return
	}
	rule, created, err := a.eng.Rules.Put(x.r.Context(), x.acct, ns, &req)
	if err != nil {
		x.engineError(err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	out := toRuleJSON(rule.Namespace, rule.Rule)
	x.reply(status, &out)
}

// deleteRule serves DELETE /v1/namespaces/{ns}/rules/{kind}; the router has already
// restricted kind, the path's last segment, to rate or concurrent.
func deleteRule(x *exchange) {
	a := x.a
	p := x.r.URL.Path
	kind, _ := engine.ParseRuleKind(p[strings.LastIndexByte(p, '/')+1:])
	deleted, err := a.eng.Rules.Delete(x.r.Context(), x.acct, x.r.PathValue("ns"), kind)
	if err != nil {
		x.engineError(err)
		return
	}
	x.reply(http.StatusOK, &struct {
		Deleted bool `json:"deleted"`
	}{deleted})
}

// stats serves GET /v1/namespaces/{ns}/stats.
func stats(x *exchange) {
	a := x.a
	st, err := a.eng.Usage.Stats(x.r.Context(), x.acct, x.r.PathValue("ns"))
	if err != nil {
		x.engineError(err)
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
	x.reply(http.StatusOK, &out)
}
