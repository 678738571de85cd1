package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/webhook/ssrf"
)

// Delivery (spec §8.5): events wait in the store's outbox; a Deliverer claims
// them, hidden from other instances for a visibility timeout, and POSTs each, signed, to
// its account's current webhook. A 2xx acks the event. A failure (non-2xx, timeout,
// connection error) is retried after a backoff that starts at BackoffBase and doubles up
// to BackoffMax, with ±20% jitter, until MaxAttempts deliveries have failed. An instance
// that dies mid-delivery leaves the event claimed: it is due again once the visibility
// timeout passes, so nothing is lost (a receiver may see it twice; Leash-Event-Id is the
// idempotency key).

// Headers of a delivery besides SignatureHeader.
const (
	EventIDHeader   = "Leash-Event-Id"
	EventTypeHeader = "Leash-Event-Type"
)

// MaxResponseBytes is how much of a receiver's response body a delivery reads.
const MaxResponseBytes = 4 << 10

// Outcome is what became of one delivery attempt, for metrics.
type Outcome string

// The outcomes of a delivery attempt.
const (
	Delivered Outcome = "delivered" // 2xx: the event is acked
	Retried   Outcome = "retried"   // failed; due again after the backoff
	Failed    Outcome = "failed"    // failed for the MaxAttempts-th time: given up
	Dropped   Outcome = "dropped"   // no webhook to send it to (removed, or plan without webhooks)
)

// Outcomes lists every Outcome, so metrics can show each from the start.
func Outcomes() []Outcome { return []Outcome{Delivered, Retried, Failed, Dropped} }

// Options configures a Deliverer. Zero durations and counts take the defaults of
// spec §10.2.
type Options struct {
	// Store holds the outbox and the webhooks; required.
	Store engine.WebhookStore
	// Account finds an event's account; an event of an account that is gone, or whose
	// plan has no webhooks, is dropped. Nil admits every account.
	Account func(id string) (*engine.Account, bool)
	// Policy screens the addresses deliveries connect to (DNS rebinding).
	Policy ssrf.Policy
	// Timeout bounds one delivery attempt; default 10s.
	Timeout time.Duration
	// MaxAttempts bounds the deliveries of one event; default 12.
	MaxAttempts int
	// BackoffBase is the first retry delay, doubled per failure up to BackoffMax;
	// defaults 1s and 5m.
	BackoffBase, BackoffMax time.Duration
	// Workers is how many deliveries run at once on this instance; default 4.
	Workers int
	// PollInterval is how often the outbox is checked for due events; default 1s.
	PollInterval time.Duration
	// Wake, when it receives, makes the Deliverer check the outbox at once (an event was
	// just queued on this instance).
	Wake <-chan struct{}
	// ShutdownGrace is how long deliveries in flight may finish once Run's context is
	// done; default 3s. Those cut off are due again at once.
	ShutdownGrace time.Duration
	// Observe, if set, is told the outcome of every attempt.
	Observe func(Outcome)
	// Depth, if set, is told the outbox's length at every poll.
	Depth func(int64)
	// UserAgent is sent with every delivery; default "Leash-Webhook".
	UserAgent string
	// Logger receives failures; default slog.Default().
	Logger *slog.Logger
}

// Deliverer sends the outbox's events to their webhooks.
type Deliverer struct {
	o          Options
	client     *http.Client
	visibility time.Duration
}

// visibilityMargin is how much longer than an attempt's timeout a claimed event stays
// hidden from other instances.
const visibilityMargin = 5 * time.Second

// storeTimeout bounds each outbox operation of the Deliverer.
const storeTimeout = 2 * time.Second

// New returns a Deliverer; Run starts it.
func New(o Options) *Deliverer {
	if o.Store == nil {
		panic("webhook: Options.Store is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Timeout, 10*time.Second)
	def(&o.BackoffBase, time.Second)
	def(&o.BackoffMax, 5*time.Minute)
	def(&o.PollInterval, time.Second)
	def(&o.ShutdownGrace, 3*time.Second)
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 12
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.UserAgent == "" {
		o.UserAgent = "Leash-Webhook"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Deliverer{o: o, client: o.Policy.Client(o.Timeout), visibility: o.Timeout + visibilityMargin}
}

// Run delivers due events until ctx is done, then lets the deliveries in flight finish
// within ShutdownGrace and returns.
func (d *Deliverer) Run(ctx context.Context) {
	// Deliveries outlive ctx by the grace period; cancel cuts the rest off.
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var wg sync.WaitGroup
	done := make(chan struct{}, d.o.Workers)
	inflight := 0
	tick := time.NewTicker(d.o.PollInterval)
	defer tick.Stop()
	d.depth(ctx)
	for {
		if free := d.o.Workers - inflight; free > 0 {
			for _, ev := range d.claim(ctx, free) {
				inflight++
				wg.Go(func() {
					d.deliver(dctx, ev)
					done <- struct{}{}
				})
			}
		}
		select {
		case <-ctx.Done():
			stopped := make(chan struct{})
			go func() { wg.Wait(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(d.o.ShutdownGrace):
				cancel()
				<-stopped
			}
			return
		case <-done:
			inflight--
		case <-d.o.Wake:
		case <-tick.C:
			d.depth(ctx)
		}
	}
}

func (d *Deliverer) claim(ctx context.Context, max int) []engine.OutboxEvent {
	cctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	evs, err := d.o.Store.Claim(cctx, max, d.visibility.Milliseconds())
	if err != nil && ctx.Err() == nil {
		d.o.Logger.Warn("webhook outbox claim failed; will retry", "err", err)
	}
	return evs
}

func (d *Deliverer) depth(ctx context.Context) {
	if d.o.Depth == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if n, err := d.o.Store.OutboxLen(cctx); err == nil {
		d.o.Depth(n)
	}
}

// deliver makes one attempt at ev and records its outcome in the outbox.
func (d *Deliverer) deliver(ctx context.Context, ev engine.OutboxEvent) {
	log := d.o.Logger.With("event_id", ev.ID, "type", ev.Type, "account", ev.Account, "attempt", ev.Attempts+1)
	if d.o.Account != nil {
		if a, ok := d.o.Account(ev.Account); !ok || !a.Plan.Webhooks {
			log.Info("webhook event dropped: the account has no webhooks")
			d.settle(ev, Dropped, 0, log)
			return
		}
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	w, ok, err := d.o.Store.Webhook(sctx, ev.Account)
	cancel()
	if err != nil {
		// Leave the event claimed: it is due again after the visibility timeout.
		log.Warn("webhook delivery postponed: store unavailable", "err", err)
		return
	}
	if !ok {
		log.Info("webhook event dropped: no webhook configured")
		d.settle(ev, Dropped, 0, log)
		return
	}
	status, err := d.post(ctx, w, ev)
	switch {
	case err == nil && status >= 200 && status < 300:
		d.settle(ev, Delivered, 0, log)
	case ctx.Err() != nil:
		// Cut off by shutdown: due again at once, for this or another instance.
		log.Info("webhook delivery interrupted by shutdown; queued again")
		d.settle(ev, Retried, 0, log)
	case ev.Attempts+1 >= d.o.MaxAttempts:
		log.Warn("webhook delivery failed; giving up", "host", hostOf(w.URL), "status", status, "err", err,
			"max_attempts", d.o.MaxAttempts)
		d.settle(ev, Failed, 0, log)
	default:
		delay := Backoff(d.o.BackoffBase, d.o.BackoffMax, ev.Attempts+1, rand.Float64())
		log.Warn("webhook delivery failed; will retry", "host", hostOf(w.URL), "status", status, "err", err,
			"retry_in_ms", delay.Milliseconds())
		d.settle(ev, Retried, delay, log)
	}
}

// settle acks the event (Delivered, Failed, Dropped) or makes it due again after delay
// (Retried), and reports the outcome.
func (d *Deliverer) settle(ev engine.OutboxEvent, out Outcome, delay time.Duration, log *slog.Logger) {
	// Not the delivery's context: a shutdown must still record what happened.
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	var err error
	if out == Retried {
		err = d.o.Store.Retry(ctx, ev.ID, delay.Milliseconds())
	} else {
		err = d.o.Store.Ack(ctx, ev.ID)
	}
	if err != nil {
		// The event stays claimed and is due again after the visibility timeout: at
		// worst a delivered event is sent twice.
		log.Warn("webhook outbox update failed", "outcome", string(out), "err", err)
	}
	if d.o.Observe != nil {
		d.o.Observe(out)
	}
}

// post sends ev to w, signed, and returns the response status.
func (d *Deliverer) post(ctx context.Context, w engine.Webhook, ev engine.OutboxEvent) (int, error) {
	body, err := Body(ev)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", d.o.UserAgent)
	req.Header.Set(EventIDHeader, ev.ID)
	req.Header.Set(EventTypeHeader, ev.Type)
	req.Header.Set(SignatureHeader, Sign(w.Secret, time.Now(), body))
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, withoutPath(err)
	}
	defer resp.Body.Close()
	// Read a little, so a short answer keeps the connection reusable; never more.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBytes))
	return resp.StatusCode, nil
}

// eventBody is the JSON body of a delivery (spec §8.3).
type eventBody struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt string          `json:"created_at"`
	Account   string          `json:"account"`
	Data      json.RawMessage `json:"data"`
}

// CreatedAtLayout is the RFC 3339 form of created_at: UTC, milliseconds.
const CreatedAtLayout = "2006-01-02T15:04:05.000Z07:00"

// Body returns the JSON body delivered for ev: {id, type, created_at, account, data}.
// It is the same on every attempt.
func Body(ev engine.OutboxEvent) ([]byte, error) {
	return json.Marshal(eventBody{
		ID:        ev.ID,
		Type:      ev.Type,
		CreatedAt: time.UnixMilli(ev.CreatedMS).UTC().Format(CreatedAtLayout),
		Account:   ev.Account,
		Data:      ev.Data,
	})
}

// Backoff is the delay before the retry that follows the n-th failed delivery (n ≥ 1):
// base·2^(n−1), at most max, scaled by a jitter factor 0.8 + 0.4·u for u in [0, 1).
func Backoff(base, max time.Duration, n int, u float64) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return time.Duration(float64(d) * (0.8 + 0.4*u))
}

// withoutPath returns err with the URL that net/http puts in its errors cut to the scheme
// and host: the path and query may carry a token, and the error is logged (spec §12.4).
func withoutPath(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		if u, perr := url.Parse(ue.URL); perr == nil {
			ue.URL = u.Scheme + "://" + u.Host
		} else {
			ue.URL = ""
		}
	}
	return err
}

// hostOf returns the host of a webhook URL, for logs: the path and query may carry a
// receiver's token.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}
