// Command emptyrls is the ceiling for gRPC load measurements: an Envoy RateLimitService
// (envoy.service.ratelimit.v3) that answers OVERALL OK with one OK status per descriptor and
// keeps no counters. The gRPC server has leash's options (adapter.NewServer: keepalive
// parameters and enforcement policy, grpc.health.v1, server reflection), so the only
// difference from leash is the decision itself. Used by scripts/bench-grpc.sh only.
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"runtime"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

type empty struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

// ShouldRateLimit answers OK to every descriptor, with the same argument checks as leash.
func (empty) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "the request has no descriptors")
	}
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(req.GetDescriptors())),
	}
	for i := range resp.Statuses {
		resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	}
	return resp, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18091", "listen address")
	flag.Parse()
	// The values of adapter.NewServer.
	srv := grpc.NewServer(
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:                  30 * time.Second,
			Timeout:               10 * time.Second,
			MaxConnectionAge:      10 * time.Minute,
			MaxConnectionAgeGrace: 30 * time.Second,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	)
	rlsv3.RegisterRateLimitServiceServer(srv, empty{})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(srv.Serve(ln))
}
