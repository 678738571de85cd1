package client

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/leashd/leash/wire"
)

// The algorithms of spec §4.6–§4.8 and the lease algorithm of rules (spec §6.1).
const (
	FixedWindow     = "fixed_window"
	SlidingWindow   = "sliding_window"
	TokenBucket     = "token_bucket"
	ConcurrentLimit = "concurrent_limit"
)

// Option sets an optional field of a check, reset or lease acquisition. A field not set
// comes from the namespace's rule (spec §4.2, §5.1).
type Option func(*params)

type params struct {
	algorithm string
	limit     *int64
	windowMS  *int64
	cost      *int64
	overdraft bool
}

// WithAlgorithm sets the algorithm of a check or reset (FixedWindow, SlidingWindow or
// TokenBucket).
func WithAlgorithm(a string) Option { return func(p *params) { p.algorithm = a } }

// WithLimit sets the limit inline (1 … 1,000,000,000).
func WithLimit(n int64) Option { return func(p *params) { p.limit = &n } }

// WithWindowMS sets window_ms inline: a check's window, a lease's time-to-live.
func WithWindowMS(ms int64) Option { return func(p *params) { p.windowMS = &ms } }

// WithWindow is WithWindowMS in a time.Duration (whole milliseconds).
func WithWindow(d time.Duration) Option { return WithWindowMS(d.Milliseconds()) }

// WithCost sets the units a check spends (default 1; 0 looks without spending, spec §4.3).
func WithCost(n int64) Option { return func(p *params) { p.cost = &n } }

// WithOverdraft makes a check count its cost even when it is denied (spec §4.12): the cost
// may then exceed the limit, up to 2,000,000,000.
func WithOverdraft() Option { return func(p *params) { p.overdraft = true } }

func collect(opts []Option) params {
	var p params
	for _, o := range opts {
		o(&p)
	}
	return p
}

// limitRequest is the body of a check or reset with opts applied.
func limitRequest(namespace, key string, p params) wire.LimitRequest {
	r := wire.LimitRequest{Namespace: namespace, Key: key, Limit: wire.SomePtr(p.limit),
		WindowMS: wire.SomePtr(p.windowMS), Cost: wire.SomePtr(p.cost), Overdraft: p.overdraft}
	if p.algorithm != "" {
		r.Algorithm = wire.Some(p.algorithm)
	}
	return r
}

// LimitResult is the answer to a rate check (spec §4.1). A denial is a result with
// Allowed false, not an error.
type LimitResult wire.LimitResult

// Reset returns ResetMS as a duration.
func (r *LimitResult) Reset() time.Duration { return time.Duration(r.ResetMS) * time.Millisecond }

// RetryAfter is the Retry-After the service sends with a denial: ResetMS in whole seconds
// rounded up, at least 1 s (0 when allowed).
func (r *LimitResult) RetryAfter() time.Duration {
	if r.Allowed {
		return 0
	}
	return time.Duration(retryAfterSeconds(r.ResetMS)) * time.Second
}

// retryAfterSeconds is reset_ms in whole seconds rounded up, at least 1 (spec §4.1).
func retryAfterSeconds(ms int64) int64 { return max(1, (ms+999)/1000) }

// Limit checks and spends one rate limit on (namespace, key): POST /v1/limit. Never
// retried.
func (c *Client) Limit(ctx context.Context, namespace, key string, opts ...Option) (*LimitResult, error) {
	var out wire.LimitResult
	_, err := c.call(ctx, http.MethodPost, "/v1/limit", limitRequest(namespace, key, collect(opts)), false, &out)
	if err != nil {
		return nil, err
	}
	return (*LimitResult)(&out), nil
}

// Reset clears one counter: POST /v1/limit/reset (spec §4.11). It reports false when the
// counter held no state (the service's 404 key_not_found). Retried when safe.
func (c *Client) Reset(ctx context.Context, namespace, key string, opts ...Option) (bool, error) {
	p := collect(opts)
	p.cost, p.overdraft = nil, false
	var out wire.ResetResult
	_, err := c.call(ctx, http.MethodPost, "/v1/limit/reset", limitRequest(namespace, key, p), true, &out)
	if IsCode(err, CodeKeyNotFound) {
		return false, nil
	}
	return out.Reset, err
}

// Rule is a namespace's rule (spec §6.2), sent as is and read from wire.Rule. For
// ConcurrentLimit, Limit is the most leases held at once and WindowMS the lease
// time-to-live. Its members are wire.RuleRequest's; TestClientTypesMatchTheWire holds
// them to the wire's.
type Rule struct {
	// Namespace is set in answers; the path names it in requests.
	Namespace string `json:"namespace,omitempty"`
	Algorithm string `json:"algorithm"`
	Limit     int64  `json:"limit"`
	WindowMS  int64  `json:"window_ms"`
	// Name is optional ("" is none; null in answers).
	Name string `json:"name,omitempty"`
	// Overrides give single keys of the namespace their own limit.
	Overrides []Override `json:"overrides,omitempty"`
}

// Override is one key's own limit (and optionally window) inside a rule.
type Override = wire.Override

// ruleOf is a rule as the service answered it: no name is "".
func ruleOf(r *wire.Rule) *Rule {
	out := &Rule{Namespace: r.Namespace, Algorithm: r.Algorithm, Limit: r.Limit, WindowMS: r.WindowMS, Overrides: r.Overrides}
	if r.Name != nil {
		out.Name = *r.Name
	}
	return out
}

// The rule kinds of DELETE /v1/namespaces/{ns}/rules/{kind} (spec §6.5).
const (
	RuleKindRate       = "rate"
	RuleKindConcurrent = "concurrent"
)

// SetRule writes the rule in its algorithm's slot: POST /v1/namespaces/{ns}/rules. created
// is true when the slot was empty. Never retried.
func (c *Client) SetRule(ctx context.Context, namespace string, r Rule) (rule *Rule, created bool, err error) {
	r.Namespace = ""
	var out wire.Rule
	status, err := c.call(ctx, http.MethodPost, "/v1/namespaces/"+escape(namespace)+"/rules", r, false, &out)
	if err != nil {
		return nil, false, err
	}
	return ruleOf(&out), status == http.StatusCreated, nil
}

// Rules returns the namespace's rules, the rate rule first: GET /v1/namespaces/{ns}/rules.
func (c *Client) Rules(ctx context.Context, namespace string) ([]Rule, error) {
	var out wire.RuleList
	if _, err := c.call(ctx, http.MethodGet, "/v1/namespaces/"+escape(namespace)+"/rules", nil, true, &out); err != nil {
		return nil, err
	}
	rules := make([]Rule, len(out.Rules))
	for i := range out.Rules {
		rules[i] = *ruleOf(&out.Rules[i])
	}
	return rules, nil
}

// DeleteRule removes the rule of kind (RuleKindRate or RuleKindConcurrent); it reports
// whether there was one. DELETE /v1/namespaces/{ns}/rules/{kind}.
func (c *Client) DeleteRule(ctx context.Context, namespace, kind string) (bool, error) {
	var out wire.DeleteResult
	_, err := c.call(ctx, http.MethodDelete, "/v1/namespaces/"+escape(namespace)+"/rules/"+escape(kind), nil, true, &out)
	return out.Deleted, err
}

// Stats is a namespace's usage (spec §7.2).
type Stats = wire.Stats

// DayUsage is one UTC day of a namespace's usage.
type DayUsage = wire.DayStats

// MonthUsage is the account's current UTC month over all namespaces.
type MonthUsage = wire.MonthStats

// Stats returns the namespace's last 30 days and the account's month:
// GET /v1/namespaces/{ns}/stats.
func (c *Client) Stats(ctx context.Context, namespace string) (*Stats, error) {
	var out Stats
	if _, err := c.call(ctx, http.MethodGet, "/v1/namespaces/"+escape(namespace)+"/stats", nil, true, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Webhook is the account's webhook (spec §8.1). Secret is set only in SetWebhook's answer.
type Webhook = wire.Webhook

// Webhook returns the account's webhook; ok is false when none is set.
// GET /v1/webhook.
func (c *Client) Webhook(ctx context.Context) (w *Webhook, ok bool, err error) {
	var out Webhook
	_, err = c.call(ctx, http.MethodGet, "/v1/webhook", nil, true, &out)
	if IsCode(err, CodeWebhookNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &out, true, nil
}

// SetWebhook sets the account's webhook and returns it with its new signing secret (shown
// only here): PUT /v1/webhook. Never retried (each call makes a new secret).
func (c *Client) SetWebhook(ctx context.Context, url string) (*Webhook, error) {
	var out Webhook
	if _, err := c.call(ctx, http.MethodPut, "/v1/webhook", wire.WebhookRequest{URL: wire.Some(url)}, false, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteWebhook removes the account's webhook (no error when none is set):
// DELETE /v1/webhook.
func (c *Client) DeleteWebhook(ctx context.Context) error {
	_, err := c.call(ctx, http.MethodDelete, "/v1/webhook", nil, true, nil)
	return err
}

// TestWebhook queues a webhook.test event and returns its id: POST /v1/webhook/test.
// Never retried.
func (c *Client) TestWebhook(ctx context.Context) (eventID string, err error) {
	var out wire.WebhookTestResult
	if _, err := c.call(ctx, http.MethodPost, "/v1/webhook/test", nil, false, &out); err != nil {
		return "", err
	}
	if out.EventID == "" {
		return "", errors.New("leash client: POST /v1/webhook/test: no event_id in the answer")
	}
	return out.EventID, nil
}
