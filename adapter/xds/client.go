// Package xds receives descriptor configuration from an xDS management server
// (spec §9.14): a State-of-the-World ADS subscription to
// type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig, as the peer's
// CONFIG_TYPE=GRPC_XDS_SOTW. Each response is the whole set of resources, one domain each;
// it is built by descriptors.FromResources (the same builder as the files) and handed to
// Apply. An update that builds and applies is ACKed; any other is NACKed with the error
// text in error_detail, and the running configuration stays. When the stream breaks, the
// client reconnects with capped exponential backoff and keeps nothing but the last
// configuration applied, which stays in force meanwhile.
package xds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/leashd/leash/adapter/descriptors"
)

// TypeURL is the resource type the client subscribes to.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// Defaults of Options.
const (
	DefaultBackoffBase = time.Second      // first reconnection delay
	DefaultBackoffMax  = 30 * time.Second // largest reconnection delay
	DefaultNackDelay   = 500 * time.Millisecond
	maxRecvMsgSize     = 16 << 20 // a management server's response, all domains together
)

// Options configures Run.
type Options struct {
	Address string      // host:port of the management server
	NodeID  string      // this instance's node id
	TLS     *tls.Config // nil: plaintext
	// Apply puts a new set of xDS domains in force; an error refuses it (NACK) and must
	// leave the running configuration as it was. Calls come one at a time.
	Apply func(*descriptors.Config) error
	// BackoffBase and BackoffMax bound the delay before reconnecting: it starts at
	// BackoffBase, doubles on each failed attempt up to BackoffMax, and is jittered by
	// ±20 %; it starts again from BackoffBase once a stream has delivered a response.
	BackoffBase, BackoffMax time.Duration
	// NackDelay paces NACKs of a version already NACKed: a snapshot cache resends a
	// refused version at once, and the refusal is repeated after this delay.
	NackDelay time.Duration
	// Updated, if set, is told of each update: applied (ACK) or refused (NACK).
	Updated func(applied bool)
	// Connected, if set, is told when a stream starts delivering responses (true) and when
	// it ends (false).
	Connected func(bool)
	Logger    *slog.Logger
}

// Run keeps a subscription to the management server until ctx is done.
func Run(ctx context.Context, o Options) {
	if o.BackoffBase <= 0 {
		o.BackoffBase = DefaultBackoffBase
	}
	if o.BackoffMax < o.BackoffBase {
		o.BackoffMax = max(DefaultBackoffMax, o.BackoffBase)
	}
	if o.NackDelay <= 0 {
		o.NackDelay = DefaultNackDelay
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &client{o: o, log: o.Logger.With("xds", o.Address)}
	delay := o.BackoffBase
	for {
		received, err := c.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if received {
			delay = o.BackoffBase
		}
		wait := time.Duration(float64(delay) * (0.8 + 0.4*rand.Float64()))
		c.log.Warn("xds: stream to the management server ended; keeping the last good config and reconnecting",
			"err", err, "retry_in_ms", wait.Milliseconds())
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		delay = min(2*delay, o.BackoffMax)
	}
}

type client struct {
	o   Options
	log *slog.Logger

	acked      string // version_info of the last update applied
	nacked     string // version_info of the last update refused
	nackLogged string // the last refusal logged, so a resent version is logged once
}

// session runs one ADS stream until it fails; received reports whether it delivered a
// response.
func (c *client) session(ctx context.Context) (received bool, err error) {
	creds := insecure.NewCredentials()
	if c.o.TLS != nil {
		creds = credentials.NewTLS(c.o.TLS)
	}
	conn, err := grpc.NewClient(c.o.Address, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize)),
		// Pings find a server that vanished without closing the connection; every 5 min,
		// the least interval gRPC servers accept by default.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Minute, Timeout: 20 * time.Second}))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(sctx)
	if err != nil {
		return false, err
	}
	node := &corev3.Node{Id: c.o.NodeID}
	// The first request names the node and carries the version in force, if any.
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: TypeURL, VersionInfo: c.acked}); err != nil {
		return false, err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return received, err
		}
		if !received && c.o.Connected != nil {
			c.o.Connected(true)
			defer c.o.Connected(false)
		}
		received = true
		if resp.GetTypeUrl() != TypeURL {
			continue // not subscribed to; ADS servers do not send other types unasked
		}
		req := &discoveryv3.DiscoveryRequest{TypeUrl: TypeURL, ResponseNonce: resp.GetNonce()}
		if err := c.update(resp); err != nil {
			if resp.GetVersionInfo() == c.nacked {
				select { // the same refused version again: pace the NACKs
				case <-ctx.Done():
					return received, ctx.Err()
				case <-time.After(c.o.NackDelay):
				}
			}
			c.nacked = resp.GetVersionInfo()
			if msg := resp.GetVersionInfo() + "\x00" + err.Error(); msg != c.nackLogged {
				c.nackLogged = msg
				c.log.Error("xds: config refused (NACK); the running config stays", "version", resp.GetVersionInfo(), "err", err.Error())
			}
			req.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
			if c.o.Updated != nil {
				c.o.Updated(false)
			}
		} else {
			if c.o.Updated != nil {
				c.o.Updated(true)
			}
			c.acked, c.nacked, c.nackLogged = resp.GetVersionInfo(), "", ""
			c.log.Info("xds: config applied (ACK)", "version", resp.GetVersionInfo(), "resources", len(resp.GetResources()))
		}
		req.VersionInfo = c.acked
		if err := stream.Send(req); err != nil {
			return received, err
		}
	}
}

// update decodes, builds and applies one response's resources.
func (c *client) update(resp *discoveryv3.DiscoveryResponse) error {
	rcs := make([]*rlconf.RateLimitConfig, 0, len(resp.GetResources()))
	for i, a := range resp.GetResources() {
		rc := &rlconf.RateLimitConfig{}
		if err := a.UnmarshalTo(rc); err != nil {
			return fmt.Errorf("resource %d: %w", i, err)
		}
		rcs = append(rcs, rc)
	}
	cfg, err := descriptors.FromResources(rcs...)
	if err != nil {
		return err
	}
	return c.o.Apply(cfg)
}

// TLSConfig is the client TLS of the connection (envoy.xds.tls): the server is verified
// against caFile (the system's roots when empty) under serverName (the address's host when
// empty); certFile and keyFile, when set, are the client certificate (mTLS).
func TLSConfig(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("envoy.xds.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("envoy.xds.tls.ca_file: no PEM certificate in %s", caFile)
		}
		tc.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("envoy.xds.tls.cert_file and key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
