package webhooks_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/webhooks"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/testkit/enginekit"
	"github.com/leashd/leash/webhook"
	"github.com/leashd/leash/webhook/ssrf"
)

// drain claims every due event of the outbox and acks it, returning "type account data".
func drain(t *testing.T, s engine.Store) []string {
	t.Helper()
	evs, err := s.Claim(context.Background(), 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s %s", ev.Type, ev.Account, ev.Data))
		if err := s.Ack(context.Background(), ev.ID); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out
}

func checks(t *testing.T, f *enginekit.Fixture, account string, n int) {
	t.Helper()
	for range n {
		if _, err := (testkit.Check{
			Namespace: "api", Key: "k", Limit: testkit.Ptr(int64(1000)), WindowMS: testkit.Ptr(int64(1000)),
		}).Do(context.Background(), f.Eng, f.Accts[account]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Eng.Usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestUsageEvents: usage.quota_exceeded once the month total is over the quota and
// usage.hard_cap_reached once it reaches the hard cap, each once per account and month,
// only for plans with webhooks, with the data of spec §8.3.
func TestUsageEvents(t *testing.T) {
	f := enginekit.New(t, nil)
	// capped: plan tiny (webhooks, quota 2, hard cap 3); cheap: free (no webhooks).
	checks(t, f, "capped", 2)
	checks(t, f, "cheap", 5)
	if got := drain(t, f.Store); len(got) != 0 {
		t.Fatalf("at the quota: events %q, want none", got)
	}
	checks(t, f, "capped", 1)
	want := []string{
		`usage.hard_cap_reached capped {"month":"2026-11","total":3,"hard_cap":3}`,
		`usage.quota_exceeded capped {"month":"2026-11","total":3,"quota":2}`,
	}
	if got := drain(t, f.Store); !slices.Equal(got, want) {
		t.Fatalf("over the quota and at the cap: events\n%q\nwant\n%q", got, want)
	}
	// Refused requests and later flushes queue nothing more this month.
	if _, err := (testkit.Check{Namespace: "api", Key: "k", Limit: testkit.Ptr(int64(9)), WindowMS: testkit.Ptr(int64(9))}).Do(context.Background(), f.Eng, f.Accts["capped"]); engine.CodeOf(err) != engine.CodeHardCapExceeded {
		t.Fatalf("after the cap: %v", err)
	}
	checks(t, f, "acme", 1)
	if got := drain(t, f.Store); len(got) != 0 {
		t.Fatalf("later in the month: events %q, want none", got)
	}
	// A second instance on the same store does not queue them again (the store's
	// once-key, not this instance's memory, decides).
	other := wiring.New(engine.RolesOf(f.Store), f.Eng.Accounts.Directory(), wiring.Options{})
	if err := other.Usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, f.Store); len(got) != 0 {
		t.Fatalf("second instance: events %q, want none", got)
	}

	// A new month starts over.
	f.Clock.Advance(9 * 24 * time.Hour)                             // 2026-12-01 10:00
	if err := f.Eng.Usage.Flush(context.Background()); err != nil { // the flush loop's next tick
		t.Fatal(err)
	}
	checks(t, f, "capped", 3)
	want = []string{
		`usage.hard_cap_reached capped {"month":"2026-12","total":3,"hard_cap":3}`,
		`usage.quota_exceeded capped {"month":"2026-12","total":3,"quota":2}`,
	}
	if got := drain(t, f.Store); !slices.Equal(got, want) {
		t.Fatalf("next month: events\n%q\nwant\n%q", got, want)
	}
}

// failingEnqueue fails Enqueue while fail is set.
type failingEnqueue struct {
	engine.Store
	fail  atomic.Bool
	calls atomic.Int32
}

func (s *failingEnqueue) Enqueue(ctx context.Context, ev engine.OutboxEvent, onceKey string) (bool, error) {
	s.calls.Add(1)
	if s.fail.Load() {
		return false, errors.New("store down")
	}
	return s.Store.Enqueue(ctx, ev, onceKey)
}

// TestUsageEventRetried: an event that could not be queued is queued by a later flush.
func TestUsageEventRetried(t *testing.T) {
	var fe *failingEnqueue
	f := enginekit.New(t, func(s engine.Store) engine.Store {
		fe = &failingEnqueue{Store: s}
		return fe
	})
	fe.fail.Store(true)
	for range 3 {
		if _, err := (testkit.Check{Namespace: "api", Key: "k", Limit: testkit.Ptr(int64(9)), WindowMS: testkit.Ptr(int64(9))}).Do(context.Background(), f.Eng, f.Accts["capped"]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Eng.Usage.Flush(context.Background()); err == nil {
		t.Fatal("Flush with a failing Enqueue succeeded")
	}
	if got := drain(t, f.Store); len(got) != 0 {
		t.Fatalf("events %q queued by a failing store", got)
	}
	fe.fail.Store(false)
	if err := f.Eng.Usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, f.Store); len(got) != 2 {
		t.Fatalf("after recovery: events %q, want quota_exceeded and hard_cap_reached", got)
	}
	// Once queued, later flushes do not ask the store again.
	n := fe.calls.Load()
	if err := f.Eng.Usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fe.calls.Load() != n {
		t.Fatalf("Enqueue called again after the events were queued")
	}
}

// TestWebhookConfig: plan gate, screening, a new secret on every PUT, test events.
func TestWebhookConfig(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	acme, cheap := f.Accts["acme"], f.Accts["cheap"]
	var woken atomic.Int32
	eng := wiring.New(engine.RolesOf(f.Store), f.Eng.Accounts.Directory(), wiring.Options{Webhooks: webhooks.Options{
		Screen:   webhook.Screen(ssrf.Policy{}, staticResolver{}),
		Enqueued: func() { woken.Add(1) },
	}})

	_, err := eng.Webhooks.Put(ctx, cheap, "https://hooks.example.com/")
	enginekit.WantCode(t, err, engine.CodeWebhookNotOnPlan)
	_, err = eng.Webhooks.Test(ctx, cheap)
	enginekit.WantCode(t, err, engine.CodeWebhookNotOnPlan)
	_, err = eng.Webhooks.Get(ctx, acme)
	enginekit.WantCode(t, err, engine.CodeWebhookNotFound)
	_, err = eng.Webhooks.Test(ctx, acme)
	enginekit.WantCode(t, err, engine.CodeWebhookNotFound)
	for _, bad := range []string{"http://hooks.example.com/", "https://10.0.0.1/", "https://0x7f.1/", "https://[::ffff:127.0.0.1]/",
		"https://metadata.google.internal/", "https://nx.example.com/", ""} {
		_, err = eng.Webhooks.Put(ctx, acme, bad)
		enginekit.WantCode(t, err, engine.CodeWebhookURLRejected)
	}

	w1, err := eng.Webhooks.Put(ctx, acme, "https://Hooks.Example.COM:443/a")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := eng.Webhooks.Put(ctx, acme, "https://hooks.example.com/b")
	if err != nil {
		t.Fatal(err)
	}
	if w1.URL != "https://hooks.example.com:443/a" || w1.Secret == w2.Secret || len(w1.Secret) != len("whsec_")+43 {
		t.Fatalf("webhooks %+v, %+v", w1, w2)
	}
	if u, err := eng.Webhooks.Get(ctx, acme); err != nil || u != w2.URL {
		t.Fatalf("Webhook = %q, %v", u, err)
	}
	id, err := eng.Webhooks.Test(ctx, acme)
	if err != nil {
		t.Fatal(err)
	}
	if woken.Load() != 1 {
		t.Fatalf("Enqueued called %d times, want 1", woken.Load())
	}
	evs, _ := f.Store.Claim(ctx, 10, 0)
	if len(evs) != 1 || evs[0].ID != id || evs[0].Type != webhooks.EventTest || evs[0].CreatedMS != enginekit.Start.UnixMilli() {
		t.Fatalf("outbox %+v, want the test event %s", evs, id)
	}
	if err := eng.Webhooks.Delete(ctx, acme); err != nil {
		t.Fatal(err)
	}
	if err := eng.Webhooks.Delete(ctx, acme); err != nil {
		t.Fatal(err)
	}
	_, err = eng.Webhooks.Get(ctx, acme)
	enginekit.WantCode(t, err, engine.CodeWebhookNotFound)
}

// staticResolver: hooks.example.com is a public address; nothing else resolves.
type staticResolver struct{}

func (staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == "hooks.example.com" {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	return nil, errors.New("no such host")
}

// TestWebhookScreenOutcomes: what the engine makes of its URLScreen's answers (spec
// §8.2): a refusal (an error wrapping *URLRejectedError) is webhook_url_rejected with
// its reason; another error is a host that does not resolve, unless the caller gave up
// (unavailable); the URL stored is the screen's canonical one, checked under a deadline;
// an engine without a screen sets no webhook.
func TestWebhookScreenOutcomes(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
	put := func(ctx context.Context, screen webhooks.URLScreen) (engine.Webhook, error) {
		eng := wiring.New(engine.RolesOf(f.Store), f.Eng.Accounts.Directory(), wiring.Options{Webhooks: webhooks.Options{Screen: screen}})
		return eng.Webhooks.Put(ctx, acme, "https://Hooks.example.com/in")
	}
	message := func(err error) string {
		if e, ok := errors.AsType[*engine.Error](err); ok {
			return e.Message
		}
		return ""
	}

	_, err := put(ctx, func(context.Context, string) (string, error) {
		return "", fmt.Errorf("screening: %w", &webhooks.URLRejectedError{Reason: "URL scheme must be https"})
	})
	enginekit.WantCode(t, err, engine.CodeWebhookURLRejected)
	if got := message(err); got != "webhook URL rejected: URL scheme must be https" {
		t.Errorf("refusal message %q", got)
	}

	_, err = put(ctx, func(context.Context, string) (string, error) { return "", context.DeadlineExceeded })
	enginekit.WantCode(t, err, engine.CodeWebhookURLRejected)
	if got := message(err); got != "webhook URL rejected: host does not resolve" {
		t.Errorf("lookup timeout message %q", got)
	}

	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, err = put(gone, func(ctx context.Context, _ string) (string, error) { return "", ctx.Err() })
	enginekit.WantCode(t, err, engine.CodeUnavailable)

	_, err = put(ctx, nil)
	enginekit.WantCode(t, err, engine.CodeInternal)
	if _, err := f.Eng.Webhooks.Get(ctx, acme); engine.CodeOf(err) != engine.CodeWebhookNotFound {
		t.Fatalf("after refusals: webhook %v, want none set", err)
	}

	var screened string
	w, err := put(ctx, func(ctx context.Context, raw string) (string, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("screen called without a deadline")
		}
		screened = raw
		return "https://hooks.example.com/in", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if screened != "https://Hooks.example.com/in" || w.URL != "https://hooks.example.com/in" {
		t.Fatalf("screened %q, stored %q; want the raw URL screened and the canonical one stored", screened, w.URL)
	}
	if u, err := f.Eng.Webhooks.Get(ctx, acme); err != nil || u != w.URL {
		t.Fatalf("Webhook = %q, %v", u, err)
	}
}
