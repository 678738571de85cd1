package redisstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
)

// Webhooks and the outbox (spec §8.1, §8.5). An account's webhook is one JSON string under its
// own tag, read and written with single commands (GET, SET, DEL) and kept, like rules,
// until deleted. The outbox is one slot, {P:ob}: a sorted set of due instants, a hash of
// event records, and the Enqueue once-keys; each write is one script (lua/outbox_*.lua),
// so concurrent instances never claim one event twice within its visibility timeout and a
// once-key admits one event however many instances race for it. Events have no TTL: they
// stay until acked (the keys vanish when the outbox is empty); once-keys expire.

// webhookJSON is a webhook as stored in Redis.
type webhookJSON struct {
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

// eventRecord is an outbox event as stored in the records hash (its id is the field).
// Attempts must stay the first field: lua/outbox_retry.lua rewrites the record's
// {"attempts":N, prefix in place and leaves the rest byte for byte.
type eventRecord struct {
	Attempts  int             `json:"attempts"`
	Account   string          `json:"account"`
	Type      string          `json:"type"`
	CreatedMS int64           `json:"created_ms"`
	Data      json.RawMessage `json:"data"`
}

// encodeEvent returns ev's record with Attempts 0 and Data compacted (no HTML escaping,
// so the data reads back as the memory store returns it).
func encodeEvent(ev engine.OutboxEvent) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(eventRecord{Account: ev.Account, Type: ev.Type, CreatedMS: ev.CreatedMS, Data: ev.Data}); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte{'\n'})), nil
}

func decodeEvent(id string, rec any) (engine.OutboxEvent, error) {
	str, ok := rec.(string)
	if !ok {
		return engine.OutboxEvent{}, errors.New("redisstore: claim: malformed script reply")
	}
	var r eventRecord
	if err := json.Unmarshal([]byte(str), &r); err != nil {
		return engine.OutboxEvent{}, fmt.Errorf("redisstore: stored outbox event %q is not valid JSON: %w", id, err)
	}
	return engine.OutboxEvent{ID: id, Account: r.Account, Type: r.Type, CreatedMS: r.CreatedMS, Data: r.Data, Attempts: r.Attempts}, nil
}

// Webhook returns the account's webhook (one GET); ok is false when none is set.
func (s *WebhookStore) Webhook(ctx context.Context, account string) (engine.Webhook, bool, error) {
	if s.closed.Load() {
		return engine.Webhook{}, false, errClosed
	}
	if account == "" {
		return engine.Webhook{}, false, fmt.Errorf("redisstore: webhook: %w: empty account", engine.ErrInvalidArgument)
	}
	ctx = s.opCtx(ctx)
	v, err := s.client.Get(ctx, s.keys.Webhook(account)).Bytes()
	if errors.Is(err, redis.Nil) {
		return engine.Webhook{}, false, nil
	}
	if err != nil {
		return engine.Webhook{}, false, err
	}
	var j webhookJSON
	if err := json.Unmarshal(v, &j); err != nil {
		return engine.Webhook{}, false, fmt.Errorf("redisstore: stored webhook is not valid JSON: %w", err)
	}
	return engine.Webhook{URL: j.URL, Secret: j.Secret}, true, nil
}

// PutWebhook sets the account's webhook, replacing any (one SET, no TTL: configuration
// persists like rules).
func (s *WebhookStore) PutWebhook(ctx context.Context, account string, w engine.Webhook) error {
	if s.closed.Load() {
		return errClosed
	}
	if err := engine.ValidateWebhook(account, w); err != nil {
		return fmt.Errorf("redisstore: put webhook: %w", err)
	}
	b, err := json.Marshal(webhookJSON{URL: w.URL, Secret: w.Secret})
	if err != nil {
		return err
	}
	ctx = s.opCtx(ctx)
	return s.client.Set(ctx, s.keys.Webhook(account), b, 0).Err()
}

// DeleteWebhook removes the account's webhook (one DEL); deleted reports whether one was
// set.
func (s *WebhookStore) DeleteWebhook(ctx context.Context, account string) (bool, error) {
	if s.closed.Load() {
		return false, errClosed
	}
	if account == "" {
		return false, fmt.Errorf("redisstore: delete webhook: %w: empty account", engine.ErrInvalidArgument)
	}
	ctx = s.opCtx(ctx)
	n, err := s.client.Del(ctx, s.keys.Webhook(account)).Result()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// Enqueue adds ev to the outbox, due now, with one EVALSHA of lua/outbox_enqueue.lua,
// which also checks and sets the once-key; see engine.Store.
func (s *WebhookStore) Enqueue(ctx context.Context, ev engine.OutboxEvent, onceKey string) (bool, error) {
	if err := ev.Validate(); err != nil {
		return false, fmt.Errorf("redisstore: enqueue: %w", err)
	}
	rec, err := encodeEvent(ev)
	if err != nil {
		return false, fmt.Errorf("redisstore: enqueue: %w", err)
	}
	keys := []string{s.keys.OutboxDue(), s.keys.OutboxEvents()}
	if onceKey != "" {
		keys = append(keys, s.keys.OutboxOnce(onceKey))
	}
	ctx = s.opCtx(ctx)
	cmd, err := s.eval(ctx, s.scripts.OutboxEnqueue, keys, s.nowArg(), s.slack, ev.ID, rec, engine.OnceKeyTTL.Milliseconds())
	if err != nil {
		return false, err
	}
	n, err := cmd.Int64()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// Claim takes up to max due events and hides them for visibilityMS with one EVALSHA of
// lua/outbox_claim.lua.
func (s *WebhookStore) Claim(ctx context.Context, max int, visibilityMS int64) ([]engine.OutboxEvent, error) {
	if max < 1 {
		return nil, fmt.Errorf("redisstore: claim: %w: max %d is below 1", engine.ErrInvalidArgument, max)
	}
	if err := engine.ValidateOutboxDelay(visibilityMS); err != nil {
		return nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	ctx = s.opCtx(ctx)
	cmd, err := s.eval(ctx, s.scripts.OutboxClaim, []string{s.keys.OutboxDue(), s.keys.OutboxEvents()},
		s.nowArg(), s.slack, max, visibilityMS)
	if err != nil {
		return nil, err
	}
	res, err := cmd.Slice()
	if err != nil {
		return nil, err
	}
	if len(res)%2 != 0 || len(res)/2 > max {
		return nil, errors.New("redisstore: claim: malformed script reply")
	}
	out := make([]engine.OutboxEvent, 0, len(res)/2)
	for i := 0; i < len(res); i += 2 {
		id, ok := res[i].(string)
		if !ok {
			return nil, errors.New("redisstore: claim: malformed script reply")
		}
		ev, err := decodeEvent(id, res[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// Ack removes an event from the outbox with one EVALSHA of lua/outbox_ack.lua; an unknown
// id is no error.
func (s *WebhookStore) Ack(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("redisstore: ack: %w: empty event id", engine.ErrInvalidArgument)
	}
	ctx = s.opCtx(ctx)
	_, err := s.eval(ctx, s.scripts.OutboxAck, []string{s.keys.OutboxDue(), s.keys.OutboxEvents()}, id)
	return err
}

// Retry counts a failed delivery and makes the event due delayMS from now with one
// EVALSHA of lua/outbox_retry.lua; an unknown id is no error.
func (s *WebhookStore) Retry(ctx context.Context, id string, delayMS int64) error {
	if id == "" {
		return fmt.Errorf("redisstore: retry: %w: empty event id", engine.ErrInvalidArgument)
	}
	if err := engine.ValidateOutboxDelay(delayMS); err != nil {
		return fmt.Errorf("redisstore: retry: %w", err)
	}
	ctx = s.opCtx(ctx)
	_, err := s.eval(ctx, s.scripts.OutboxRetry, []string{s.keys.OutboxDue(), s.keys.OutboxEvents()},
		s.nowArg(), s.slack, id, delayMS)
	return err
}

// OutboxLen is the number of events in the outbox, due or not (one ZCARD).
func (s *WebhookStore) OutboxLen(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	ctx = s.opCtx(ctx)
	return s.client.ZCard(ctx, s.keys.OutboxDue()).Result()
}
