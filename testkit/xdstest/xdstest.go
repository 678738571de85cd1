// Package xdstest runs go-control-plane's own xDS management server and snapshot cache
// (pkg/server/v3, pkg/cache/v3) on a loopback listener, for tests of Leash's xDS client:
// a real ADS server, not a mock. It records every DiscoveryRequest it receives, so tests
// can see ACKs and NACKs.
package xdstest

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Server is a running management server.
type Server struct {
	Addr  string // host:port it listens on
	cache cachev3.SnapshotCache
	grpc  *grpc.Server
	done  chan struct{}

	mu   sync.Mutex
	reqs []*discoveryv3.DiscoveryRequest
	wake chan struct{} // closed and replaced on every request
}

// Start serves on addr ("127.0.0.1:0" for a free port; an earlier server's Addr to
// restart it there), with TLS when tc is set. The server stops at the test's end.
func Start(t testing.TB, addr string, tc *tls.Config) *Server {
	t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // a restarted server's port may take a moment to free
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil),
		done: make(chan struct{}), wake: make(chan struct{})}
	cb := serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
		s.mu.Lock()
		s.reqs = append(s.reqs, req)
		close(s.wake)
		s.wake = make(chan struct{})
		s.mu.Unlock()
		return nil
	}}
	var opts []grpc.ServerOption
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	s.grpc = grpc.NewServer(opts...)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(s.grpc, serverv3.NewServer(context.Background(), s.cache, cb))
	go func() { defer close(s.done); _ = s.grpc.Serve(ln) }()
	t.Cleanup(s.Stop)
	return s
}

// Stop closes the server and every stream at once.
func (s *Server) Stop() {
	s.grpc.Stop()
	<-s.done
}

// Set makes version, with these resources, the snapshot of node.
func (s *Server) Set(t testing.TB, node, version string, rcs ...*rlconf.RateLimitConfig) {
	t.Helper()
	res := make([]types.Resource, len(rcs))
	for i, rc := range rcs {
		res[i] = rc
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

// WaitRequest waits until a request satisfying ok has arrived (counting earlier ones) and
// returns it; it fails the test after timeout.
func (s *Server) WaitRequest(t testing.TB, timeout time.Duration, what string, ok func(*discoveryv3.DiscoveryRequest) bool) *discoveryv3.DiscoveryRequest {
	t.Helper()
	deadline := time.After(timeout)
	seen := 0
	for {
		s.mu.Lock()
		reqs, wake := s.reqs[seen:], s.wake
		seen = len(s.reqs)
		s.mu.Unlock()
		for _, r := range reqs {
			if ok(r) {
				return r
			}
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("xdstest: no %s within %v", what, timeout)
			return nil
		}
	}
}

// WaitACK waits for the ACK of version.
func (s *Server) WaitACK(t testing.TB, timeout time.Duration, version string) {
	t.Helper()
	s.WaitRequest(t, timeout, "ACK of version "+version, func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetVersionInfo() == version && r.GetErrorDetail() == nil && r.GetResponseNonce() != ""
	})
}

// WaitNACK waits for a NACK whose error_detail contains msg and returns it.
func (s *Server) WaitNACK(t testing.TB, timeout time.Duration, msg string) *discoveryv3.DiscoveryRequest {
	t.Helper()
	return s.WaitRequest(t, timeout, "NACK containing "+msg, func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetErrorDetail() != nil && strings.Contains(r.GetErrorDetail().GetMessage(), msg)
	})
}
