package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit"
)

// TestCounterTTLFollowsWindow: a window counter written again in the same window keeps its
// TTL (SET KEEPTTL: the same expiry instant), and one written in a later window gets the
// TTL of that window, also when both writes share one merged call.
func TestCounterTTLFollowsWindow(t *testing.T) {
	t.Parallel()
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			const W = 60_000
			start := time.UnixMilli(1_000_000 * W).Add(10 * time.Second) // 10 s into a window
			clock := testkit.NewFakeClock(start)
			s := singleStore(t, clock)
			ctx := context.Background()
			sp := engine.Spend{Counter: engine.Counter{Account: "a", Namespace: "ns", Key: "k", Algorithm: alg, WindowMS: W}, Limit: 100, Cost: 1}
			key := s.keys.Counter(sp.Counter)
			// The expiry each write should give, in ms from now: the state's end (the
			// window's, or the next one's for sliding_window) plus the test clock's slack.
			life := func() int64 {
				end := (clock.NowMS()/W + 1) * W
				if alg == engine.SlidingWindow {
					end += W
				}
				return end - clock.NowMS() + testSlack
			}
			check := func(what string, want int64) {
				t.Helper()
				got, err := s.client.PTTL(ctx, key).Result()
				if err != nil {
					t.Fatal(err)
				}
				if ms := got.Milliseconds(); ms > want || ms < want-2000 {
					t.Fatalf("%s: PTTL %d ms, want about %d", what, ms, want)
				}
			}
			spend := func() {
				t.Helper()
				if d, err := s.Spend(ctx, sp); err != nil || !d.Allowed {
					t.Fatalf("spend: %+v, %v", d, err)
				}
			}
			spend()
			first := life()
			check("first write", first)
			clock.Advance(20 * time.Second) // same window: the expiry instant stands
			spend()
			check("same window", first)
			clock.Advance(W*time.Millisecond + 15*time.Second) // the next window, 45 s into it
			spend()
			check("next window", life())
		})
	}
}

// TestBucketTTLWithinSlack: a token bucket's key lives until the bucket is full again and
// at most the slack longer (spec §7.7), also when writes within one second keep its TTL
// (decide.lua's TTLGRAIN): over 300 spends of 36 ms of TAT each, in production mode
// (Redis TIME), its expiry stays between ceil(TAT) and ceil(TAT) + 1 s.
func TestBucketTTLWithinSlack(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{URL: singleURL(t), Prefix: uniquePrefix()})
	ctx := context.Background()
	sp := engine.Spend{Counter: engine.Counter{Account: "a", Namespace: "ns", Key: "k", Algorithm: engine.TokenBucket, WindowMS: 3_600_000}, Limit: 1_000_000, Cost: 10}
	key := s.keys.Counter(sp.Counter)
	kept := 0
	var lastTTL time.Duration
	for i := range 300 {
		if d, err := s.Spend(ctx, sp); err != nil || !d.Allowed {
			t.Fatalf("spend %d: %+v, %v", i, d, err)
		}
		p := s.client.Pipeline()
		now, val, ttl := p.Time(ctx), p.Get(ctx, key), p.PTTL(ctx, key)
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		var tat, rem, lim int64
		if _, err := fmt.Sscanf(val.Val(), "%d:%d:%d", &tat, &rem, &lim); err != nil {
			t.Fatal(err)
		}
		if rem > 0 {
			tat++
		}
		expiry := now.Val().UnixMilli() + ttl.Val().Milliseconds()
		if expiry < tat-5 || expiry > tat+int64(prodSlack)+5 {
			t.Fatalf("spend %d: the key expires at %d, the bucket is full at %d: want up to %d ms after", i, expiry, tat, prodSlack)
		}
		if i > 0 && ttl.Val() <= lastTTL {
			kept++ // not set again: the same expiry instant, running down
		}
		lastTTL = ttl.Val()
	}
	if kept < 200 {
		t.Fatalf("the TTL was kept on only %d of 300 writes", kept)
	}
}
