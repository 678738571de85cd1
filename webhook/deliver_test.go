package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/webhooks"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/webhook"
	"github.com/leashd/leash/webhook/ssrf"
)

// testPolicy admits the loopback receivers of these tests.
var testPolicy = ssrf.Policy{AllowHTTP: true, AllowPrivateTargets: true}

// delivery is one request a receiver got.
type delivery struct {
	path   string
	header http.Header
	body   []byte
}

// receiver is a loopback webhook endpoint answering with the statuses in plan, in turn
// (the last one repeats).
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []delivery
	// answer writes the response to the n-th request (from 0).
	answer func(w http.ResponseWriter, r *http.Request, n int)
}

func newReceiver(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		n := len(rc.got)
		rc.got = append(rc.got, delivery{path: r.URL.Path, header: r.Header.Clone(), body: body})
		rc.mu.Unlock()
		rc.answer(w, r, n)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// statuses answers the n-th request with codes[n], the last code repeating.
func statuses(codes ...int) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, n int) {
		w.WriteHeader(codes[min(n, len(codes)-1)])
	}
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// fixture is an engine and a running Deliverer over one memory store.
type fixture struct {
	store    *memstore.Store
	eng      *wiring.Engine
	acme     *engine.Account
	mu       sync.Mutex
	outcomes []webhook.Outcome
	logs     bytes.Buffer // guarded by mu
	// stop ends the Deliverer's Run and waits for it, with every delivery it started; it
	// is idempotent and also runs at the test's cleanup.
	stop func()
}

func (f *fixture) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logs.Write(p)
}

func (f *fixture) outcomeList() []webhook.Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.outcomes)
}

func (f *fixture) logText() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logs.String()
}

// newFixture starts a Deliverer with opts (Store, Account, Observe and Logger filled
// in) over a fresh memory store; it stops when the test ends.
func newFixture(t *testing.T, opts webhook.Options) *fixture {
	t.Helper()
	return newFixtureWith(t, opts, nil)
}

// newFixtureWith is newFixture with before run on the fixture before the Deliverer starts.
func newFixtureWith(t *testing.T, opts webhook.Options, before func(*fixture)) *fixture {
	t.Helper()
	f := &fixture{store: memstore.New(memstore.Options{})}
	t.Cleanup(func() { f.store.Close() })
	plans := engine.BuiltinPlans()
	dir, err := engine.NewDirectory([]engine.AccountSpec{
		{ID: "acme", Plan: plans["pro"]},
		{ID: "cheap", Plan: plans["free"]},
	})
	if err != nil {
		t.Fatal(err)
	}
	wake := make(chan struct{}, 1)
	f.eng = wiring.New(engine.RolesOf(f.store), dir, wiring.Options{Webhooks: webhooks.Options{
		Screen: webhook.Screen(testPolicy, nil),
		Enqueued: func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		},
	}})
	f.acme, _ = f.eng.Accounts.Account("acme")
	opts.Store = f.store
	opts.Account = f.eng.Accounts.Account
	opts.Wake = wake
	opts.Observe = func(o webhook.Outcome) {
		f.mu.Lock()
		f.outcomes = append(f.outcomes, o)
		f.mu.Unlock()
	}
	opts.Logger = slog.New(slog.NewTextHandler(f, nil))
	if opts.Policy == (ssrf.Policy{}) {
		opts.Policy = testPolicy
	}
	if opts.BackoffBase == 0 {
		opts.BackoffBase, opts.BackoffMax = 10*time.Millisecond, 40*time.Millisecond
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	if before != nil {
		before(f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { webhook.New(opts).Run(ctx); close(done) }()
	f.stop = func() { cancel(); <-done }
	t.Cleanup(f.stop)
	return f
}

// setWebhook configures acme's webhook to url and returns the secret.
func (f *fixture) setWebhook(t *testing.T, url string) string {
	t.Helper()
	w, err := f.eng.Webhooks.Put(context.Background(), f.acme, url)
	if err != nil {
		t.Fatalf("PutWebhook(%s): %v", url, err)
	}
	return w.Secret
}

func (f *fixture) sendTest(t *testing.T) string {
	t.Helper()
	id, err := f.eng.Webhooks.Test(context.Background(), f.acme)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *fixture) outboxLen(t *testing.T) int64 {
	t.Helper()
	n, err := f.store.OutboxLen(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) waitOutcomes(t *testing.T, want ...webhook.Outcome) {
	t.Helper()
	testkit.Eventually(t, "outcomes "+strings.Join(outcomeStrings(want), ","), 10*time.Second, func() bool { return len(f.outcomeList()) >= len(want) })
	if got := f.outcomeList(); !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
}

func outcomeStrings(os []webhook.Outcome) []string {
	s := make([]string, len(os))
	for i, o := range os {
		s[i] = string(o)
	}
	return s
}

// TestDeliverSigned: a webhook.test event arrives with the body of spec §8.3 and the
// headers of spec §8.4, and its signature verifies with the secret PUT returned; a tampered body does not.
func TestDeliverSigned(t *testing.T) {
	rc := newReceiver(t, statuses(http.StatusNoContent))
	f := newFixture(t, webhook.Options{PollInterval: time.Hour}) // delivery must follow the wake-up
	secret := f.setWebhook(t, rc.srv.URL+"/hooks/leash")
	id := f.sendTest(t)
	f.waitOutcomes(t, webhook.Delivered)

	ds := rc.deliveries()
	if len(ds) != 1 {
		t.Fatalf("%d deliveries, want 1", len(ds))
	}
	d := ds[0]
	if d.path != "/hooks/leash" || d.header.Get("Content-Type") != "application/json" ||
		d.header.Get("Leash-Event-Id") != id || d.header.Get("Leash-Event-Type") != "webhook.test" {
		t.Fatalf("delivery %s headers %v", d.path, d.header)
	}
	var body map[string]any
	if err := json.Unmarshal(d.body, &body); err != nil {
		t.Fatal(err)
	}
	created, _ := body["created_at"].(string)
	ct, err := time.Parse(time.RFC3339, created)
	if len(body) != 5 || body["id"] != id || body["type"] != "webhook.test" || body["account"] != "acme" ||
		err != nil || !strings.HasSuffix(created, "Z") || time.Since(ct).Abs() > time.Minute {
		t.Fatalf("body %s", d.body)
	}
	if data, ok := body["data"].(map[string]any); !ok || len(data) != 0 {
		t.Fatalf("data %v, want {}", body["data"])
	}
	sig := d.header.Get(webhook.SignatureHeader)
	if err := webhook.Verify(secret, sig, d.body, 5*time.Minute); err != nil {
		t.Fatalf("Verify(%s): %v", sig, err)
	}
	tampered := bytes.Replace(d.body, []byte(`"acme"`), []byte(`"evil"`), 1)
	if err := webhook.Verify(secret, sig, tampered, 5*time.Minute); !errors.Is(err, webhook.ErrBadSignature) {
		t.Fatalf("Verify(tampered) = %v, want ErrBadSignature", err)
	}
	if err := webhook.Verify("whsec_other", sig, d.body, 5*time.Minute); !errors.Is(err, webhook.ErrBadSignature) {
		t.Fatalf("Verify(other secret) = %v, want ErrBadSignature", err)
	}
	if n := f.outboxLen(t); n != 0 {
		t.Fatalf("outbox holds %d events after the delivery", n)
	}
}

// TestRetryThenDeliver: a receiver that answers 500 twice, then 200, gets three attempts
// of one event (same id, same body), and the event is then gone.
func TestRetryThenDeliver(t *testing.T) {
	rc := newReceiver(t, statuses(500, 500, 200))
	f := newFixture(t, webhook.Options{})
	f.setWebhook(t, rc.srv.URL)
	id := f.sendTest(t)
	f.waitOutcomes(t, webhook.Retried, webhook.Retried, webhook.Delivered)
	ds := rc.deliveries()
	if len(ds) != 3 {
		t.Fatalf("%d attempts, want 3", len(ds))
	}
	for i, d := range ds {
		if d.header.Get("Leash-Event-Id") != id || !bytes.Equal(d.body, ds[0].body) {
			t.Fatalf("attempt %d: event %s body %s; want %s and the first body", i, d.header.Get("Leash-Event-Id"), d.body, id)
		}
	}
	// Nothing else arrives: the outbox is empty, and once the Deliverer has stopped, with
	// every delivery it started, the receiver has still seen three.
	f.stop()
	if n := len(rc.deliveries()); n != 3 || f.outboxLen(t) != 0 {
		t.Fatalf("after delivery: %d attempts, outbox %d", n, f.outboxLen(t))
	}
	// The retry's delay is logged in milliseconds, its unit in the field name.
	if logs := f.logText(); !regexp.MustCompile(`will retry.* retry_in_ms=\d+`).MatchString(logs) {
		t.Fatalf("no retry line with retry_in_ms:\n%s", logs)
	}
}

// TestGiveUp: after MaxAttempts failed deliveries the event is dropped from the outbox.
func TestGiveUp(t *testing.T) {
	rc := newReceiver(t, statuses(503))
	f := newFixture(t, webhook.Options{MaxAttempts: 3})
	f.setWebhook(t, rc.srv.URL)
	f.sendTest(t)
	f.waitOutcomes(t, webhook.Retried, webhook.Retried, webhook.Failed)
	f.stop() // with every delivery it started: what the receiver saw is final
	if n := len(rc.deliveries()); n != 3 || f.outboxLen(t) != 0 {
		t.Fatalf("%d attempts (want 3), outbox %d (want 0)", n, f.outboxLen(t))
	}
	if !strings.Contains(f.logText(), "giving up") {
		t.Fatalf("no log line for giving up:\n%s", f.logText())
	}
}

// TestTimeoutRetried: an attempt that outlasts Timeout fails and is retried.
func TestTimeoutRetried(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 0 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	})
	f := newFixture(t, webhook.Options{Timeout: 200 * time.Millisecond})
	f.setWebhook(t, rc.srv.URL)
	start := time.Now()
	f.sendTest(t)
	f.waitOutcomes(t, webhook.Retried, webhook.Delivered)
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("first attempt gave up after %v, before its timeout", el)
	}
	if n := len(rc.deliveries()); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
}

// TestResponseBodyBounded: a receiver that streams an endless 200 body does not hold the
// delivery: a few KiB are read, and the attempt counts as delivered.
func TestResponseBodyBounded(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	f := newFixture(t, webhook.Options{Timeout: 5 * time.Second})
	f.setWebhook(t, rc.srv.URL)
	start := time.Now()
	f.sendTest(t)
	f.waitOutcomes(t, webhook.Delivered)
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("delivery took %v: the endless body was read", el)
	}
}

// TestRedirectNotFollowed: a 3xx is a failed attempt; its target gets nothing.
func TestRedirectNotFollowed(t *testing.T) {
	target := newReceiver(t, statuses(200))
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		http.Redirect(w, r, target.srv.URL, http.StatusTemporaryRedirect)
	})
	f := newFixture(t, webhook.Options{MaxAttempts: 2})
	f.setWebhook(t, rc.srv.URL)
	f.sendTest(t)
	f.waitOutcomes(t, webhook.Retried, webhook.Failed)
	if n := len(target.deliveries()); n != 0 {
		t.Fatalf("the redirect target got %d requests", n)
	}
}

// TestWebhookChanged: once the webhook is replaced, retries go to the new URL, signed
// with the new secret; the old URL gets nothing more.
func TestWebhookChanged(t *testing.T) {
	old := newReceiver(t, statuses(500))
	next := newReceiver(t, statuses(200))
	f := newFixture(t, webhook.Options{BackoffBase: 300 * time.Millisecond, BackoffMax: 300 * time.Millisecond})
	f.setWebhook(t, old.srv.URL)
	id := f.sendTest(t)
	f.waitOutcomes(t, webhook.Retried)
	secret := f.setWebhook(t, next.srv.URL)
	f.waitOutcomes(t, webhook.Retried, webhook.Delivered)
	if n := len(old.deliveries()); n != 1 {
		t.Fatalf("old URL got %d attempts, want 1", n)
	}
	ds := next.deliveries()
	if len(ds) != 1 || ds[0].header.Get("Leash-Event-Id") != id {
		t.Fatalf("new URL got %d deliveries", len(ds))
	}
	if err := webhook.Verify(secret, ds[0].header.Get(webhook.SignatureHeader), ds[0].body, time.Minute); err != nil {
		t.Fatalf("new URL's delivery is not signed with the new secret: %v", err)
	}
}

// TestWebhookRemoved: once the webhook is deleted, its waiting events are dropped.
func TestWebhookRemoved(t *testing.T) {
	rc := newReceiver(t, statuses(500))
	f := newFixture(t, webhook.Options{BackoffBase: 300 * time.Millisecond, BackoffMax: 300 * time.Millisecond})
	f.setWebhook(t, rc.srv.URL)
	f.sendTest(t)
	f.waitOutcomes(t, webhook.Retried)
	if err := f.eng.Webhooks.Delete(context.Background(), f.acme); err != nil {
		t.Fatal(err)
	}
	f.waitOutcomes(t, webhook.Retried, webhook.Dropped)
	if n := len(rc.deliveries()); n != 1 || f.outboxLen(t) != 0 {
		t.Fatalf("removed webhook: %d attempts (want 1), outbox %d (want 0)", n, f.outboxLen(t))
	}
}

// TestAccountWithoutWebhooksDropped: an event of an account whose plan has no webhooks
// (e.g. moved to free after it was queued) is dropped, not sent.
func TestAccountWithoutWebhooksDropped(t *testing.T) {
	rc := newReceiver(t, statuses(200))
	f := newFixture(t, webhook.Options{})
	ctx := context.Background()
	if err := f.store.PutWebhook(ctx, "cheap", engine.Webhook{URL: rc.srv.URL, Secret: "s"}); err != nil {
		t.Fatal(err)
	}
	ev := engine.OutboxEvent{ID: "evt_cheap", Account: "cheap", Type: "webhook.test", CreatedMS: time.Now().UnixMilli(), Data: []byte("{}")}
	if _, err := f.store.Enqueue(ctx, ev, ""); err != nil {
		t.Fatal(err)
	}
	f.waitOutcomes(t, webhook.Dropped)
	if n := len(rc.deliveries()); n != 0 {
		t.Fatalf("%d deliveries to an account without webhooks", n)
	}
}

// TestRebindingRefusedAtConnect: a stored webhook whose host name resolves to 127.0.0.1
// when the delivery connects (DNS rebinding: the name passed screening earlier) is
// refused by the dialer under the production address policy; the receiver gets nothing.
func TestRebindingRefusedAtConnect(t *testing.T) {
	rc := newReceiver(t, statuses(200))
	_, port, _ := net.SplitHostPort(rc.srv.Listener.Addr().String())
	f := newFixture(t, webhook.Options{Policy: ssrf.Policy{AllowHTTP: true}, MaxAttempts: 2})
	ctx := context.Background()
	// Stored directly: this is what a name that passed screening and now resolves to
	// loopback looks like to the deliverer. "localhost" resolves through /etc/hosts.
	if err := f.store.PutWebhook(ctx, "acme", engine.Webhook{URL: "http://localhost:" + port + "/", Secret: "s"}); err != nil {
		t.Fatal(err)
	}
	f.sendTest(t)
	f.waitOutcomes(t, webhook.Retried, webhook.Failed)
	if n := len(rc.deliveries()); n != 0 {
		t.Fatalf("the loopback receiver got %d requests", n)
	}
	if !strings.Contains(f.logText(), "ssrf: connection to an address that is not allowed") {
		t.Fatalf("the refusal is not the dialer's:\n%s", f.logText())
	}
}

// TestClaimedByDeadInstance: an event claimed by an instance that died mid-delivery
// (claimed, never acked or retried) is delivered once its visibility timeout passes.
func TestClaimedByDeadInstance(t *testing.T) {
	rc := newReceiver(t, statuses(200))
	var claimed time.Time
	f := newFixtureWith(t, webhook.Options{PollInterval: 20 * time.Millisecond}, func(f *fixture) {
		f.setWebhook(t, rc.srv.URL)
		ctx := context.Background()
		ev := engine.OutboxEvent{ID: "evt_orphan", Account: "acme", Type: "webhook.test", CreatedMS: time.Now().UnixMilli(), Data: []byte("{}")}
		if _, err := f.store.Enqueue(ctx, ev, ""); err != nil {
			t.Fatal(err)
		}
		// The dead instance's claim, hiding the event for 500 ms.
		if evs, err := f.store.Claim(ctx, 1, 500); err != nil || len(evs) != 1 {
			t.Fatalf("Claim: %v %v", evs, err)
		}
		claimed = time.Now()
	})
	f.waitOutcomes(t, webhook.Delivered)
	if el := time.Since(claimed); el < 450*time.Millisecond {
		t.Fatalf("delivered %v after the dead instance's claim, within its visibility timeout", el)
	}
	if ds := rc.deliveries(); len(ds) != 1 || ds[0].header.Get("Leash-Event-Id") != "evt_orphan" {
		t.Fatalf("deliveries %d", len(ds))
	}
}

// TestShutdownRequeues: a delivery still in flight when Run's context ends is cut off
// after ShutdownGrace and left due at once, for the next instance.
func TestShutdownRequeues(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { store.Close() })
	ctx := context.Background()
	if err := store.PutWebhook(ctx, "acme", engine.Webhook{URL: rc.srv.URL, Secret: "s"}); err != nil {
		t.Fatal(err)
	}
	ev := engine.OutboxEvent{ID: "evt_1", Account: "acme", Type: "webhook.test", CreatedMS: 1, Data: []byte("{}")}
	if _, err := store.Enqueue(ctx, ev, ""); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	d := webhook.New(webhook.Options{Store: store, Policy: testPolicy, PollInterval: 10 * time.Millisecond,
		ShutdownGrace: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	go func() { d.Run(runCtx); close(done) }()
	testkit.Eventually(t, "the delivery to start", 10*time.Second, func() bool { return len(rc.deliveries()) == 1 })
	stopped := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if el := time.Since(stopped); el > 2*time.Second {
		t.Fatalf("Run took %v to stop, grace 100ms", el)
	}
	evs, err := store.Claim(ctx, 10, 1000)
	if err != nil || len(evs) != 1 || evs[0].ID != "evt_1" {
		t.Fatalf("after shutdown the event is not due at once: %v %v", evs, err)
	}
}

func TestBackoff(t *testing.T) {
	const s = time.Second
	for _, tt := range []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{1, 0.5, 1 * s}, {2, 0.5, 2 * s}, {3, 0.5, 4 * s}, {9, 0.5, 256 * s},
		{10, 0.5, 300 * s}, {11, 0.5, 300 * s}, {1000, 0.5, 300 * s},
		{1, 0, 800 * time.Millisecond}, {1, 0.999999, 1199999 * time.Microsecond},
		{10, 0, 240 * s}, {12, 0.999999, 359999700 * time.Microsecond},
	} {
		got := webhook.Backoff(s, 5*time.Minute, tt.n, tt.u)
		if (got - tt.want).Abs() > time.Millisecond {
			t.Errorf("Backoff(1s, 5m, %d, %v) = %v, want %v", tt.n, tt.u, got, tt.want)
		}
	}
}

func TestBody(t *testing.T) {
	ev := engine.OutboxEvent{ID: "evt_1", Account: "acme", Type: "usage.quota_exceeded",
		CreatedMS: time.Date(2026, 11, 24, 9, 30, 0, 5e6, time.UTC).UnixMilli(),
		Data:      []byte(`{"month":"2026-11","total":10000001,"quota":10000000}`)}
	b, err := webhook.Body(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"evt_1","type":"usage.quota_exceeded","created_at":"2026-11-24T09:30:00.005Z","account":"acme","data":{"month":"2026-11","total":10000001,"quota":10000000}}`
	if string(b) != want {
		t.Fatalf("Body = %s\nwant   %s", b, want)
	}
}

// TestFailureLogKeepsPathAndQuery: a delivery that fails in transport logs the webhook's
// host, never its path or query, which may carry a token (spec §12.4), on every attempt.
func TestFailureLogKeepsPathAndQuery(t *testing.T) {
	rc := newReceiver(t, func(http.ResponseWriter, *http.Request, int) { panic(http.ErrAbortHandler) })
	f := newFixture(t, webhook.Options{MaxAttempts: 2})
	f.setWebhook(t, rc.srv.URL+"/receiver/T0KEN-s3cr3t-path?token=QUERYSECRET")
	f.sendTest(t)
	f.waitOutcomes(t, webhook.Retried, webhook.Failed)
	log := f.logText()
	if !strings.Contains(log, "will retry") || !strings.Contains(log, "giving up") {
		t.Fatalf("no failure lines:\n%s", log)
	}
	for _, secret := range []string{"T0KEN-s3cr3t-path", "QUERYSECRET", "/receiver"} {
		if strings.Contains(log, secret) {
			t.Errorf("the log carries %q:\n%s", secret, log)
		}
	}
}
