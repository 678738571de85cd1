package rlqs

import (
	"context"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
)

// streamMethod is the full gRPC method StreamInterceptor observes.
const streamMethod = "/" + ServiceName + "/StreamRateLimitQuotas"

// ServerOptions returns the stream interceptor that observes the service's streams; add
// them to the options of the gRPC server the service is registered on.
func (s *Service) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainStreamInterceptor(s.StreamInterceptor)}
}

// StreamInterceptor observes StreamRateLimitQuotas streams, and alone counts them: each
// stream open while its handler runs (Counters.Streams) and each bucket action as it is
// sent (Counters.Sent, by kind: token_bucket, allow_all, deny_all or abandon); and,
// through the tally it gives the stream's context, what the service makes of the reports
// (Counters.Reported, Rejected and Buckets). Other methods pass through.
func (s *Service) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != streamMethod {
		return handler(srv, ss)
	}
	c := &s.opts.Counters
	if c.Streams != nil {
		c.Streams(1)
		defer c.Streams(-1)
	}
	t := &tally{c: c}
	return handler(srv, &observedStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), tallyKey{}, t), sent: c.Sent})
}

// observedStream is a stream whose context carries its tally and whose sent bucket
// actions are counted.
type observedStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent func(kind string) // nil: not counted
}

// Context returns the stream's context with its tally.
func (o *observedStream) Context() context.Context { return o.ctx }

// SendMsg counts m's bucket actions, then sends it; an action is counted once sending is
// attempted, whether or not the proxy receives it.
func (o *observedStream) SendMsg(m any) error {
	if r, ok := m.(*rlqsv3.RateLimitQuotaResponse); ok && o.sent != nil {
		for _, a := range r.GetBucketAction() {
			o.sent(actionKind(a))
		}
	}
	return o.ServerStream.SendMsg(m)
}

// actionKind is the kind of bucket action a is counted as.
func actionKind(a *rlqsv3.RateLimitQuotaResponse_BucketAction) string {
	if a.GetAbandonAction() != nil {
		return "abandon"
	}
	strat := a.GetQuotaAssignmentAction().GetRateLimitStrategy()
	switch {
	case strat.GetTokenBucket() != nil:
		return "token_bucket"
	case strat.GetBlanketRule() == typev3.RateLimitStrategy_DENY_ALL:
		return "deny_all"
	}
	return "allow_all"
}

// tally counts what the service makes of one stream's reports; its methods do nothing on
// a nil tally (a stream no StreamInterceptor observes).
type tally struct{ c *Counters }

// tallyKey finds a stream's tally in its context.
type tallyKey struct{}

// tallyOf returns the tally StreamInterceptor put in ctx, nil when none.
func tallyOf(ctx context.Context) *tally {
	t, _ := ctx.Value(tallyKey{}).(*tally)
	return t
}

// reject counts one report or bucket refused, by reason.
func (t *tally) reject(reason string) {
	if t != nil && t.c.Rejected != nil {
		t.c.Rejected(reason)
	}
}

// report counts the requests one bucket's report says its proxy allowed and denied.
func (t *tally) report(domain string, allowed, denied uint64) {
	if t != nil && t.c.Reported != nil {
		t.c.Reported(domain, allowed, denied)
	}
}

// track adds delta to the buckets tracked.
func (t *tally) track(delta int) {
	if t != nil && t.c.Buckets != nil {
		t.c.Buckets(delta)
	}
}
