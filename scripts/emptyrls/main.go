// Command emptyrls is the ceiling for gRPC load measurements: an Envoy RateLimitService
// (envoy.service.ratelimit.v3) that answers OVERALL OK with one OK status per descriptor and
// keeps no counters. The gRPC server has leash's options (adapter.NewServer: keepalive
// parameters and enforcement policy, grpc.health.v1, server reflection), so the only
// difference from leash is the decision itself. With -reply-like ADDR it asks the
// RateLimitService at ADDR once (domain bench, descriptor user=user-0) and answers every
// call with that reply instead: the load tool then decodes the same reply as from ADDR, so
// the difference is the server's work alone. Used by scripts/bench-grpc-ratio.sh only.
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"runtime"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

type empty struct {
	rlsv3.UnimplementedRateLimitServiceServer
	reply *rlsv3.RateLimitResponse // answered to every call when set (never changed)
}

// ShouldRateLimit answers OK to every descriptor, with the same argument checks as leash.
func (e empty) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "the request has no descriptors")
	}
	if e.reply != nil {
		return e.reply, nil
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
	like := flag.String("reply-like", "", "answer every call with the reply of the RateLimitService at this address")
	flag.Parse()
	var e empty
	if *like != "" {
		e.reply = replyOf(*like)
	}
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
	rlsv3.RegisterRateLimitServiceServer(srv, e)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(srv.Serve(ln))
}

// replyOf asks the RateLimitService at addr for one decision and returns its reply.
func replyOf(addr string) *rlsv3.RateLimitResponse {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain:      "bench",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "user-0"}}}},
	})
	if err != nil {
		log.Fatalf("-reply-like %s: %v", addr, err)
	}
	log.Printf("answering with the reply of %s: %v", addr, r)
	return r
}
