package rlqs

import (
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

// StreamInterceptor observes StreamRateLimitQuotas streams: it counts each stream open
// while its handler runs (Counters.Streams) and each bucket action as it is sent
// (Counters.Sent, by kind: token_bucket, allow_all, deny_all or abandon). Other methods
// pass through.
func (s *Service) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != streamMethod {
		return handler(srv, ss)
	}
	c := &s.opts.Counters
	if c.Streams != nil {
		c.Streams(1)
		defer c.Streams(-1)
	}
	if c.Sent != nil {
		ss = &observedStream{ServerStream: ss, sent: c.Sent}
	}
	return handler(srv, ss)
}

// observedStream counts the bucket actions of the responses sent on a stream.
type observedStream struct {
	grpc.ServerStream
	sent func(kind string)
}

// SendMsg counts m's bucket actions, then sends it; an action is counted once sending is
// attempted, whether or not the proxy receives it.
func (o *observedStream) SendMsg(m any) error {
	if r, ok := m.(*rlqsv3.RateLimitQuotaResponse); ok {
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
