package memstore

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore/record"
)

// hookStore holds the webhooks, the outbox and the outbox's once-keys behind one mutex:
// they are few and written rarely, off the request path. Without a journal they live in
// the process only: webhooks, waiting events and once-keys are lost on restart (the
// restart-survival promises of spec §8.5 are then the Redis and disk stores'). The zero
// value is ready for use.
type hookStore struct {
	mu       sync.Mutex
	webhooks map[string]engine.Webhook // by account
	events   map[string]*outboxEntry   // by event id
	due      dueHeap                   // the events by due instant, then id
	once     map[string]int64          // once-key → when it is forgotten (Unix ms)
	pruned   int64                     // when once was last pruned (Unix ms)
}

// outboxEntry is one waiting event: the store's own copy, and when it is due.
type outboxEntry struct {
	ev    engine.OutboxEvent
	dueMS int64
	index int // in hookStore.due
}

// dueHeap orders entries by due instant, ties by id (bytewise), as the Redis store's
// sorted set does.
type dueHeap []*outboxEntry

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].dueMS != h[j].dueMS {
		return h[i].dueMS < h[j].dueMS
	}
	return h[i].ev.ID < h[j].ev.ID
}
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *dueHeap) Push(x any) {
	e := x.(*outboxEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}

// lock takes the mutex and makes the maps on first use.
func (hs *hookStore) lock() {
	hs.mu.Lock()
	if hs.events == nil {
		hs.webhooks = make(map[string]engine.Webhook)
		hs.events = make(map[string]*outboxEntry)
		hs.once = make(map[string]int64)
	}
}

// pruneOnce forgets expired once-keys, at most once a minute of store time.
func (hs *hookStore) pruneOnce(now int64, j Journal) {
	if now >= hs.pruned && now-hs.pruned < pruneEveryMS {
		return
	}
	hs.pruned = now
	for k, until := range hs.once {
		if until <= now {
			delete(hs.once, k)
			if j != nil {
				_ = j.Delete(record.Prefixed(nil, record.Once, k)) // Restore drops it if this fails
			}
		}
	}
}

// copyEvent returns a copy of ev that shares nothing with it.
func copyEvent(ev engine.OutboxEvent) engine.OutboxEvent {
	ev.Data = bytes.Clone(ev.Data)
	return ev
}

// Webhook returns the account's webhook; ok is false when none is set.
func (s *outbox) Webhook(_ context.Context, account string) (engine.Webhook, bool, error) {
	if s.closed.Load() {
		return engine.Webhook{}, false, ErrClosed
	}
	if account == "" {
		return engine.Webhook{}, false, fmt.Errorf("memstore: webhook: %w: empty account", engine.ErrInvalidArgument)
	}
	hs := &s.hooks
	hs.lock()
	defer hs.mu.Unlock()
	w, ok := hs.webhooks[account]
	return w, ok, nil
}

// PutWebhook sets the account's webhook, replacing any. It is kept in the process, and
// in the journal if there is one.
func (s *outbox) PutWebhook(_ context.Context, account string, w engine.Webhook) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := engine.ValidateWebhook(account, w); err != nil {
		return fmt.Errorf("memstore: put webhook: %w", err)
	}
	hs := &s.hooks
	hs.lock()
	defer hs.mu.Unlock()
	if s.j != nil {
		if err := s.j.Set(record.Prefixed(nil, record.Webhook, account), record.JSON(w)); err != nil {
			return fmt.Errorf("memstore: put webhook: %w", err)
		}
	}
	hs.webhooks[account] = w
	return nil
}

// DeleteWebhook removes the account's webhook; deleted reports whether one was set.
func (s *outbox) DeleteWebhook(_ context.Context, account string) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	if account == "" {
		return false, fmt.Errorf("memstore: delete webhook: %w: empty account", engine.ErrInvalidArgument)
	}
	hs := &s.hooks
	hs.lock()
	defer hs.mu.Unlock()
	_, ok := hs.webhooks[account]
	if ok && s.j != nil {
		if err := s.j.Delete(record.Prefixed(nil, record.Webhook, account)); err != nil {
			return false, fmt.Errorf("memstore: delete webhook: %w", err)
		}
	}
	delete(hs.webhooks, account)
	return ok, nil
}

// Enqueue adds a copy of ev (Data compacted, Attempts 0) to the outbox, due now; see
// engine.Store. The outbox and its once-keys are kept in the process, and in the journal
// if there is one.
func (s *outbox) Enqueue(_ context.Context, ev engine.OutboxEvent, onceKey string) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	if err := ev.Validate(); err != nil {
		return false, fmt.Errorf("memstore: enqueue: %w", err)
	}
	var data bytes.Buffer
	if err := json.Compact(&data, ev.Data); err != nil {
		return false, fmt.Errorf("memstore: enqueue: %w: %w", engine.ErrInvalidArgument, err)
	}
	ev.Data = data.Bytes()
	ev.Attempts = 0
	now := s.nowMS()
	hs := &s.hooks
	hs.lock()
	defer hs.mu.Unlock()
	if _, dup := hs.events[ev.ID]; dup {
		return false, nil
	}
	until := now + engine.OnceKeyTTL.Milliseconds()
	if onceKey != "" {
		hs.pruneOnce(now, s.j)
		if until, used := hs.once[onceKey]; used && until > now {
			return false, nil
		}
	}
	e := &outboxEntry{ev: ev, dueMS: now}
	if s.j != nil {
		b := s.j.Batch()
		b.Set(record.Prefixed(nil, record.Event, ev.ID), record.EventValue(nil, e.dueMS, e.ev))
		if onceKey != "" {
			b.Set(record.Prefixed(nil, record.Once, onceKey), record.AppendVarints(nil, until))
		}
		if err := b.Commit(); err != nil {
			return false, fmt.Errorf("memstore: enqueue: %w", err)
		}
	}
	if onceKey != "" {
		hs.once[onceKey] = until
	}
	hs.events[ev.ID] = e
	heap.Push(&hs.due, e)
	return true, nil
}

// Claim returns up to max due events, oldest due first (ties by id), and makes each due
// again visibilityMS from now.
func (s *outbox) Claim(_ context.Context, max int, visibilityMS int64) ([]engine.OutboxEvent, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if max < 1 {
		return nil, fmt.Errorf("memstore: claim: %w: max %d is below 1", engine.ErrInvalidArgument, max)
	}
	if err := engine.ValidateOutboxDelay(visibilityMS); err != nil {
		return nil, fmt.Errorf("memstore: claim: %w", err)
	}
	now := s.nowMS()
	hs := &s.hooks
	hs.lock()
	defer hs.mu.Unlock()
	var claimed []*outboxEntry
	for len(claimed) < max && hs.due.Len() > 0 && hs.due[0].dueMS <= now {
		claimed = append(claimed, heap.Pop(&hs.due).(*outboxEntry))
	}
	if s.j != nil && len(claimed) > 0 {
		b := s.j.Batch()
		for _, e := range claimed {
			next := *e
			next.dueMS = now + visibilityMS
			b.Set(record.Prefixed(nil, record.Event, e.ev.ID), record.EventValue(nil, next.dueMS, next.ev))
		}
		if err := b.Commit(); err != nil {
			for _, e := range claimed { // unclaimed: back as they were
				heap.Push(&hs.due, e)
			}
			return nil, fmt.Errorf("memstore: claim: %w", err)
		}
	}
	out := make([]engine.OutboxEvent, len(claimed))
	for i, e := range claimed {
		out[i] = copyEvent(e.ev)
		e.dueMS = now + visibilityMS
		heap.Push(&hs.due, e)
	}
	return out, nil
}

// Ack removes an event from the outbox; an unknown id is no error.
func (s *outbox) Ack(_ context.Context, id string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if id == "" {
		return fmt.Errorf("memstore: ack: %w: empty event id", engine.ErrInvalidArgument)
	}
	hs := &s.hooks
	hs.lock()
	defer hs.mu.Unlock()
	if e, ok := hs.events[id]; ok {
		if s.j != nil {
			if err := s.j.Delete(record.Prefixed(nil, record.Event, id)); err != nil {
				return fmt.Errorf("memstore: ack: %w", err)
			}
		}
		heap.Remove(&hs.due, e.index)
		delete(hs.events, id)
	}
	return nil
}

// Retry counts a failed delivery and makes the event due delayMS from now; an unknown id
// is no error.
func (s *outbox) Retry(_ context.Context, id string, delayMS int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if id == "" {
		return fmt.Errorf("memstore: retry: %w: empty event id", engine.ErrInvalidArgument)
	}
	if err := engine.ValidateOutboxDelay(delayMS); err != nil {
		return fmt.Errorf("memstore: retry: %w", err)
	}
	now := s.nowMS()
	hs := &s.hooks
	hs.lock()
	defer hs.mu.Unlock()
	if e, ok := hs.events[id]; ok {
		if s.j != nil {
			next := *e
			next.ev.Attempts++
			next.dueMS = now + delayMS
			if err := s.j.Set(record.Prefixed(nil, record.Event, id), record.EventValue(nil, next.dueMS, next.ev)); err != nil {
				return fmt.Errorf("memstore: retry: %w", err)
			}
		}
		e.ev.Attempts++
		e.dueMS = now + delayMS
		heap.Fix(&hs.due, e.index)
	}
	return nil
}

// OutboxLen is the number of events in the outbox, due or not.
func (s *outbox) OutboxLen(context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	hs := &s.hooks
	hs.lock()
	defer hs.mu.Unlock()
	return int64(len(hs.events)), nil
}
