package rls

import (
	"context"
	"crypto/tls"
	"log/slog"
	"runtime"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// ServiceName is the gRPC service Envoy calls; health reports it and "" alike.
const ServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// QuotaServiceName is Envoy's Rate Limit Quota Service (package rlqs), which health
// reports too when it is served.
const QuotaServiceName = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"

// Keepalive settings for long-lived Envoy connections: pings find dead peers, and
// connections are recycled every MaxConnectionAge so new replicas get a share of the
// traffic (Envoy reconnects transparently after the GOAWAY).
const (
	keepaliveTime         = 30 * time.Second
	keepaliveTimeout      = 10 * time.Second
	maxConnectionAge      = 10 * time.Minute
	maxConnectionAgeGrace = 30 * time.Second
	minClientPing         = 5 * time.Second
)

// Limits bound slow and idle gRPC clients.
type Limits struct {
	// Handshake bounds a new connection's TLS and HTTP/2 handshake: a client that has not
	// sent its connection preface (and settings) by then is disconnected, as the HTTP
	// listener's read_header_timeout does for slow headers.
	Handshake time.Duration
	// Idle closes (GOAWAY) a connection with no call in flight for this long; a client
	// reconnects on its next call. Pings do not count as calls.
	Idle time.Duration
}

// DefaultLimits are the Limits NewServer uses: a 5 s handshake, as the HTTP listener's
// header timeout, and 120 s idle, as its keep-alive idle timeout.
func DefaultLimits() Limits { return Limits{Handshake: 5 * time.Second, Idle: 120 * time.Second} }

// NewServer returns a gRPC server with the rate-limit service, grpc.health.v1 and server
// reflection registered; tlsConfig nil serves plaintext. The health server starts
// SERVING; WatchHealth keeps it in step with the store.
func NewServer(svc *Service, tlsConfig *tls.Config) (*grpc.Server, *health.Server) {
	return NewServerWith(svc, tlsConfig, DefaultLimits())
}

// NewServerWith is NewServer with limits on slow and idle clients; a zero field of
// limits takes the DefaultLimits value. extra options are added next (for example
// tracing's interceptors, which then cover every service of the server), and svc's
// UnaryInterceptor last, innermost, so a call's span is open when it annotates it.
func NewServerWith(svc *Service, tlsConfig *tls.Config, limits Limits, extra ...grpc.ServerOption) (*grpc.Server, *health.Server) {
	def := DefaultLimits()
	if limits.Handshake <= 0 {
		limits.Handshake = def.Handshake
	}
	if limits.Idle <= 0 {
		limits.Idle = def.Idle
	}
	opts := []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:                  keepaliveTime,
			Timeout:               keepaliveTimeout,
			MaxConnectionIdle:     limits.Idle,
			MaxConnectionAge:      maxConnectionAge,
			MaxConnectionAgeGrace: maxConnectionAgeGrace,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: minClientPing, PermitWithoutStream: true}),
		grpc.ConnectionTimeout(limits.Handshake),
		// Reuse a goroutine per CPU for streams: a fresh goroutine per call grows its
		// stack through the store client on every call (docs/performance.md).
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
	if tlsConfig != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConfig)))
	}
	opts = append(opts, extra...)
	opts = append(opts, grpc.ChainUnaryInterceptor(svc.UnaryInterceptor))
	srv := grpc.NewServer(opts...)
	rlsv3.RegisterRateLimitServiceServer(srv, svc)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	return srv, hs
}

// RegisterQuota serves the Rate Limit Quota Service q on srv beside the rate-limit
// service (spec §14.1), with its health status in hs (which WatchHealth then keeps in
// step too). Call it before srv serves.
func RegisterQuota(srv *grpc.Server, hs *health.Server, q rlqsv3.RateLimitQuotaServiceServer) {
	rlqsv3.RegisterRateLimitQuotaServiceServer(srv, q)
	hs.SetServingStatus(QuotaServiceName, healthpb.HealthCheckResponse_SERVING)
}

// WatchHealth pings the store every interval until ctx is done and reports NOT_SERVING
// while it does not answer within timeout (spec §9.10), logging each change.
func WatchHealth(ctx context.Context, hs *health.Server, ping func(context.Context) error, interval, timeout time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	serving := true
	for {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if ok := err == nil; ok != serving {
			serving = ok
			st := healthpb.HealthCheckResponse_SERVING
			if !ok {
				st = healthpb.HealthCheckResponse_NOT_SERVING
				log.Warn("grpc health: store unreachable; NOT_SERVING", "err", err)
			} else {
				log.Info("grpc health: store reachable again; SERVING")
			}
			hs.SetServingStatus("", st)
			hs.SetServingStatus(ServiceName, st)
			if _, err := hs.Check(ctx, &healthpb.HealthCheckRequest{Service: QuotaServiceName}); err == nil {
				hs.SetServingStatus(QuotaServiceName, st) // served
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
