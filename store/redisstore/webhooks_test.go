package redisstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/redisstore/lua"
	"github.com/leashd/leash/testkit/redistest"
)

func testEvent(id string, createdMS int64) engine.OutboxEvent {
	return engine.OutboxEvent{ID: id, Account: "acme", Type: "usage.quota_exceeded", CreatedMS: createdMS,
		Data: []byte(`{"month":"2027-01","id":"` + id + `"}`)}
}

func claimIDs(t *testing.T, s *Store, max int, visibilityMS int64) []string {
	t.Helper()
	evs, err := s.Claim(context.Background(), max, visibilityMS)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids
}

// TestOutboxSurvivesReopen: events, their visibility, their attempts, the once-keys and
// the webhooks are in Redis, not in the Store: a new Store on the same Redis and prefix
// (a restarted instance) carries on where the closed one stopped.
func TestOutboxSurvivesReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, prefix := singleURL(t), uniquePrefix()
	clock := testkit.NewFakeClock(time.Date(2027, 1, 16, 0, 0, 0, 0, time.UTC))
	t0 := clock.NowMS()
	a := openStore(t, Options{URL: url, Prefix: prefix, Clock: clock})
	w := engine.Webhook{URL: "https://hooks.example.com/", Secret: "whsec"}
	if err := a.PutWebhook(ctx, "acme", w); err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"", "quota:acme:2027-01", ""} {
		if added, err := a.Enqueue(ctx, testEvent(fmt.Sprintf("e%d", i), t0), key); err != nil || !added {
			t.Fatalf("Enqueue e%d: %v %v", i, added, err)
		}
	}
	if ids := claimIDs(t, a, 1, 10_000); !slices.Equal(ids, []string{"e0"}) {
		t.Fatalf("claimed %v, want [e0]", ids)
	}
	if err := a.Retry(ctx, "e1", 5000); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	b := openStore(t, Options{URL: url, Prefix: prefix, Clock: clock})
	if n, err := b.OutboxLen(ctx); err != nil || n != 3 {
		t.Fatalf("OutboxLen after reopen = %d, %v; want 3", n, err)
	}
	if got, ok, err := b.Webhook(ctx, "acme"); err != nil || !ok || got != w {
		t.Fatalf("Webhook after reopen = %+v %v %v", got, ok, err)
	}
	if added, err := b.Enqueue(ctx, testEvent("e9", t0), "quota:acme:2027-01"); err != nil || added {
		t.Fatalf("Enqueue with a used once-key after reopen: added %v, %v", added, err)
	}
	if ids := claimIDs(t, b, 10, 10_000); !slices.Equal(ids, []string{"e2"}) {
		t.Fatalf("claimed %v, want [e2] (e0 hidden, e1 delayed)", ids)
	}
	clock.Advance(10 * time.Second)
	evs, err := b.Claim(ctx, 10, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[0].ID != "e1" || evs[0].Attempts != 1 || evs[1].ID != "e0" || evs[1].Attempts != 0 ||
		string(evs[1].Data) != `{"month":"2027-01","id":"e0"}` || evs[2].ID != "e2" {
		t.Fatalf("claimed %+v, want e1 (1 attempt), e0, e2", evs)
	}
}

// TestOutboxSurvivesRedisRestart: with Redis persistence on (here AOF, fsync always), the
// outbox survives Redis itself being killed and restarted: nothing of it is volatile.
func TestOutboxSurvivesRedisRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.StartServer(t, false, "--appendonly", "yes", "--appendfsync", "always")
	s := openStore(t, Options{URL: srv.URL()})
	now, err := s.NowMS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, testEvent("e1", now), "once"); err != nil {
		t.Fatal(err)
	}
	srv.Stop() // SIGKILL
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "Claim answers after the restart", 10*time.Second, func() bool {
		evs, err := s.Claim(ctx, 10, 60_000)
		if err == nil && (len(evs) != 1 || evs[0].ID != "e1") {
			t.Fatalf("after the restart claimed %+v, want e1", evs)
		}
		return err == nil
	})
	if added, err := s.Enqueue(ctx, testEvent("e2", now), "once"); err != nil || added {
		t.Fatalf("once-key after the restart: added %v, %v", added, err)
	}
}

// TestOutboxTwoInstances: two Stores on one Redis (production mode: Redis TIME) claim
// from one outbox concurrently; no event is handed out twice within its visibility
// timeout, and every one is handed out.
func TestOutboxTwoInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, prefix := singleURL(t), uniquePrefix()
	stores := []*Store{openStore(t, Options{URL: url, Prefix: prefix}), openStore(t, Options{URL: url, Prefix: prefix})}
	const n = 200
	for i := range n {
		if _, err := stores[i%2].Enqueue(ctx, testEvent(fmt.Sprintf("e%03d", i), 0), ""); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	claimed := map[string]int{}
	total := 0
	var wg sync.WaitGroup
	for g := range 16 {
		s := stores[g%2]
		wg.Go(func() {
			for {
				evs, err := s.Claim(ctx, 4, 60_000)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, ev := range evs {
					claimed[ev.ID]++
				}
				total += len(evs)
				enough := total > 2*n
				mu.Unlock()
				if len(evs) == 0 || enough {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(claimed) != n || total != n {
		t.Fatalf("%d distinct events claimed %d times in all, want %d once each", len(claimed), total, n)
	}
	for _, s := range stores {
		if l, err := s.OutboxLen(ctx); err != nil || l != n {
			t.Fatalf("OutboxLen = %d, %v; want %d", l, err, n)
		}
	}
}

// TestWebhookOutboxKeys checks the key names and hash tags of webhooks and the outbox, and
// their TTLs: the once-keys expire after engine.OnceKeyTTL; webhooks persist like rules;
// the outbox keys persist while events wait and are gone once it is empty.
func TestWebhookOutboxKeys(t *testing.T) {
	t.Parallel()
	k := lua.NewKeys("leash")
	for _, c := range []struct{ got, want string }{
		{k.Webhook("acme"), "{leash:w:acme}:hook"},
		{k.OutboxDue(), "{leash:ob}:due"},
		{k.OutboxEvents(), "{leash:ob}:ev"},
		{k.OutboxOnce("quota:acme:2027-01"), "{leash:ob}:once:quota:acme:2027-01"},
		{k.OutboxOnce("a}b{c%"), "{leash:ob}:once:a%7Db%7Bc%25"},
	} {
		if c.got != c.want {
			t.Fatalf("key %q, want %q", c.got, c.want)
		}
	}
	for _, key := range []string{k.OutboxEvents(), k.OutboxOnce("x}:y"), k.OutboxOnce("{")} {
		if hashTag(key) != "leash:ob" {
			t.Fatalf("outbox key %q hashes on %q, not the outbox tag", key, hashTag(key))
		}
	}
	if hashTag(k.Webhook("a}b")) != "leash:w:a%7Db" {
		t.Fatalf("webhook key %q", k.Webhook("a}b"))
	}

	s := singleStore(t, nil) // production mode: Redis TIME
	ctx := context.Background()
	if err := s.PutWebhook(ctx, "acme", engine.Webhook{URL: "https://h.example.com/", Secret: "s"}); err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"quota:acme:2027-01", ""} {
		if _, err := s.Enqueue(ctx, testEvent(fmt.Sprintf("e%d", i), 0), key); err != nil {
			t.Fatal(err)
		}
	}
	rc := s.client
	rec, err := rc.HGet(ctx, s.keys.OutboxEvents(), "e0").Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"attempts":0,"account":"acme","type":"usage.quota_exceeded","created_ms":0,"data":{"month":"2027-01","id":"e0"}}`; rec != want {
		t.Fatalf("record %s, want %s", rec, want)
	}
	if err := s.Retry(ctx, "e0", 0); err != nil {
		t.Fatal(err)
	}
	if rec, _ = rc.HGet(ctx, s.keys.OutboxEvents(), "e0").Result(); rec[:15] != `{"attempts":1,"` {
		t.Fatalf("record after a retry %s", rec)
	}
	type span struct{ min, max time.Duration } // max 0: no TTL
	onceTTL := engine.OnceKeyTTL
	check := func(want map[string]span) {
		t.Helper()
		var keys []string
		iter := rc.Scan(ctx, 0, "*"+s.keys.Prefix()+":*", 100).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		if len(keys) != len(want) {
			t.Fatalf("keys %q, want %d keys", keys, len(want))
		}
		for _, key := range keys {
			sp, ok := want[key]
			if !ok {
				t.Fatalf("unexpected key %q", key)
			}
			ttl, err := rc.PTTL(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if sp.max == 0 {
				if ttl >= 0 {
					t.Fatalf("%q expires in %v; it must persist", key, ttl)
				}
				continue
			}
			if ttl < sp.min || ttl > sp.max {
				t.Fatalf("%q: TTL %v, want within [%v, %v]", key, ttl, sp.min, sp.max)
			}
		}
	}
	once := span{onceTTL - time.Minute, onceTTL + 1100*time.Millisecond}
	check(map[string]span{
		s.keys.Webhook("acme"):                  {},
		s.keys.OutboxDue():                      {},
		s.keys.OutboxEvents():                   {},
		s.keys.OutboxOnce("quota:acme:2027-01"): once,
	})
	for _, id := range []string{"e0", "e1"} {
		if err := s.Ack(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DeleteWebhook(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	check(map[string]span{s.keys.OutboxOnce("quota:acme:2027-01"): once})
}
