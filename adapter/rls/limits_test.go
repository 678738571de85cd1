package rls_test

import (
	"context"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/leashd/leash/adapter/rls"
)

func TestDefaultLimits(t *testing.T) {
	if l := rls.DefaultLimits(); l.Handshake != 5*time.Second || l.Idle != 120*time.Second {
		t.Fatalf("DefaultLimits() = %+v, want a 5s handshake and 120s idle", l)
	}
}

// TestSlowAndIdleClientsCutOff: a client that never sends the HTTP/2 preface, or trickles
// it, is disconnected at about the handshake limit; a connection with no call in flight is
// closed (GOAWAY) at about the idle limit; and normal calls keep being answered meanwhile.
// It runs in a synctest bubble on an in-memory listener, so every limit is met in fake
// time (tests/reliability checks the same on a running leash's loopback port).
func TestSlowAndIdleClientsCutOff(t *testing.T) {
	synctest.Test(t, testSlowAndIdleClientsCutOff)
}

func testSlowAndIdleClientsCutOff(t *testing.T) {
	h := newHarnessWith(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig}, harnessOptions{inMemory: true})
	limits := rls.Limits{Handshake: 400 * time.Millisecond, Idle: 800 * time.Millisecond}
	srv, _ := rls.NewServerWith(h.svc, nil, limits)
	ln := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	// closedAfter dials, runs send, and returns how long the server took to close the
	// connection, measured from the dial.
	closedAfter := func(send func(net.Conn)) <-chan time.Duration {
		out := make(chan time.Duration, 1)
		c, err := ln.DialContext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		go func() {
			defer c.Close()
			go send(c)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.Copy(io.Discard, c) // the server's settings frame, then EOF or reset
			out <- time.Since(start)
		}()
		return out
	}
	silent := closedAfter(func(net.Conn) {})
	trickle := closedAfter(func(c net.Conn) {
		for _, b := range []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") {
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond) // the preface alone would take 2.4 s
		}
	})

	// A well-behaved client is served while the slow ones hang on.
	conn, err := grpc.NewClient("passthrough:///bufconn", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	callOK := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{desc("internal", "x")}}); err != nil {
			t.Fatalf("a normal call failed while slow clients were connected: %v", err)
		}
	}
	var lastCall time.Time
	for range 5 {
		callOK()
		lastCall = time.Now()
		time.Sleep(50 * time.Millisecond)
	}

	for name, ch := range map[string]<-chan time.Duration{"silent": silent, "trickling": trickle} {
		d := <-ch
		t.Logf("%s client disconnected after %v (handshake limit %v)", name, d, limits.Handshake)
		if d < limits.Handshake || d > limits.Handshake+50*time.Millisecond { // fake time: exact but for a preface byte's gap
			t.Errorf("%s client disconnected after %v, want about %v", name, d, limits.Handshake)
		}
	}

	// Idle: after its last call the connection gets a GOAWAY within about the idle limit
	// and the channel leaves READY; the next call reconnects.
	if s := conn.GetState(); s != connectivity.Ready {
		t.Fatalf("state after calls = %v", s)
	}
	idleFrom := lastCall
	ctx, cancel := context.WithTimeout(context.Background(), limits.Idle+5*time.Second)
	defer cancel()
	if !conn.WaitForStateChange(ctx, connectivity.Ready) {
		t.Fatalf("an idle connection stayed open %v (idle limit %v)", time.Since(idleFrom), limits.Idle)
	}
	d := time.Since(idleFrom)
	t.Logf("idle connection closed after %v (idle limit %v)", d, limits.Idle)
	if d < limits.Idle || d > limits.Idle+100*time.Millisecond {
		t.Errorf("idle connection closed after %v, want the idle limit %v", d, limits.Idle)
	}
	callOK()
}
