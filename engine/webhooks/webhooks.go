// Package webhooks is the capability of webhooks (spec §8): an account's one webhook, and
// the events Leash sends it. It owns the configuration (plan gate, URL screening, secret)
// and decides when a usage event is due; it only puts events in the store's outbox, over
// Port. Delivering them, signed and retried, is package webhook's.
package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/leashd/leash/engine"
)

// Port is what webhooks need of a store: the webhook of the WebhookStore role, the
// outbox's Enqueue, and the store's clock.
type Port interface {
	// Webhook is engine.WebhookStore's.
	Webhook(ctx context.Context, account string) (w engine.Webhook, ok bool, err error)
	// PutWebhook is engine.WebhookStore's.
	PutWebhook(ctx context.Context, account string, w engine.Webhook) error
	// DeleteWebhook is engine.WebhookStore's.
	DeleteWebhook(ctx context.Context, account string) (deleted bool, err error)
	// Enqueue is engine.WebhookStore's.
	Enqueue(ctx context.Context, ev engine.OutboxEvent, onceKey string) (added bool, err error)
	// NowMS is engine.Decider's.
	NowMS(ctx context.Context) (int64, error)
}

// Auditor records a change in the audit log (spec §15.10).
type Auditor interface {
	// Record adds a change made by by.
	Record(ctx context.Context, by engine.Actor, ent engine.AuditEntry)
}

// Webhooks configures accounts' webhooks and queues their events over a Port.
type Webhooks struct {
	store Port
	audit Auditor
	log   *slog.Logger
	opts  Options

	mu       sync.Mutex                   // guards notified
	notified map[notifiedKey]engine.Month // the month each usage event was last queued for
}

// New returns the webhooks capability over store, recording changes in audit.
func New(store Port, audit Auditor, log *slog.Logger, o Options) *Webhooks {
	if log == nil {
		log = slog.Default()
	}
	return &Webhooks{store: store, audit: audit, log: log, opts: o, notified: make(map[notifiedKey]engine.Month)}
}

// Event types (spec §8.3).
const (
	EventQuotaExceeded  = "usage.quota_exceeded"
	EventHardCapReached = "usage.hard_cap_reached"
	EventTest           = "webhook.test"
)

// Options configures webhook URL screening and delivery hand-off.
type Options struct {
	// Screen checks every URL set as a webhook (spec §8.2). Without one, setting a webhook
	// fails with an internal error.
	Screen URLScreen
	// Enqueued, if set, is called after an event was added to the outbox, so a local
	// deliverer can start at once instead of at its next poll. It must not block.
	Enqueued func()
}

// URLScreen checks a webhook URL before it is stored (spec §8.2). It returns the URL in
// the canonical form deliveries will use, so they go to the address that was checked. A
// URL it refuses is an error wrapping a *URLRejectedError; any other error (a host name
// lookup that did not finish in time) is taken as a host that does not resolve, unless
// the caller's ctx ended.
type URLScreen func(ctx context.Context, rawURL string) (canonical string, err error)

// URLRejectedError is a URLScreen's refusal of a URL. Reason says why; it is shown to the
// caller, so it names no resolved address.
type URLRejectedError struct{ Reason string }

// Error returns the refusal with its reason.
func (e *URLRejectedError) Error() string { return "webhook URL rejected: " + e.Reason }

// errNoScreen is Put's error on a capability built without a URLScreen.
var errNoScreen = errors.New("engine: no webhook URL screen (webhooks.Options.Screen)")

// screenTimeout bounds one URL screening (its DNS lookups).
const screenTimeout = 5 * time.Second

// secretBytes is the size of a webhook secret's random part.
const secretBytes = 32

func errNoWebhook() error {
	return engine.NewError(engine.CodeWebhookNotFound, "no webhook is configured")
}

// Get returns the account's webhook URL; none configured is webhook_not_found.
func (w *Webhooks) Get(ctx context.Context, a *engine.Account) (string, error) {
	hook, ok, err := w.store.Webhook(ctx, a.ID)
	if err != nil {
		return "", engine.Unavailable(err)
	}
	if !ok {
		return "", errNoWebhook()
	}
	return hook.URL, nil
}

// Put screens rawURL and sets it as the account's webhook with a new secret,
// replacing any earlier webhook and secret. The URL stored (and returned) is the
// screened one in canonical form, so deliveries go to the address that was checked.
func (w *Webhooks) Put(ctx context.Context, a *engine.Account, rawURL string) (engine.Webhook, error) {
	if err := engine.WebhooksAllowed(a); err != nil {
		return engine.Webhook{}, err
	}
	if err := engine.Active(a); err != nil {
		return engine.Webhook{}, err
	}
	if w.opts.Screen == nil {
		return engine.Webhook{}, errNoScreen
	}
	sctx, cancel := context.WithTimeout(ctx, screenTimeout)
	u, err := w.opts.Screen(sctx, rawURL)
	cancel()
	if err != nil {
		if re, ok := errors.AsType[*URLRejectedError](err); ok {
			return engine.Webhook{}, engine.NewError(engine.CodeWebhookURLRejected, "webhook URL rejected: "+re.Reason)
		}
		if ctx.Err() != nil {
			return engine.Webhook{}, engine.Unavailable(err)
		}
		// The lookup ran out of time: the name does not resolve for us (spec §8.2).
		return engine.Webhook{}, engine.NewError(engine.CodeWebhookURLRejected, "webhook URL rejected: host does not resolve")
	}
	hook := engine.Webhook{URL: u, Secret: newSecret()}
	if err := w.store.PutWebhook(ctx, a.ID, hook); err != nil {
		return engine.Webhook{}, engine.Unavailable(err)
	}
	host := ""
	if pu, err := url.Parse(u); err == nil {
		host = pu.Host // never the path or query: they may carry the receiver's token
	}
	w.audit.Record(ctx, engine.Actor{Account: a.ID}, engine.AuditEntry{Action: engine.AuditWebhookSet, Account: a.ID, AccountCreatedMS: a.CreatedMS, Target: "webhook",
		Details: map[string]string{"host": host}})
	return hook, nil
}

// Delete removes the account's webhook; removing none is not an error. Events
// still waiting for it are dropped when their delivery finds no webhook.
func (w *Webhooks) Delete(ctx context.Context, a *engine.Account) error {
	deleted, err := w.store.DeleteWebhook(ctx, a.ID)
	if err != nil {
		return engine.Unavailable(err)
	}
	if deleted {
		w.audit.Record(ctx, engine.Actor{Account: a.ID}, engine.AuditEntry{Action: engine.AuditWebhookDeleted, Account: a.ID, AccountCreatedMS: a.CreatedMS, Target: "webhook"})
	}
	return nil
}

// Test queues a webhook.test event for the account's webhook and returns its id.
func (w *Webhooks) Test(ctx context.Context, a *engine.Account) (string, error) {
	if err := engine.WebhooksAllowed(a); err != nil {
		return "", err
	}
	if err := engine.Active(a); err != nil {
		return "", err // a test delivery is an outbound request made for the account
	}
	if _, ok, err := w.store.Webhook(ctx, a.ID); err != nil {
		return "", engine.Unavailable(err)
	} else if !ok {
		return "", errNoWebhook()
	}
	nowMS, err := w.store.NowMS(ctx)
	if err != nil {
		return "", engine.Unavailable(err)
	}
	ev := engine.OutboxEvent{ID: newEventID(), Account: a.ID, Type: EventTest, CreatedMS: nowMS, Data: []byte("{}")}
	if _, err := w.enqueue(ctx, ev, ""); err != nil {
		return "", engine.Unavailable(err)
	}
	return ev.ID, nil
}

// enqueue adds ev to the outbox and tells the local deliverer.
func (w *Webhooks) enqueue(ctx context.Context, ev engine.OutboxEvent, onceKey string) (bool, error) {
	added, err := w.store.Enqueue(ctx, ev, onceKey)
	if added && w.opts.Enqueued != nil {
		w.opts.Enqueued()
	}
	return added, err
}

// usageEvent is a usage event an account may be due: which, and whether its total is
// past the threshold.
type usageEvent struct {
	typ       string
	threshold string // the data field naming the threshold
	limit     int64
}

// usageEvents returns the usage events account a is due at month total: quota_exceeded
// once the total is over the quota (over_quota), hard_cap_reached once it reached the
// hard cap (the point where requests are refused).
func usageEvents(a *engine.Account, total int64) []usageEvent {
	var out []usageEvent
	if total > a.Plan.MonthlyQuota {
		out = append(out, usageEvent{EventQuotaExceeded, "quota", a.Plan.MonthlyQuota})
	}
	if c := a.Plan.HardCap; c != nil && total >= *c {
		out = append(out, usageEvent{EventHardCapReached, "hard_cap", *c})
	}
	return out
}

// NotifyUsage queues the usage events of accounts whose month totals crossed a
// threshold. Each is queued at most once per account and month, across all instances:
// the store's once-key decides; this instance also remembers what it queued so it asks
// the store once. The usage capability calls it after each refresh of the month totals.
func (w *Webhooks) NotifyUsage(ctx context.Context, nowMS int64, month engine.Month, accounts []*engine.Account, totals []int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var firstErr error
	for i, a := range accounts {
		if !a.Plan.Webhooks {
			continue
		}
		for _, ue := range usageEvents(a, totals[i]) {
			k := notifiedKey{a.ID, ue.typ}
			if m, ok := w.notified[k]; ok && m == month {
				continue
			}
			data := `{"month":"` + month.String() + `","total":` + strconv.FormatInt(totals[i], 10) +
				`,"` + ue.threshold + `":` + strconv.FormatInt(ue.limit, 10) + `}`
			ev := engine.OutboxEvent{ID: newEventID(), Account: a.ID, Type: ue.typ, CreatedMS: nowMS, Data: []byte(data)}
			added, err := w.enqueue(ctx, ev, ue.typ+":"+a.ID+":"+month.String())
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			w.notified[k] = month
			if added {
				w.log.Info("webhook event queued", "account", a.ID, "type", ue.typ, "event_id", ev.ID,
					"month", month.String(), "total", totals[i])
			}
		}
	}
	return firstErr
}

// notifiedKey names a usage event of one account.
type notifiedKey struct{ account, typ string }

// newSecret returns a webhook signing secret: "whsec_" and 32 random bytes in unpadded
// base64url.
func newSecret() string {
	var b [secretBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// newEventID returns a fresh event id: "evt_" and 16 random bytes in hex.
func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "evt_" + hex.EncodeToString(b[:])
}
