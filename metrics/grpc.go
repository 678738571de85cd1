package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// grpcKey is one (method, status code) series of leash_grpc_request_duration_seconds.
type grpcKey struct {
	method string
	code   codes.Code
}

// GRPCObserver records unary gRPC call latencies by method and status code. Its method
// label is bounded by the services registered on the server: gRPC answers an unknown
// method itself, without interceptors.
type GRPCObserver struct {
	vec *prometheus.HistogramVec
	mu  sync.Mutex // serialises building resolved
	// resolved maps a key to its observer; replaced (copy on write) when a key is new,
	// so the call path reads without a lock.
	resolved atomic.Pointer[map[grpcKey]prometheus.Observer]
}

// GRPC returns the observer of gRPC call latencies.
func (m *Metrics) GRPC() *GRPCObserver { return &GRPCObserver{vec: m.grpcDuration} }

// ServerOptions returns the unary interceptor that times every call of a server.
func (o *GRPCObserver) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(o.Unary)}
}

// Unary times one unary call.
func (o *GRPCObserver) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	o.observer(grpcKey{info.FullMethod, status.Code(err)}).Observe(time.Since(start).Seconds())
	return resp, err
}

func (o *GRPCObserver) observer(k grpcKey) prometheus.Observer {
	if m := o.resolved.Load(); m != nil {
		if obs, ok := (*m)[k]; ok {
			return obs
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	old := o.resolved.Load()
	if old != nil {
		if obs, ok := (*old)[k]; ok {
			return obs
		}
	}
	next := make(map[grpcKey]prometheus.Observer)
	if old != nil {
		for kk, v := range *old {
			next[kk] = v
		}
	}
	obs := o.vec.WithLabelValues(k.method, k.code.String())
	next[k] = obs
	o.resolved.Store(&next)
	return obs
}
