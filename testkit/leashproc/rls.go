package leashproc

import (
	"context"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

// RLSClient is a plaintext gRPC client of a running leash's Envoy endpoint and its health
// service.
type RLSClient struct {
	rlsv3.RateLimitServiceClient
	Health healthpb.HealthClient
}

// DialRLS connects to the gRPC listener at addr; the connection closes when the test ends.
func DialRLS(t testing.TB, addr string) RLSClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return RLSClient{rlsv3.NewRateLimitServiceClient(conn), healthpb.NewHealthClient(conn)}
}

// Status sends one descriptor of domain and returns its status; an error fails the test.
func (c RLSClient) Status(t testing.TB, domain string, d *rlcommon.RateLimitDescriptor) *rlsv3.RateLimitResponse_DescriptorStatus {
	t.Helper()
	resp, err := c.ShouldRateLimit(context.Background(), Request(domain, d))
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp.Statuses[0]
}

// Request is a RateLimitRequest of domain with the one descriptor d.
func Request(domain string, d *rlcommon.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*rlcommon.RateLimitDescriptor{d}}
}

// Entry is a descriptor of the one entry k=v.
func Entry(k, v string) *rlcommon.RateLimitDescriptor {
	return &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: k, Value: v}}}
}

// Counted is a descriptor that always spends a counter, whatever the domain's files say:
// its limit (100 a minute) comes with the request.
func Counted() *rlcommon.RateLimitDescriptor {
	d := Entry("client", "c1")
	d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 100, Unit: typev3.RateLimitUnit_MINUTE}
	return d
}

// ReflectedServices asks the server behind conn, through gRPC server reflection, which
// services it offers.
func ReflectedServices(t testing.TB, conn grpc.ClientConnInterface) map[string]bool {
	t.Helper()
	stream, err := reflectpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range resp.GetListServicesResponse().GetService() {
		names[s.GetName()] = true
	}
	return names
}
