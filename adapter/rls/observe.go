package rls

import (
	"context"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/tracing"
)

// shouldRateLimitMethod is the full gRPC method UnaryInterceptor observes.
const shouldRateLimitMethod = "/" + ServiceName + "/ShouldRateLimit"

// outcomeKind is how far a ShouldRateLimit call got.
type outcomeKind uint8

const (
	// unreported: refused before a decision (a bad request, a domain with no account);
	// nothing is counted or annotated.
	unreported outcomeKind = iota
	// decided: the engine decided every descriptor.
	decided
	// hardCapped: the account's hard cap refused the call (spec §9.9).
	hardCapped
	// failed: the engine failed (the store, the plan, a suspended account).
	failed
)

// outcome is what one ShouldRateLimit call decided, as its metrics and span report it.
// The service fills it in; the observer that put it in the call's context (UnaryInterceptor,
// or /json's handler) reports it once, when the call has ended. Never a descriptor's
// values.
type outcome struct {
	kind         outcomeKind
	allowed      bool             // the request's verdict; a shadow denial is a denial
	globalShadow bool             // answered OK by envoy.shadow_mode although over the limit
	limited      bool             // a descriptor had a limit: algorithm is set
	algorithm    engine.Algorithm // of the deciding limit: the first denying one, else the first limited
	descriptors  int32            // descriptors in the request
	allowedN     int32            // limited descriptors allowed
	denied       int32            // limited descriptors denied, shadow denials included
	shadow       int32            // descriptors in shadow_mode over their limit, answered OK
	domain       string
	account      string
	code         engine.Code // the engine's error code of a hard-capped or failed call
}

// outcomeCtx is a call's context carrying its outcome: one allocation of 96 bytes a call.
type outcomeCtx struct {
	context.Context
	out outcome
}

// outcomeKey finds an outcomeCtx under contexts derived from it.
type outcomeKey struct{}

// Value returns the outcome for outcomeKey and defers every other key to the parent.
func (c *outcomeCtx) Value(key any) any {
	if key == (outcomeKey{}) {
		return &c.out
	}
	return c.Context.Value(key)
}

// outcomeOf returns the outcome an observer put in ctx; nil when none did (the service
// called directly), and then the call is not reported.
func outcomeOf(ctx context.Context) *outcome {
	if c, ok := ctx.(*outcomeCtx); ok {
		return &c.out
	}
	o, _ := ctx.Value(outcomeKey{}).(*outcome)
	return o
}

// decide records a decided call's verdict; item then records each descriptor's.
func (o *outcome) decide(domain, account string, out engine.Outcome, descriptors int) {
	if o == nil {
		return
	}
	o.kind, o.domain, o.account, o.descriptors = decided, domain, account, int32(descriptors)
	o.allowed, o.globalShadow = out.Allowed && !out.ShadowDenied, out.ShadowDenied
}

// item records one decided descriptor.
func (o *outcome) item(r *engine.ItemResult) {
	if o == nil {
		return
	}
	if r.ShadowDenied {
		o.shadow++
	}
	if !r.Limited {
		return
	}
	if r.Allowed && !r.ShadowDenied {
		o.allowedN++
		if !o.limited {
			o.limited, o.algorithm = true, r.Limit.Algorithm
		}
		return
	}
	if o.denied == 0 {
		o.limited, o.algorithm = true, r.Limit.Algorithm
	}
	o.denied++
}

// refuse records a call the hard cap refused: every descriptor is denied.
func (o *outcome) refuse(domain, account string, descriptors int) {
	if o == nil {
		return
	}
	*o = outcome{kind: hardCapped, domain: domain, account: account, descriptors: int32(descriptors), code: engine.CodeHardCapExceeded}
}

// fail records a call the engine failed.
func (o *outcome) fail(code engine.Code) {
	if o == nil {
		return
	}
	*o = outcome{kind: failed, code: code}
}

// UnaryInterceptor observes ShouldRateLimit calls: it gives each call an outcome the
// service fills in and, when the call has ended, counts it (Options.Counters) and
// annotates its span (Options.Trace, spec §12.8). Other methods pass through. NewServerWith
// installs it; a server built otherwise must chain it inside the tracing interceptor.
func (s *Service) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod != shouldRateLimitMethod {
		return handler(ctx, req)
	}
	oc := &outcomeCtx{Context: ctx}
	resp, err := handler(oc, req)
	s.report(ctx, &oc.out)
	return resp, err
}

// observed is ShouldRateLimit reported as UnaryInterceptor reports it, for the callers
// that are not gRPC (the /json handler).
func (s *Service) observed(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	oc := &outcomeCtx{Context: ctx}
	resp, err := s.ShouldRateLimit(oc, req)
	s.report(ctx, &oc.out)
	return resp, err
}

// report counts one ended call and annotates its span; ctx carries the span.
func (s *Service) report(ctx context.Context, o *outcome) {
	c := &s.opts.Counters
	switch o.kind {
	case decided:
		if o.globalShadow && c.GlobalShadow != nil {
			c.GlobalShadow()
		}
		if c.Decision != nil {
			for range o.allowedN {
				c.Decision(true)
			}
			for range o.denied {
				c.Decision(false)
			}
		}
		if c.ShadowDenial != nil {
			for range o.shadow {
				c.ShadowDenial()
			}
		}
	case hardCapped:
		if c.Decision != nil {
			for range o.descriptors {
				c.Decision(false)
			}
		}
	}
	if s.opts.Trace && o.kind != unreported && tracing.Recording(ctx) { // an unsampled call builds no attributes
		annotate(ctx, o)
	}
}

// annotate adds a call's outcome to its span: for a decided call the domain, the account,
// the overall outcome, the number of descriptors and of denied ones, and the algorithm of
// the deciding limit; for a hard-capped one the domain, the account, the denial and the
// error code; for a failed one the error code.
func annotate(ctx context.Context, o *outcome) {
	switch o.kind {
	case decided:
		alg := ""
		if o.limited {
			alg = o.algorithm.String()
		}
		tracing.Annotate(ctx, tracing.AttrEdge.String(string(engine.EdgeEnvoy)), tracing.AttrDomain.String(o.domain),
			tracing.AttrAccount.String(o.account), tracing.Outcome(o.allowed),
			tracing.AttrAlgorithm.String(alg), tracing.AttrDescriptors.Int(int(o.descriptors)), tracing.AttrDenied.Int(int(o.denied)))
	case hardCapped:
		tracing.Annotate(ctx, tracing.AttrEdge.String(string(engine.EdgeEnvoy)), tracing.AttrDomain.String(o.domain),
			tracing.AttrAccount.String(o.account), tracing.Outcome(false), tracing.AttrErrorCode.String(string(o.code)))
	case failed:
		tracing.Annotate(ctx, tracing.AttrErrorCode.String(string(o.code)))
	}
}
