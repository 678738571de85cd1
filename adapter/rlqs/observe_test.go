package rlqs_test

import (
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/leashd/leash/adapter/rlqs"
)

// streamCounts are what rlqs.Counters counted.
type streamCounts struct {
	mu       sync.Mutex
	streams  int
	buckets  int
	sent     map[string]int
	rejected map[string]int
	reported uint64
}

func (c *streamCounts) counters() rlqs.Counters {
	return rlqs.Counters{
		Streams:  func(d int) { c.mu.Lock(); c.streams += d; c.mu.Unlock() },
		Buckets:  func(d int) { c.mu.Lock(); c.buckets += d; c.mu.Unlock() },
		Sent:     func(kind string) { c.mu.Lock(); c.sent[kind]++; c.mu.Unlock() },
		Rejected: func(reason string) { c.mu.Lock(); c.rejected[reason]++; c.mu.Unlock() },
		Reported: func(_ string, allowed, denied uint64) {
			c.mu.Lock()
			c.reported += allowed + denied
			c.mu.Unlock()
		},
	}
}

func (c *streamCounts) want(t *testing.T, when string, streams, buckets int, sent map[string]int, reported uint64, badBuckets int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streams != streams || c.buckets != buckets || c.reported != reported || c.rejected["bad_bucket"] != badBuckets {
		t.Errorf("%s: %d streams, %d buckets, %d requests reported, %d bad buckets; want %d, %d, %d and %d",
			when, c.streams, c.buckets, c.reported, c.rejected["bad_bucket"], streams, buckets, reported, badBuckets)
	}
	for kind, n := range sent {
		if c.sent[kind] != n {
			t.Errorf("%s: %d %s actions sent, want %d (all: %v)", when, c.sent[kind], kind, n, c.sent)
		}
	}
}

// TestStreamCounted: a stream counts as open from its start to its end, each bucket action
// it is sent is counted by kind, and its reports' requests, buckets and refusals are
// counted, all through the interceptor the server is built with (spec §14.6).
func TestStreamCounted(t *testing.T) {
	t.Parallel()
	st := setup{descriptors: `
domain: web
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
`, domains: map[string]string{"web": "acme"}}
	c := &streamCounts{sent: map[string]int{}, rejected: map[string]int{}}
	st.opts.Counters = c.counters()
	in := startInstance(t, memStore(t), st, "")
	r := openRaw(t, in.addr)
	r.send("web", usage(map[string]string{"user": "bob"}, 3, 1))
	if a := r.recv(2 * time.Second); a.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket() == nil {
		t.Fatalf("first assignment: %v", a)
	}
	c.want(t, "after a token bucket", 1, 1, map[string]int{"token_bucket": 1, "deny_all": 0}, 4, 0)
	r.send("", usage(map[string]string{}, 5, 0), usage(map[string]string{"blocked": "x"}, 0, 2)) // a bad bucket is ignored
	if a := r.recv(2 * time.Second); a == nil || len(a.GetBucketAction()) != 1 {
		t.Fatalf("the blocked bucket's assignment: %v", a)
	}
	c.want(t, "after a deny_all", 1, 2, map[string]int{"token_bucket": 1, "deny_all": 1}, 6, 1)
	if err := r.st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	// gRPC ends the stream once its handler and interceptors have returned.
	if err := r.ended(); !errors.Is(err, io.EOF) {
		t.Fatalf("the stream ended with %v, want its end", err)
	}
	c.want(t, "after the stream ended", 0, 0, map[string]int{"token_bucket": 1, "deny_all": 1}, 6, 1)
}
