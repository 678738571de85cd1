package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/url"
	"strconv"
	"time"
)

// Webhooks (spec §8): an account's one webhook, and the events Leash sends it. The
// engine owns the configuration (plan gate, URL screening, secret) and decides when an
// event is due; it only puts events in the store's outbox. Delivering them, signed and
// retried, is package webhook's.

// Event types (spec §8.3).
const (
	EventQuotaExceeded  = "usage.quota_exceeded"
	EventHardCapReached = "usage.hard_cap_reached"
	EventTest           = "webhook.test"
)

// Webhook error codes of spec §3.6.
const (
	CodeWebhookNotOnPlan   Code = "webhook_not_on_plan"
	CodeWebhookNotFound    Code = "webhook_not_found"
	CodeWebhookURLRejected Code = "webhook_url_rejected"
)

// WebhookOptions configures webhook URL screening and delivery hand-off.
type WebhookOptions struct {
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

// errNoScreen is PutWebhook's error on an engine built without a URLScreen.
var errNoScreen = errors.New("engine: no webhook URL screen (WebhookOptions.Screen)")

// screenTimeout bounds one URL screening (its DNS lookups).
const screenTimeout = 5 * time.Second

// secretBytes is the size of a webhook secret's random part.
const secretBytes = 32

// WebhooksAllowed reports webhook_not_on_plan for plans without webhooks; the HTTP edge
// calls it before reading the body (spec §3.7).
func WebhooksAllowed(a *Account) error {
	if !a.Plan.Webhooks {
		return newError(CodeWebhookNotOnPlan, "webhooks are not available on plan "+a.Plan.Name)
	}
	return nil
}

func errNoWebhook() error { return newError(CodeWebhookNotFound, "no webhook is configured") }

// Webhook returns the account's webhook URL; none configured is webhook_not_found.
func (e *Engine) Webhook(ctx context.Context, a *Account) (string, error) {
	w, ok, err := e.store.Webhooks.Webhook(ctx, a.ID)
	if err != nil {
		return "", unavailable(err)
	}
	if !ok {
		return "", errNoWebhook()
	}
	return w.URL, nil
}

// PutWebhook screens rawURL and sets it as the account's webhook with a new secret,
// replacing any earlier webhook and secret. The URL stored (and returned) is the
// screened one in canonical form, so deliveries go to the address that was checked.
func (e *Engine) PutWebhook(ctx context.Context, a *Account, rawURL string) (Webhook, error) {
	if err := WebhooksAllowed(a); err != nil {
		return Webhook{}, err
	}
	if err := Active(a); err != nil {
		return Webhook{}, err
	}
	if e.webhooks.Screen == nil {
		return Webhook{}, errNoScreen
	}
	sctx, cancel := context.WithTimeout(ctx, screenTimeout)
	u, err := e.webhooks.Screen(sctx, rawURL)
	cancel()
	if err != nil {
		if re, ok := errors.AsType[*URLRejectedError](err); ok {
			return Webhook{}, newError(CodeWebhookURLRejected, "webhook URL rejected: "+re.Reason)
		}
		if ctx.Err() != nil {
			return Webhook{}, unavailable(err)
		}
		// The lookup ran out of time: the name does not resolve for us (spec §8.2).
		return Webhook{}, newError(CodeWebhookURLRejected, "webhook URL rejected: host does not resolve")
	}
	w := Webhook{URL: u, Secret: newSecret()}
	if err := e.store.Webhooks.PutWebhook(ctx, a.ID, w); err != nil {
		return Webhook{}, unavailable(err)
	}
	host := ""
	if pu, err := url.Parse(u); err == nil {
		host = pu.Host // never the path or query: they may carry the receiver's token
	}
	e.audit.record(ctx, Actor{Account: a.ID}, AuditEntry{Action: AuditWebhookSet, Account: a.ID, AccountCreatedMS: a.CreatedMS, Target: "webhook",
		Details: map[string]string{"host": host}})
	return w, nil
}

// DeleteWebhook removes the account's webhook; removing none is not an error. Events
// still waiting for it are dropped when their delivery finds no webhook.
func (e *Engine) DeleteWebhook(ctx context.Context, a *Account) error {
	deleted, err := e.store.Webhooks.DeleteWebhook(ctx, a.ID)
	if err != nil {
		return unavailable(err)
	}
	if deleted {
		e.audit.record(ctx, Actor{Account: a.ID}, AuditEntry{Action: AuditWebhookDeleted, Account: a.ID, AccountCreatedMS: a.CreatedMS, Target: "webhook"})
	}
	return nil
}

// TestWebhook queues a webhook.test event for the account's webhook and returns its id.
func (e *Engine) TestWebhook(ctx context.Context, a *Account) (string, error) {
	if err := WebhooksAllowed(a); err != nil {
		return "", err
	}
	if err := Active(a); err != nil {
		return "", err // a test delivery is an outbound request made for the account
	}
	if _, ok, err := e.store.Webhooks.Webhook(ctx, a.ID); err != nil {
		return "", unavailable(err)
	} else if !ok {
		return "", errNoWebhook()
	}
	nowMS, err := e.store.Decider.NowMS(ctx)
	if err != nil {
		return "", unavailable(err)
	}
	ev := OutboxEvent{ID: newEventID(), Account: a.ID, Type: EventTest, CreatedMS: nowMS, Data: []byte("{}")}
	if _, err := e.enqueue(ctx, ev, ""); err != nil {
		return "", unavailable(err)
	}
	return ev.ID, nil
}

// enqueue adds ev to the outbox and tells the local deliverer.
func (e *Engine) enqueue(ctx context.Context, ev OutboxEvent, onceKey string) (bool, error) {
	added, err := e.store.Webhooks.Enqueue(ctx, ev, onceKey)
	if added && e.webhooks.Enqueued != nil {
		e.webhooks.Enqueued()
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
func usageEvents(a *Account, total int64) []usageEvent {
	var out []usageEvent
	if total > a.Plan.MonthlyQuota {
		out = append(out, usageEvent{EventQuotaExceeded, "quota", a.Plan.MonthlyQuota})
	}
	if c := a.Plan.HardCap; c != nil && total >= *c {
		out = append(out, usageEvent{EventHardCapReached, "hard_cap", *c})
	}
	return out
}

// notifyUsage queues the usage events of accounts whose month totals crossed a
// threshold. Each is queued at most once per account and month, across all instances:
// the store's once-key decides; this instance also remembers what it queued so it asks
// the store once. It runs under the usage flush lock.
func (e *Engine) notifyUsage(ctx context.Context, nowMS int64, month Month, accounts []*Account, totals []int64) error {
	var firstErr error
	for i, a := range accounts {
		if !a.Plan.Webhooks {
			continue
		}
		for _, ue := range usageEvents(a, totals[i]) {
			k := notifiedKey{a.ID, ue.typ}
			if m, ok := e.tally.notified[k]; ok && m == month {
				continue
			}
			data := `{"month":"` + month.String() + `","total":` + strconv.FormatInt(totals[i], 10) +
				`,"` + ue.threshold + `":` + strconv.FormatInt(ue.limit, 10) + `}`
			ev := OutboxEvent{ID: newEventID(), Account: a.ID, Type: ue.typ, CreatedMS: nowMS, Data: []byte(data)}
			added, err := e.enqueue(ctx, ev, ue.typ+":"+a.ID+":"+month.String())
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			e.tally.notified[k] = month
			if added {
				e.log.Info("webhook event queued", "account", a.ID, "type", ue.typ, "event_id", ev.ID,
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
