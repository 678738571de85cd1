// Package adapter serves Envoy's RateLimitService (envoy.service.ratelimit.v3) over the
// engine, so an Envoy or Istio ext rate-limit filter can use Leash in place of
// envoyproxy/ratelimit with the same descriptor files (spec §9).
//
// A request's domain is a namespace of the account the domain maps to (Routing). Each
// descriptor is matched against the descriptor files (package descriptors); its counter
// key is CounterKey of the matched entries, so POST /v1/limit can share it. A descriptor
// no file matches falls back to the namespace's rate rule; with neither it is OK.
package adapter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/engine"
)

// Routing says which account each Envoy domain counts against (envoy.domains and
// envoy.default_account).
type Routing struct {
	Domains        map[string]string // domain → account id
	DefaultAccount string            // "" when none
}

// AccountOf returns the account id a domain counts against, "" when none.
func (r *Routing) AccountOf(domain string) string {
	if id, ok := r.Domains[domain]; ok {
		return id
	}
	return r.DefaultAccount
}

// Config is what a reload replaces as one unit: the descriptor files and the routing.
type Config struct {
	Descriptors *descriptors.Config // nil: no descriptor files
	Routing     Routing
}

// Validate checks cfg against the accounts of dir: every domain of the descriptor files
// maps to an existing account, and every algorithm a file names is on that account's plan
// (spec §9.1, §9.3). Errors name the domain and the file.
func (cfg *Config) Validate(dir *engine.Directory) error {
	if id := cfg.Routing.DefaultAccount; id != "" {
		if _, ok := dir.Account(id); !ok {
			return fmt.Errorf("envoy.default_account: no account %q", id)
		}
	}
	for d, id := range cfg.Routing.Domains {
		if _, ok := dir.Account(id); !ok {
			return fmt.Errorf("envoy.domains.%s.account: no account %q", d, id)
		}
	}
	if cfg.Descriptors == nil {
		return nil
	}
	for _, d := range cfg.Descriptors.Domains() {
		id := cfg.Routing.AccountOf(d)
		if id == "" {
			return fmt.Errorf("%s: domain %q maps to no account: set envoy.domains.%s.account or envoy.default_account",
				cfg.Descriptors.File(d), d, d)
		}
		a, ok := dir.Account(id)
		if !ok {
			return fmt.Errorf("%s: domain %q maps to account %q, which does not exist", cfg.Descriptors.File(d), d, id)
		}
		for _, r := range cfg.Descriptors.Rules(d) {
			for _, l := range r.Limits {
				if !a.Plan.AllowsAlgorithm(l.Algorithm) {
					return fmt.Errorf("%s: %s: algorithm %s is not available on plan %s of account %q",
						r.File, r.Path, l.Algorithm, a.Plan.Name, id)
				}
			}
		}
	}
	return nil
}

// Counters is what the service reports to metrics; nil fields are skipped.
type Counters struct {
	// Decision counts one decided descriptor (allowed or denied).
	Decision func(allowed bool)
	// ShadowDenial counts a descriptor in shadow_mode that would have been denied.
	ShadowDenial func()
}

// Options configures a Service.
type Options struct {
	Engine *engine.Engine
	// Accounts resolves an account id (the engine's directory, which reloads replace).
	Accounts func(id string) (*engine.Account, bool)
	// ResponseHeaders adds RateLimit-* and Retry-After to replies (envoy.response_headers).
	ResponseHeaders bool
	Counters        Counters
	Logger          *slog.Logger
}

// Service implements envoy.service.ratelimit.v3.RateLimitService.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer
	opts Options
	cfg  atomic.Pointer[Config]
}

// NewService returns a service answering with cfg until SetConfig replaces it.
func NewService(cfg *Config, opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Service{opts: opts}
	s.cfg.Store(cfg)
	return s
}

// SetConfig replaces the descriptor files and routing (a reload).
func (s *Service) SetConfig(cfg *Config) { s.cfg.Store(cfg) }

// unlimitedRemaining is limit_remaining of an `unlimited` descriptor (the peer's value).
const unlimitedRemaining = math.MaxUint32

// verdict is one descriptor's outcome before it becomes a proto status.
type verdict struct {
	limited   bool // a limit applied (else OK with no current_limit)
	over      bool
	unlimited bool
	limit     descriptors.Limit // the most restrictive limit
	remaining int64
	resetMS   int64
}

// ShouldRateLimit decides every descriptor of the request (spec §9.5).
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	domain := req.GetDomain()
	if domain == "" {
		return nil, status.Error(codes.InvalidArgument, "domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "the request has no descriptors")
	}
	cfg := s.cfg.Load()
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(req.GetDescriptors())),
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
		return resp, nil
	}
	if !engine.ValidNamespace(domain) {
		return nil, status.Errorf(codes.InvalidArgument, "domain %q is not a valid namespace", domain)
	}
	if err := s.opts.Engine.HardCapped(acct); err != nil {
		return s.hardCapped(req, resp, err), nil
	}

	hits := int64(req.GetHitsAddend())
	if hits == 0 {
		hits = 1 // proto3 default: unset
	}
	verdicts := make([]verdict, len(req.GetDescriptors()))
	plans := s.plan(cfg, domain, req.GetDescriptors())
	for i, d := range req.GetDescriptors() {
		cost := hits
		if h := d.GetHitsAddend(); h != nil {
			cost = int64(min(h.GetValue(), math.MaxInt64))
		}
		v, err := s.decide(ctx, acct, domain, &plans[i], cost)
		if err != nil && engine.CodeOf(err) == engine.CodeHardCapExceeded {
			return s.hardCapped(req, resp, err), nil // reached during this request
		}
		if err != nil {
			return nil, s.grpcError(err)
		}
		verdicts[i] = v
	}

	worst := -1 // the most restrictive limited descriptor, for the headers
	for i, v := range verdicts {
		resp.Statuses[i] = toStatus(&v)
		if v.over {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if v.limited && (worst < 0 || moreRestrictive(&v, &verdicts[worst])) {
			worst = i
		}
	}
	if s.opts.ResponseHeaders && worst >= 0 {
		resp.ResponseHeadersToAdd = headers(&verdicts[worst])
	}
	return resp, nil
}

// moreRestrictive orders verdicts: over limit first, then fewer remaining, then the
// longer wait.
func moreRestrictive(a, b *verdict) bool {
	if a.over != b.over {
		return a.over
	}
	if a.remaining != b.remaining {
		return a.remaining < b.remaining
	}
	return a.resetMS > b.resetMS
}

// plan is what one descriptor needs decided: its limits and counter key, resolved from
// the descriptor files, the request's limit override and the replaces of other matches.
type plan struct {
	entries   []descriptors.Entry
	matched   bool
	rule      *descriptors.Rule
	keyParts  []descriptors.Entry
	limits    []descriptors.Limit
	replaced  bool
	override  bool
	noEntries bool
}

// plan matches every descriptor and applies `replaces` across the request: a limit whose
// name another matched descriptor replaces is dropped (spec §9.5).
func (s *Service) plan(cfg *Config, domain string, ds []*rlcommon.RateLimitDescriptor) []plan {
	plans := make([]plan, len(ds))
	total := 0
	for _, d := range ds {
		total += len(d.GetEntries())
	}
	all := make([]descriptors.Entry, 0, total) // one allocation for every descriptor's entries
	var replacedNames map[string]bool
	for i, d := range ds {
		p := &plans[i]
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
				p.limits = m.Rule.Limits
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
			}
		}
	}
	if replacedNames != nil {
		for i := range plans {
			p := &plans[i]
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
				p.limits, p.replaced = kept, len(kept) == 0
			}
		}
	}
	return plans
}

// decide answers one descriptor.
func (s *Service) decide(ctx context.Context, a *engine.Account, domain string, p *plan, cost int64) (verdict, error) {
	if p.noEntries || p.replaced {
		// OK with no limit (the peer's answer); it still counts as a check (spec §9.9).
		s.opts.Engine.CountCheck(a, domain)
		return verdict{}, nil
	}
	if p.matched && p.rule.Unlimited && !p.override {
		s.opts.Engine.CountCheck(a, domain)
		return verdict{unlimited: true}, nil
	}
	limits := p.limits
	if !p.matched && !p.override {
		rule, ok, err := s.opts.Engine.RateRule(ctx, a, domain)
		if err != nil {
			return verdict{}, err
		}
		if !ok {
			s.opts.Engine.CountCheck(a, domain)
			return verdict{}, nil
		}
		limits = []descriptors.Limit{{
			Algorithm:       rule.Algorithm,
			RequestsPerUnit: rule.Limit,
			Unit:            unitOf(rule.WindowMS),
			UnitMultiplier:  1,
			WindowMS:        rule.WindowMS,
		}}
	}
	if len(limits) == 0 {
		s.opts.Engine.CountCheck(a, domain)
		return verdict{}, nil
	}
	shadow := p.matched && p.rule.ShadowMode && !p.override
	v, err := s.spend(ctx, a, domain, CounterKey(p.keyParts), limits, cost, shadow)
	if err != nil {
		return verdict{}, err
	}
	if s.opts.Counters.Decision != nil {
		s.opts.Counters.Decision(!v.over)
	}
	if v.over && shadow {
		v.over = false
		if s.opts.Counters.ShadowDenial != nil {
			s.opts.Counters.ShadowDenial()
		}
	}
	return v, nil
}

// spend decides the limits of one descriptor in one store operation. A limit of 0
// requests denies without a counter (the peer's "blocks everything").
func (s *Service) spend(ctx context.Context, a *engine.Account, domain, key string, limits []descriptors.Limit, cost int64, shadow bool) (verdict, error) {
	var specs [engine.MaxSpendAll]engine.LimitSpec
	var idx [engine.MaxSpendAll]int
	var zero = -1
	n := 0
	for i, l := range limits {
		if l.RequestsPerUnit == 0 {
			if zero < 0 {
				zero = i
			}
			continue
		}
		if n == len(specs) {
			return verdict{}, errors.New("adapter: too many limits on one descriptor")
		}
		specs[n] = engine.LimitSpec{Algorithm: l.Algorithm, Limit: l.RequestsPerUnit, WindowMS: l.WindowMS}
		idx[n] = i
		n++
	}
	if zero >= 0 {
		// Blocked outright: nothing to count against, wait for the window to turn.
		s.opts.Engine.CountCheck(a, domain)
		w := limits[zero].WindowMS
		return verdict{limited: true, over: true, limit: limits[zero], resetMS: w - time.Now().UnixMilli()%w}, nil
	}
	var out [engine.MaxSpendAll]engine.Decision
	err := s.opts.Engine.CheckAll(ctx, a, &engine.MultiCheck{
		Namespace: domain, Key: key, Limits: specs[:n], Cost: cost, Shadow: shadow,
	}, out[:n])
	if err != nil {
		return verdict{}, err
	}
	best := 0
	for i := 1; i < n; i++ {
		a, b := &out[i], &out[best]
		if a.Allowed != b.Allowed {
			if !a.Allowed {
				best = i
			}
			continue
		}
		if a.Remaining < b.Remaining || (a.Remaining == b.Remaining && a.ResetMS > b.ResetMS) {
			best = i
		}
	}
	over := false
	for i := range n {
		over = over || !out[i].Allowed
	}
	d := out[best]
	return verdict{limited: true, over: over, limit: limits[idx[best]], remaining: d.Remaining, resetMS: d.ResetMS}, nil
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

func toStatus(v *verdict) *rlsv3.RateLimitResponse_DescriptorStatus {
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

// headers returns RateLimit-Limit/-Remaining/-Reset of the most restrictive descriptor and
// Retry-After when it is over its limit (seconds, rounded up).
func headers(v *verdict) []*corev3.HeaderValue {
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
	if v.over {
		b = strconv.AppendInt(b, max(1, reset), 10)
		n = 4
	}
	s := string(b)
	hv := new([4]corev3.HeaderValue)
	hv[0].Key, hv[0].Value = "RateLimit-Limit", s[:e0]
	hv[1].Key, hv[1].Value = "RateLimit-Remaining", s[e0:e1]
	hv[2].Key, hv[2].Value = "RateLimit-Reset", s[e1:e2]
	hv[3].Key, hv[3].Value = "Retry-After", s[e2:]
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
	if s.opts.Counters.Decision != nil {
		for range req.GetDescriptors() {
			s.opts.Counters.Decision(false)
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
	case engine.CodeInvalidRequest:
		var e *engine.Error
		if errors.As(err, &e) {
			return status.Error(codes.InvalidArgument, e.Message)
		}
	}
	s.opts.Logger.Error("envoy: unexpected error", "err", err)
	return status.Error(codes.Internal, "internal error")
}
