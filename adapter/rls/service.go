// Package rls serves Envoy's RateLimitService (envoy.service.ratelimit.v3) over the
// engine, so an Envoy or Istio ext rate-limit filter can use Leash in place of
// envoyproxy/ratelimit with the same descriptor files (spec §9).
//
// A request's domain is a namespace of the account the domain maps to (domains.Routing;
// domains.Namespace when the domain is not a valid namespace itself). Each
// descriptor is matched against the descriptor files (package descriptors); its counter
// key is domains.CounterKey of the matched entries, so POST /v1/limit can share it. A descriptor
// no file matches falls back to the namespace's rate rule; with neither it is OK.
package rls

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/metrics"
)

// Counters is what a ShouldRateLimit call is counted in, once it has ended, by the
// observer it came through (UnaryInterceptor, the /json handler); nil fields are skipped.
type Counters struct {
	// Decision counts one decided descriptor (allowed or denied).
	Decision func(allowed bool)
	// ShadowDenial counts a descriptor in shadow_mode that would have been denied.
	ShadowDenial func()
	// GlobalShadow counts a request answered OK by envoy.shadow_mode although over the limit.
	GlobalShadow func()
}

// HeaderNames are the names of the RateLimit-* headers (envoy.header_names).
type HeaderNames struct{ Limit, Remaining, Reset string }

// DefaultHeaderNames are RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset.
func DefaultHeaderNames() HeaderNames {
	return HeaderNames{Limit: "RateLimit-Limit", Remaining: "RateLimit-Remaining", Reset: "RateLimit-Reset"}
}

// Options configures a Service.
type Options struct {
	Engine *wiring.Engine
	// Accounts resolves an account id (the engine's directory, which reloads replace).
	Accounts func(id string) (*engine.Account, bool)
	// ResponseHeaders adds RateLimit-* and Retry-After to replies (envoy.response_headers).
	ResponseHeaders bool
	// HeaderNames name the RateLimit-* headers; zero fields take DefaultHeaderNames.
	HeaderNames HeaderNames
	// ShadowMode answers every OVER_LIMIT overall code OK (envoy.shadow_mode).
	ShadowMode bool
	// QuotaMode puts every descriptor in quota mode (envoy.quota_mode).
	QuotaMode bool
	// DynamicMetadata adds the peer's dynamic_metadata to replies
	// (envoy.response_dynamic_metadata).
	DynamicMetadata bool
	// Rules, if set, counts each descriptor rule's decisions (spec §12.2); the service keeps
	// it synced with its config.
	Rules *metrics.Rules
	// Counters count each call, through UnaryInterceptor and the /json handler.
	Counters Counters
	Logger   *slog.Logger
	// Trace has UnaryInterceptor annotate the call's span (started by the server's
	// tracing interceptor, outside it) with the decision (spec §12.8); false costs nothing.
	Trace bool
}

// Service implements envoy.service.ratelimit.v3.RateLimitService.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer
	opts    Options
	cfg     atomic.Pointer[domains.Config]
	scratch sync.Pool // of *scratch
}

// scratch is one ShouldRateLimit call's working memory (the descriptors matched, the engine's
// items and results, the translated replies), reused across calls so that a decision
// allocates little beyond its reply. Nothing in it outlives the call.
type scratch struct {
	matches []match
	entries []descriptors.Entry
	items   []engine.Item
	results []engine.ItemResult
	replies []reply
	query   engine.Query
}

// sized returns s with length n and every element zero, reusing its array when it is
// large enough.
func sized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// getScratch returns working memory for a request of n descriptors.
func (s *Service) getScratch(n int) *scratch {
	work, _ := s.scratch.Get().(*scratch)
	if work == nil {
		work = new(scratch)
	}
	work.matches = sized(work.matches, n)
	work.items = sized(work.items, n)
	work.results = sized(work.results, n)
	work.replies = sized(work.replies, n)
	return work
}

// putScratch clears work, so that it holds no request's strings, and keeps it for reuse; a
// request of many descriptors leaves its large arrays to the collector.
func (s *Service) putScratch(work *scratch) {
	if cap(work.matches) > 64 || cap(work.entries) > 256 {
		return
	}
	clear(work.matches)
	clear(work.entries[:cap(work.entries)])
	clear(work.items)
	clear(work.results)
	clear(work.replies)
	work.query = engine.Query{}
	s.scratch.Put(work)
}

// NewService returns a service answering with cfg until SetConfig replaces it.
func NewService(cfg *domains.Config, opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	def := DefaultHeaderNames()
	opts.HeaderNames.Limit = cmp.Or(opts.HeaderNames.Limit, def.Limit)
	opts.HeaderNames.Remaining = cmp.Or(opts.HeaderNames.Remaining, def.Remaining)
	opts.HeaderNames.Reset = cmp.Or(opts.HeaderNames.Reset, def.Reset)
	s := &Service{opts: opts}
	s.SetConfig(cfg)
	return s
}

// Config returns the descriptor files and routing in force.
func (s *Service) Config() *domains.Config { return s.cfg.Load() }

// SetConfig replaces the descriptor files and routing (a reload).
func (s *Service) SetConfig(cfg *domains.Config) {
	if r := s.opts.Rules; r != nil {
		var ids []metrics.RuleID
		for _, d := range cfg.Descriptors.Domains() {
			for _, rule := range cfg.Descriptors.Rules(d) {
				if !rule.Unlimited {
					ids = append(ids, metrics.RuleID{Domain: d, Rule: rule.MetricKey})
				}
			}
		}
		r.Sync(ids) // before the config is used, so its rules have counters
	}
	s.cfg.Store(cfg)
}

// ruleTag is the metrics tag of a descriptor's matched rule, nil without per-rule metrics.
func (s *Service) ruleTag(domain string, p *match) any {
	r := s.opts.Rules
	if r == nil || !p.matched || p.override || p.replaced || p.rule.Unlimited {
		return nil
	}
	detailed := ""
	if p.rule.DetailedMetric {
		detailed = descriptors.MetricKey(p.keyParts)
	}
	if c := r.Tag(metrics.RuleID{Domain: domain, Rule: p.rule.MetricKey}, detailed); c != nil {
		return c
	}
	return nil
}

// unlimitedRemaining is limit_remaining of an `unlimited` descriptor (the peer's value).
const unlimitedRemaining = math.MaxUint32

// ShouldRateLimit answers a request with one engine decision: the adapter matches each
// descriptor to its limits (an item of the query) and translates the verdicts into the
// reply (spec §9.5, §9.7).
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	domain := req.GetDomain()
	if domain == "" {
		return nil, status.Error(codes.InvalidArgument, "domain must not be empty")
	}
	ds := req.GetDescriptors()
	if len(ds) == 0 {
		return nil, status.Error(codes.InvalidArgument, "the request has no descriptors")
	}
	cfg := s.cfg.Load()
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(ds)),
	}
	id := cfg.Routing.AccountOf(domain)
	var acct *engine.Account
	if id != "" {
		acct, _ = s.opts.Accounts(id)
	}
	if acct == nil {
		// No account: OK and counted nowhere (spec §9.1).
		if id != "" {
			s.opts.Logger.Warn("envoy: domain maps to a missing account; answering OK", "domain", domain, "account", id)
		}
		for i := range resp.Statuses {
			resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		}
		if s.opts.DynamicMetadata {
			// The peer builds it for every reply: domain and descriptors, nothing matched.
			resp.DynamicMetadata = dynamicMetadata(req, nil, nil)
		}
		return resp, nil
	}

	if !descriptors.ValidDomain(domain) {
		return nil, status.Error(codes.InvalidArgument, "the domain is not a valid domain")
	}

	hits := int64(req.GetHitsAddend())
	if hits == 0 {
		hits = 1 // proto3 default: unset
	}
	work := s.getScratch(len(ds))
	defer s.putScratch(work)
	matches := s.matchAll(cfg, domain, ds, work)
	overdraft := cfg.Routing.OverdraftOf(domain)
	items, results := work.items, work.results
	for i, d := range ds {
		cost := hits
		if h := d.GetHitsAddend(); h != nil {
			cost = int64(min(h.GetValue(), math.MaxInt64))
		}
		matches[i].item(&items[i], cost, s.opts.QuotaMode, overdraft)
		items[i].Tag = s.ruleTag(domain, &matches[i])
	}
	work.query = engine.Query{Edge: engine.EdgeEnvoy, Namespace: domains.Namespace(domain), Items: items, Shadow: s.opts.ShadowMode}
	out, err := s.opts.Engine.Limits.Decide(ctx, acct, &work.query, results)
	rec := outcomeOf(ctx)
	if engine.CodeOf(err) == engine.CodeHardCapExceeded {
		rec.refuse(domain, acct.ID, len(ds))
		return s.hardCapped(req, resp, err), nil
	}
	if err != nil {
		rec.fail(engine.CodeOf(err))
		return nil, s.grpcError(err)
	}
	if !out.Allowed {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	rec.decide(domain, acct.ID, out, len(results))
	replies := work.replies
	for i := range results {
		replies[i] = matches[i].reply(&results[i], out.NowMS)
		resp.Statuses[i] = replies[i].status()
		rec.item(&results[i])
	}
	if s.opts.ResponseHeaders {
		if i := headerDescriptor(replies); i >= 0 {
			resp.ResponseHeadersToAdd = s.headers(&replies[i], !out.Allowed)
		}
	}
	if s.opts.DynamicMetadata {
		resp.DynamicMetadata = dynamicMetadata(req, matches, replies)
	}
	return resp, nil
}

// match is one descriptor matched against the descriptor files: its limits and counter
// key, after the request's limit override and the replaces of other matches.
type match struct {
	entries   []descriptors.Entry
	matched   bool
	rule      *descriptors.Rule
	keyParts  []descriptors.Entry
	limits    []descriptors.Limit
	engLimits []engine.Limit // limits as the engine takes them
	replaced  bool
	override  bool
	noEntries bool
}

// matchAll matches every descriptor and applies `replaces` across the request: a limit whose
// name another matched descriptor replaces is dropped (spec §9.5).
func (s *Service) matchAll(cfg *domains.Config, domain string, ds []*rlcommon.RateLimitDescriptor, work *scratch) []match {
	matches := work.matches
	total := 0
	for _, d := range ds {
		total += len(d.GetEntries())
	}
	if cap(work.entries) < total {
		work.entries = make([]descriptors.Entry, 0, total) // one array for every descriptor's entries
	}
	all := work.entries[:0]
	var replacedNames map[string]bool
	for i, d := range ds {
		p := &matches[i]
		start := len(all)
		for _, e := range d.GetEntries() {
			all = append(all, descriptors.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		p.entries = all[start:len(all):len(all)]
		if len(p.entries) == 0 {
			p.noEntries = true
			continue
		}
		p.keyParts = p.entries
		if cfg.Descriptors != nil {
			if m, ok := cfg.Descriptors.Match(domain, p.entries); ok {
				p.matched, p.rule, p.keyParts = true, m.Rule, m.Entries
				p.limits, p.engLimits = m.Rule.Limits, m.Rule.EngineLimits
				for _, name := range m.Rule.Replaces {
					if replacedNames == nil {
						replacedNames = make(map[string]bool)
					}
					replacedNames[name] = true
				}
			}
		}
		if o := d.GetLimit(); o != nil {
			if ms := descriptors.UnitMS(rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit())); ms > 0 {
				alg := engine.FixedWindow
				if len(p.limits) > 0 {
					alg = p.limits[0].Algorithm
				}
				p.override = true
				p.limits = []descriptors.Limit{{
					Algorithm:       alg,
					RequestsPerUnit: int64(o.GetRequestsPerUnit()),
					Unit:            rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit()),
					UnitMultiplier:  1,
					WindowMS:        ms,
				}}
				p.engLimits = descriptors.EngineLimits(p.limits)
			}
		}
	}
	if replacedNames != nil {
		for i := range matches {
			p := &matches[i]
			if !p.matched || p.override {
				continue
			}
			kept := p.limits[:0:0]
			for _, l := range p.limits {
				if l.Name == "" || !replacedNames[l.Name] {
					kept = append(kept, l)
				}
			}
			if len(kept) < len(p.limits) {
				p.limits, p.engLimits, p.replaced = kept, descriptors.EngineLimits(kept), len(kept) == 0
			}
		}
	}
	return matches
}

// unlimited reports a descriptor whose match is `unlimited` (and no override).
func (p *match) unlimited() bool { return p.matched && p.rule.Unlimited && !p.override }

// item is the engine's item for this descriptor (spec §9.5). Every descriptor but an
// unlimited one takes part in quota mode when it is on globally (as the peer counts).
//
// With overdraft (the domain's setting, unless the matched descriptor has its own) the
// hits of a denied descriptor are counted, as the peer counts them (spec §4.12, §9.5).
func (p *match) item(it *engine.Item, cost int64, quota, overdraft bool) {
	if p.matched && p.rule.Overdraft != nil {
		overdraft = *p.rule.Overdraft
	}
	*it = engine.Item{Cost: cost, Quota: quota || p.matched && p.rule.QuotaMode, Overdraft: overdraft}
	switch {
	case p.unlimited():
		it.Source, it.Quota = engine.NoLimit, false
		return
	case p.noEntries || p.replaced:
		it.Source = engine.NoLimit
		return
	case !p.matched && !p.override:
		it.Source = engine.RuleIfAny
	default:
		it.Source, it.Limits = engine.Given, p.engLimits
		it.Shadow = p.matched && p.rule.ShadowMode && !p.override
	}
	it.Key = domains.CounterKey(p.keyParts)
}

// reply is one descriptor's verdict as Envoy is told it.
type reply struct {
	limited   bool // a limit applied (else OK with no current_limit)
	over      bool
	unlimited bool
	limit     descriptors.Limit // the most restrictive limit
	remaining int64
	resetMS   int64
}

// reply translates the engine's verdict (spec §9.7): an OVER_LIMIT descriptor has no
// remaining, and a fixed window always reports the time to its end, as the peer does.
func (p *match) reply(r *engine.ItemResult, nowMS int64) reply {
	if !r.Limited {
		return reply{unlimited: p.unlimited()}
	}
	v := reply{limited: true, over: !r.Allowed, remaining: r.Remaining, resetMS: r.ResetMS}
	if r.Index >= 0 {
		v.limit = p.limits[r.Index]
	} else { // the namespace's rule
		v.limit = descriptors.Limit{Algorithm: r.Limit.Algorithm, RequestsPerUnit: r.Limit.Limit,
			Unit: unitOf(r.Limit.WindowMS), UnitMultiplier: 1, WindowMS: r.Limit.WindowMS}
	}
	if v.over {
		v.remaining = 0
	}
	if w := v.limit.WindowMS; v.limit.Algorithm == engine.FixedWindow {
		v.resetMS = w - (nowMS%w+w)%w
	}
	return v
}

// headerDescriptor picks the descriptor the RateLimit-* headers describe (spec §9.7): the
// least remaining; among equals an over-limit one, then the longer reset, then the first
// in the request. -1 when no descriptor had a limit.
func headerDescriptor(rs []reply) int {
	best := -1
	for i := range rs {
		a := &rs[i]
		if !a.limited {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &rs[best]
		switch {
		case a.remaining != b.remaining:
			if a.remaining < b.remaining {
				best = i
			}
		case a.over != b.over:
			if a.over {
				best = i
			}
		case a.resetMS > b.resetMS:
			best = i
		}
	}
	return best
}

// unitOf returns the unit exactly window ms long, UNKNOWN when there is none.
func unitOf(windowMS int64) rlsv3.RateLimitResponse_RateLimit_Unit {
	for u := range rlsv3.RateLimitResponse_RateLimit_Unit_name {
		unit := rlsv3.RateLimitResponse_RateLimit_Unit(u)
		if ms := descriptors.UnitMS(unit); ms > 0 && ms == windowMS {
			return unit
		}
	}
	return rlsv3.RateLimitResponse_RateLimit_UNKNOWN
}

// statusParts are a limited status's messages, allocated together.
type statusParts struct {
	st    rlsv3.RateLimitResponse_DescriptorStatus
	limit rlsv3.RateLimitResponse_RateLimit
	reset durationpb.Duration
}

func (v *reply) status() *rlsv3.RateLimitResponse_DescriptorStatus {
	if !v.limited {
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		if v.unlimited {
			st.LimitRemaining = unlimitedRemaining
		}
		return st
	}
	p := &statusParts{}
	st := &p.st
	st.Code = rlsv3.RateLimitResponse_OK
	if v.over {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	p.limit.Name = v.limit.Name
	p.limit.RequestsPerUnit = uint32(min(v.limit.RequestsPerUnit, math.MaxUint32))
	p.limit.Unit = v.limit.Unit
	st.CurrentLimit = &p.limit
	st.LimitRemaining = uint32(min(max(v.remaining, 0), math.MaxUint32))
	p.reset.Seconds, p.reset.Nanos = v.resetMS/1000, int32(v.resetMS%1000)*1_000_000
	st.DurationUntilReset = &p.reset
	return st
}

// headers returns the RateLimit-* headers of the descriptor headerDescriptor chose, and
// Retry-After when the request is over the limit and so is that descriptor (seconds,
// rounded up).
func (s *Service) headers(v *reply, overall bool) []*corev3.HeaderValue {
	reset := (v.resetMS + 999) / 1000
	// The values share one string, the messages one array.
	var nb [80]byte
	b := strconv.AppendInt(nb[:0], v.limit.RequestsPerUnit, 10)
	e0 := len(b)
	b = strconv.AppendInt(b, max(v.remaining, 0), 10)
	e1 := len(b)
	b = strconv.AppendInt(b, reset, 10)
	e2 := len(b)
	n := 3
	if v.over && overall {
		b = strconv.AppendInt(b, max(1, reset), 10)
		n = 4
	}
	vals := string(b)
	hv := new([4]corev3.HeaderValue)
	hn := &s.opts.HeaderNames
	hv[0].Key, hv[0].Value = hn.Limit, vals[:e0]
	hv[1].Key, hv[1].Value = hn.Remaining, vals[e0:e1]
	hv[2].Key, hv[2].Value = hn.Reset, vals[e1:e2]
	hv[3].Key, hv[3].Value = "Retry-After", vals[e2:]
	h := make([]*corev3.HeaderValue, n)
	for i := range h {
		h[i] = &hv[i]
	}
	return h
}

// hardCapped answers every descriptor OVER_LIMIT with Retry-After to the end of the month
// (spec §9.9): an error would let Envoy fail open.
func (s *Service) hardCapped(req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse, err error) *rlsv3.RateLimitResponse {
	var e *engine.Error
	retry := int64(1)
	if errors.As(err, &e) {
		retry = max(1, e.RetryAfterSec)
	}
	resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	for i := range req.GetDescriptors() {
		resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{
			Code:               rlsv3.RateLimitResponse_OVER_LIMIT,
			DurationUntilReset: durationpb.New(time.Duration(retry) * time.Second),
		}
	}
	if s.opts.ResponseHeaders {
		resp.ResponseHeadersToAdd = []*corev3.HeaderValue{{Key: "Retry-After", Value: strconv.FormatInt(retry, 10)}}
	}
	return resp
}

// grpcError maps an engine error to a gRPC status without internal text: a store failure
// is UNAVAILABLE (so Envoy's failure_mode_deny decides), bad input INVALID_ARGUMENT.
func (s *Service) grpcError(err error) error {
	switch engine.CodeOf(err) {
	case engine.CodeUnavailable:
		s.opts.Logger.Warn("envoy: store unavailable", "err", err)
		return status.Error(codes.Unavailable, "rate-limit store unavailable")
	case engine.CodeAlgorithmNotOnPlan:
		return status.Error(codes.FailedPrecondition, "a descriptor's algorithm is not on the account's plan")
	case engine.CodeAccountSuspended:
		return status.Error(codes.PermissionDenied, "the domain's account is suspended")
	case engine.CodeInvalidRequest:
		var e *engine.Error
		if errors.As(err, &e) {
			return status.Error(codes.InvalidArgument, e.Message)
		}
	}
	s.opts.Logger.Error("envoy: unexpected error", "err", err)
	return status.Error(codes.Internal, "internal error")
}
