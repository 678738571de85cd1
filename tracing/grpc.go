package tracing

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	rpccode "google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// mdCarrier reads a caller's trace headers from incoming gRPC metadata.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// ServerOptions returns the interceptors that give every gRPC call on a server (unary and
// streaming, every registered service) a server span continuing the caller's trace from
// its metadata (W3C tracecontext or B3); nil when t is nil.
func (t *Tracing) ServerOptions() []grpc.ServerOption {
	if t == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(t.UnaryInterceptor), grpc.ChainStreamInterceptor(t.StreamInterceptor)}
}

// startRPC starts the server span of one call.
func (t *Tracing) startRPC(ctx context.Context, method string) (context.Context, trace.Span) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = t.prop.Extract(ctx, mdCarrier(md))
	}
	name := strings.TrimPrefix(method, "/")
	ctx, span := t.tracer.Start(ctx, name, t.server...)
	if span.IsRecording() {
		span.SetAttributes(semconv.RPCSystemNameGRPC, semconv.RPCMethod(name))
	}
	return ctx, span
}

// endRPC records the call's status code and ends its span.
func endRPC(span trace.Span, err error) {
	st, _ := status.FromError(err)
	name := rpccode.Code(st.Code()).String() // the proto enum's name: OK, NOT_FOUND...
	span.SetAttributes(semconv.RPCResponseStatusCode(name))
	if err != nil {
		span.SetStatus(codes.Error, name)
	}
	span.End()
}

// UnaryInterceptor traces one unary call.
func (t *Tracing) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	sctx, span := t.startRPC(ctx, info.FullMethod)
	if !span.IsRecording() { // unsampled: served as with tracing off
		return handler(ctx, req)
	}
	resp, err := handler(sctx, req)
	endRPC(span, err)
	return resp, err
}

// StreamInterceptor traces one streaming call, from its start to its end.
func (t *Tracing) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, span := t.startRPC(ss.Context(), info.FullMethod)
	if !span.IsRecording() {
		return handler(srv, ss)
	}
	err := handler(srv, &tracedStream{ServerStream: ss, ctx: ctx})
	endRPC(span, err)
	return err
}

// tracedStream is a ServerStream whose context carries the call's span.
type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *tracedStream) Context() context.Context { return s.ctx }
