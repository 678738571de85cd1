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
	"github.com/leashd/leash/engine/usage"
	"github.com/leashd/leash/tracing"
	"github.com/leashd/leash/wire"
)

// Each handler decodes its body into its request type of package wire (decodeBody) and
// answers with its reply type (reply); decode.go holds the scalar rules of the members.

// algorithmOf is the engine's reading of the optional algorithm member.
func algorithmOf(a *wire.Optional[string]) engine.Algorithm {
	if !a.Set {
		return engine.AlgorithmUnknown
	}
	return engine.AlgorithmOf(a.Value)
}

// limitCall is POST /v1/limit's own per-request state: its body, its one-item query, the
// verdict and the reply. It is pooled, as the route is the hot path: allocated per
// request these would be five more allocations (docs/performance.md).
type limitCall struct {
	req   wire.LimitRequest
	items [1]engine.Item
	q     engine.Query
	res   [1]engine.ItemResult
	reply wire.LimitResult
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
	lc.items[0] = engine.CheckItem(req.Key,
		engine.Inline{Algorithm: algorithmOf(&req.Algorithm), Limit: req.Limit.Ptr(), WindowMS: req.WindowMS.Ptr()}, req.Cost.Ptr())
	lc.items[0].Overdraft = req.Overdraft
	lc.q = engine.Query{Edge: engine.EdgeLimit, Namespace: req.Namespace, Items: lc.items[:], StrictCost: true}
	if _, err := a.eng.Limits.Decide(x.r.Context(), x.acct, &lc.q, lc.res[:]); err != nil {
		x.engineError(err)
		return
	}
	r := &lc.res[0]
	d := &lc.reply
	*d = wire.LimitResult{Allowed: r.Allowed, Limit: r.Limit.Limit, Remaining: r.Remaining, ResetMS: r.ResetMS}
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
func appendLimitReply(b []byte, d *wire.LimitResult) []byte {
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
func (x *exchange) rateLimitHeaders(d *wire.LimitResult) {
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
	var req wire.LimitRequest
	if err := decodeBody(x.body.Bytes(), &req); err != nil {
		x.engineError(err)
		return
	}
	rst := limits.ResetRequest{Namespace: req.Namespace, Key: req.Key,
		Algorithm: algorithmOf(&req.Algorithm), WindowMS: req.WindowMS.Ptr()}
	if err := a.eng.Limits.Reset(x.r.Context(), x.acct, &rst); err != nil {
		x.engineError(err)
		return
	}
	x.reply(http.StatusOK, &wire.ResetResult{Reset: true})
}

// acquire serves POST /v1/leases (spec §5.1).
func acquire(x *exchange) {
	a := x.a
	var req wire.LeaseRequest
	if err := decodeBody(x.body.Bytes(), &req); err != nil {
		x.engineError(err)
		return
	}
	acq := leases.AcquireRequest{Namespace: req.Namespace, Key: req.Key, Limit: req.Limit.Ptr(), WindowMS: req.WindowMS.Ptr()}
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
	out := wire.LeaseDecision{Allowed: d.Allowed, Active: d.Active, Limit: d.Limit, ResetMS: d.ResetMS}
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
	x.reply(http.StatusOK, &wire.ReleaseResult{Released: res.Released, Active: res.Active})
}

// renew serves POST /v1/leases/{lease_id}/renew with an optional body {window_ms?}.
func renew(x *exchange) {
	a := x.a
	var req wire.RenewRequest
	if !emptyBody(x.body.Bytes()) {
		if err := decodeBody(x.body.Bytes(), &req); err != nil {
			x.engineError(err)
			return
		}
	}
	res, err := a.eng.Leases.Renew(x.r.Context(), x.acct, x.r.PathValue("lease_id"), req.WindowMS.Ptr())
	if err != nil {
		x.engineError(err)
		return
	}
	x.reply(http.StatusOK, &wire.RenewResult{Renewed: res.Renewed, Active: res.Active, ResetMS: res.ResetMS})
}

// ruleRequestOf converts a decoded rule body for the engine; ranges, duplicates and the
// count of overrides are the engine's (spec §6.3).
func ruleRequestOf(r *wire.RuleRequest) (rules.RuleRequest, error) {
	req := rules.RuleRequest{Algorithm: r.Algorithm.Ptr(), Limit: r.Limit.Ptr(), WindowMS: r.WindowMS.Ptr(), Name: r.Name.Ptr()}
	if r.Overrides != nil {
		req.Overrides = make([]rules.OverrideRequest, len(r.Overrides))
		for i, o := range r.Overrides {
			if o == nil {
				return rules.RuleRequest{}, engine.Invalid("overrides[" + strconv.Itoa(i) + "] must be an object")
			}
			req.Overrides[i] = rules.OverrideRequest{Key: o.Key.Ptr(), Limit: o.Limit.Ptr(), WindowMS: o.WindowMS.Ptr()}
		}
	}
	return req, nil
}

// ruleOf is the answer's form of a namespace's rule: an override's window only when it
// has its own.
func ruleOf(ns string, r engine.Rule) wire.Rule {
	j := wire.Rule{Namespace: ns, Algorithm: r.Algorithm.String(), Limit: r.Limit, WindowMS: r.WindowMS, Name: r.Name}
	for _, o := range r.Overrides.List() {
		ov := wire.Override{Key: o.Key, Limit: o.Limit}
		if o.WindowMS != 0 {
			ov.WindowMS = &o.WindowMS
		}
		j.Overrides = append(j.Overrides, ov)
	}
	return j
}

// monthOf and daysOf are the answer's forms of a month's and days' usage.
func monthOf(m usage.MonthStats) wire.MonthStats {
	return wire.MonthStats{Month: m.Month.String(), Total: m.Total, Quota: m.Quota, OverQuota: m.OverQuota, HardCap: m.HardCap}
}

func daysOf(days []usage.DayStats) []wire.DayStats {
	out := make([]wire.DayStats, len(days))
	for i, d := range days {
		out[i] = wire.DayStats{Day: d.Day.String(), Total: d.Total, Blocked: d.Blocked}
	}
	return out
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
	out := wire.RuleList{Namespace: ns, Rules: make([]wire.Rule, 0, len(rules))}
	for _, r := range rules {
		out.Rules = append(out.Rules, ruleOf(ns, r))
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
	var body wire.RuleRequest
	if err := decodeBody(x.body.Bytes(), &body); err != nil {
		x.engineError(err)
		return
	}
	req, err := ruleRequestOf(&body)
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
	out := ruleOf(rule.Namespace, rule.Rule)
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
	x.reply(http.StatusOK, &wire.DeleteResult{Deleted: deleted})
}

// stats serves GET /v1/namespaces/{ns}/stats.
func stats(x *exchange) {
	a := x.a
	st, err := a.eng.Usage.Stats(x.r.Context(), x.acct, x.r.PathValue("ns"))
	if err != nil {
		x.engineError(err)
		return
	}
	out := wire.Stats{Namespace: st.Namespace, Total: st.Total, Blocked: st.Blocked,
		Days: daysOf(st.Days), Month: monthOf(st.Month)}
	x.reply(http.StatusOK, &out)
}
