package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leashd/leash/engine"
)

// The webhook and outbox subtests (spec §8.5). A store has one outbox, not one per
// account, so these subtests rely on the factory giving each subtest an empty one (a new
// memory store, or a Redis store with its own key prefix).

func (h *harness) webhook(account string) (engine.Webhook, bool) {
	h.t.Helper()
	w, ok, err := h.s.Webhook(h.ctx, account)
	if err != nil {
		h.t.Fatalf("Webhook(%q): %v", account, err)
	}
	return w, ok
}

func (h *harness) expectWebhook(account string, want *engine.Webhook) {
	h.t.Helper()
	w, ok := h.webhook(account)
	switch {
	case want == nil && ok:
		h.t.Errorf("Webhook(%q) = %+v; want none", account, w)
	case want != nil && (!ok || w != *want):
		h.t.Errorf("Webhook(%q) = %+v, ok %v; want %+v", account, w, ok, *want)
	}
}

func (h *harness) putWebhook(account string, w engine.Webhook) {
	h.t.Helper()
	if err := h.s.PutWebhook(h.ctx, account, w); err != nil {
		h.t.Fatalf("PutWebhook(%q): %v", account, err)
	}
}

func (h *harness) deleteWebhook(account string, deleted bool) {
	h.t.Helper()
	got, err := h.s.DeleteWebhook(h.ctx, account)
	if err != nil {
		h.t.Fatalf("DeleteWebhook(%q): %v", account, err)
	}
	if got != deleted {
		h.t.Errorf("DeleteWebhook(%q) deleted = %v, want %v", account, got, deleted)
	}
}

// invalid checks that err reports an invalid argument.
func (h *harness) invalid(what string, err error) {
	h.t.Helper()
	if !errors.Is(err, engine.ErrInvalidArgument) {
		h.t.Errorf("%s: error %v, want one wrapping engine.ErrInvalidArgument", what, err)
	}
}

func webhookTests() []subtest {
	return []subtest{
		{"PutGetReplaceDelete", func(h *harness) {
			w1 := engine.Webhook{URL: "https://hooks.example.com/leash", Secret: "whsec_1"}
			w2 := engine.Webhook{URL: "https://other.example.com/x?y=1", Secret: "whsec_2"}
			h.expectWebhook(h.a, nil)
			h.putWebhook(h.a, w1)
			h.expectWebhook(h.a, &w1)
			h.putWebhook(h.a, w2)
			h.expectWebhook(h.a, &w2)
			h.deleteWebhook(h.a, true)
			h.expectWebhook(h.a, nil)
			h.deleteWebhook(h.a, false)
			h.deleteWebhook(h.a+"-nobody", false)
			h.putWebhook(h.a, w1)
			h.expectWebhook(h.a, &w1)
			// Webhooks are configuration: they do not expire.
			h.clock.Advance(400 * 24 * time.Hour)
			h.expectWebhook(h.a, &w1)
		}},
		{"PerAccount", func(h *harness) {
			wa := engine.Webhook{URL: "https://a.example.com/", Secret: "sa"}
			wb := engine.Webhook{URL: "https://b.example.com/", Secret: "sb"}
			h.putWebhook(h.a, wa)
			h.expectWebhook(h.b, nil)
			h.deleteWebhook(h.b, false)
			h.putWebhook(h.b, wb)
			h.expectWebhook(h.a, &wa)
			h.expectWebhook(h.b, &wb)
			h.deleteWebhook(h.b, true)
			h.expectWebhook(h.a, &wa)
		}},
		{"Validation", func(h *harness) {
			w := engine.Webhook{URL: "https://a.example.com/", Secret: "s"}
			h.invalid("PutWebhook(empty account)", h.s.PutWebhook(h.ctx, "", w))
			h.invalid("PutWebhook(empty URL)", h.s.PutWebhook(h.ctx, h.a, engine.Webhook{Secret: "s"}))
			_, _, err := h.s.Webhook(h.ctx, "")
			h.invalid("Webhook(empty account)", err)
			_, err = h.s.DeleteWebhook(h.ctx, "")
			h.invalid("DeleteWebhook(empty account)", err)
			h.expectWebhook(h.a, nil)
		}},
	}
}

// event returns an event of account a with id <a>-<name>, created now.
func (h *harness) event(name string) engine.OutboxEvent {
	return engine.OutboxEvent{
		ID: h.a + "-" + name, Account: h.a, Type: "usage.quota_exceeded", CreatedMS: h.clock.NowMS(),
		Data: []byte(`{"name":"` + name + `","month":"2027-01"}`),
	}
}

// tried returns ev with Attempts n, as a claim would return it after n retries.
func tried(ev engine.OutboxEvent, n int) engine.OutboxEvent {
	ev.Attempts = n
	return ev
}

func eventString(ev engine.OutboxEvent) string {
	return fmt.Sprintf("{%s %s %s %d %s attempts=%d}", ev.ID, ev.Account, ev.Type, ev.CreatedMS, ev.Data, ev.Attempts)
}

func eventsString(evs []engine.OutboxEvent) string {
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = eventString(ev)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func (h *harness) enqueue(ev engine.OutboxEvent, onceKey string, added bool) {
	h.t.Helper()
	got, err := h.s.Enqueue(h.ctx, ev, onceKey)
	if err != nil {
		h.t.Fatalf("Enqueue(%s, %q): %v", ev.ID, onceKey, err)
	}
	if got != added {
		h.t.Errorf("at Base%+d: Enqueue(%s, %q) added = %v, want %v", h.clock.NowMS()-baseMS, ev.ID, onceKey, got, added)
	}
}

func (h *harness) claim(max int, visibilityMS int64) []engine.OutboxEvent {
	h.t.Helper()
	evs, err := h.s.Claim(h.ctx, max, visibilityMS)
	if err != nil {
		h.t.Fatalf("Claim(%d, %d): %v", max, visibilityMS, err)
	}
	return evs
}

// expectClaim claims and checks every field of the events returned, in order.
func (h *harness) expectClaim(max int, visibilityMS int64, want ...engine.OutboxEvent) {
	h.t.Helper()
	got := h.claim(max, visibilityMS)
	if !slices.EqualFunc(got, want, func(a, b engine.OutboxEvent) bool {
		return a.ID == b.ID && a.Account == b.Account && a.Type == b.Type && a.CreatedMS == b.CreatedMS &&
			bytes.Equal(a.Data, b.Data) && a.Attempts == b.Attempts
	}) {
		h.t.Errorf("at Base%+d: Claim(%d, %d) = %s; want %s", h.clock.NowMS()-baseMS, max, visibilityMS, eventsString(got), eventsString(want))
	}
}

func (h *harness) ack(id string) {
	h.t.Helper()
	if err := h.s.Ack(h.ctx, id); err != nil {
		h.t.Fatalf("Ack(%q): %v", id, err)
	}
}

func (h *harness) retry(id string, delayMS int64) {
	h.t.Helper()
	if err := h.s.Retry(h.ctx, id, delayMS); err != nil {
		h.t.Fatalf("Retry(%q, %d): %v", id, delayMS, err)
	}
}

func (h *harness) expectOutboxLen(want int64) {
	h.t.Helper()
	n, err := h.s.OutboxLen(h.ctx)
	if err != nil {
		h.t.Fatalf("OutboxLen: %v", err)
	}
	if n != want {
		h.t.Errorf("at Base%+d: OutboxLen = %d, want %d", h.clock.NowMS()-baseMS, n, want)
	}
}

func outboxTests() []subtest {
	return []subtest{
		{"EnqueueClaim", func(h *harness) {
			h.at(0)
			h.expectOutboxLen(0)
			h.expectClaim(10, 1000)
			e := h.event("e")
			e.CreatedMS = baseMS - 5 // the caller's, kept as given
			sent := e
			sent.Attempts = 7 // set by the store: ignored
			h.enqueue(sent, "", true)
			h.expectOutboxLen(1)
			h.expectClaim(10, 1000, e)
			h.expectOutboxLen(1)
		}},
		{"VisibilityTimeout", func(h *harness) {
			h.at(0)
			e := h.event("e")
			h.enqueue(e, "", true)
			h.expectClaim(1, 1000, e)
			h.expectClaim(1, 1000)
			h.at(999)
			h.expectClaim(5, 1000)
			h.at(1000) // due again: claimed and not acked
			h.expectClaim(5, 2000, e)
			h.at(2999)
			h.expectClaim(5, 2000)
			h.at(3000)
			h.expectClaim(5, 0, e) // visibility 0: still due at once
			h.expectClaim(5, 0, e)
			h.expectOutboxLen(1)
		}},
		{"Ack", func(h *harness) {
			h.at(0)
			e1, e2 := h.event("e1"), h.event("e2")
			h.enqueue(e1, "", true)
			h.at(1)
			h.enqueue(e2, "", true)
			h.expectOutboxLen(2)
			h.expectClaim(10, 1000, e1, e2)
			h.ack(e1.ID)
			h.expectOutboxLen(1)
			h.ack(e1.ID) // again: no error
			h.ack(h.a + "-never")
			h.expectOutboxLen(1)
			h.at(1001)
			h.expectClaim(10, 1000, e2)
			h.ack(e2.ID)
			h.expectOutboxLen(0)
			h.at(5000)
			h.expectClaim(10, 1000)
			// An acked id can be enqueued again as a new event.
			h.enqueue(e1, "", true)
			h.expectClaim(10, 1000, e1)
		}},
		{"Retry", func(h *harness) {
			h.at(0)
			e := h.event("e")
			h.enqueue(e, "", true)
			h.expectClaim(1, 1000, e)
			h.at(100)
			h.retry(e.ID, 5000) // due at Base+5100, past the claim's visibility
			h.expectOutboxLen(1)
			h.at(1000)
			h.expectClaim(1, 1000)
			h.at(5099)
			h.expectClaim(1, 1000)
			h.at(5100)
			h.expectClaim(1, 1000, tried(e, 1))
			h.retry(e.ID, 0) // due at once
			h.expectClaim(1, 1000, tried(e, 2))
			h.retry(e.ID, 10)
			h.retry(e.ID, 20) // a retry of an unclaimed event counts too
			h.at(5119)
			h.expectClaim(1, 1000)
			h.at(5120)
			h.expectClaim(1, 1000, tried(e, 4))
			h.retry(h.a+"-never", 10) // unknown: no error, nothing added
			h.expectOutboxLen(1)
			h.ack(e.ID)
			h.retry(e.ID, 10) // acked: no error, not back
			h.expectOutboxLen(0)
			h.at(6000)
			h.expectClaim(1, 1000)
		}},
		{"BatchOldestDueFirst", func(h *harness) {
			var evs []engine.OutboxEvent
			for i := range 5 {
				h.at(int64(i))
				ev := h.event(fmt.Sprintf("e%d", i))
				h.enqueue(ev, "", true)
				evs = append(evs, ev)
			}
			// Same due instant: ties go by id, bytewise, not by insertion.
			h.at(10)
			zb, za := h.event("zb"), h.event("za")
			h.enqueue(zb, "", true)
			h.enqueue(za, "", true)
			h.expectOutboxLen(7)
			h.expectClaim(2, 1000, evs[0], evs[1])
			h.expectClaim(2, 1000, evs[2], evs[3])
			// e0 retried: due at Base+15, after e4 (Base+4), za and zb (Base+10).
			h.retry(evs[0].ID, 5)
			h.at(20)
			h.expectClaim(3, 1000, evs[4], za, zb)
			h.expectClaim(3, 1000, tried(evs[0], 1))
			h.expectClaim(3, 1000)
			// Claimed at Base+10 (e1 to e3) and Base+20 (the rest) with 1000 ms: due again in
			// that order.
			h.at(1020)
			h.expectClaim(100, 1000, evs[1], evs[2], evs[3], tried(evs[0], 1), evs[4], za, zb)
		}},
		{"OnceKey", func(h *harness) {
			h.at(0)
			key := "usage.quota_exceeded:" + h.a + ":2027-01"
			e1, e2, e3, e4 := h.event("e1"), h.event("e2"), h.event("e3"), h.event("e4")
			h.enqueue(e1, key, true)
			h.enqueue(e2, key, false)
			h.expectOutboxLen(1)
			h.enqueue(e3, key+"-other", true)
			h.expectOutboxLen(2)
			h.enqueue(e2, "", true) // no key: always added
			h.expectOutboxLen(3)
			// The key stays used after its event is gone.
			h.ack(e1.ID)
			h.at(24 * 60 * 60 * 1000)
			h.enqueue(e4, key, false)
			h.expectOutboxLen(2)
			h.expectClaim(10, 1000, e2, e3)
		}},
		{"OnceKeyExpires", func(h *harness) {
			h.at(0)
			key := "usage.hard_cap_reached:" + h.a + ":2027-01"
			h.enqueue(h.event("e1"), key, true)
			ttl := engine.OnceKeyTTL.Milliseconds()
			h.at(ttl - 1)
			h.enqueue(h.event("e2"), key, false)
			h.at(ttl)
			h.enqueue(h.event("e3"), key, true)
			h.enqueue(h.event("e4"), key, false) // used again, from now
			h.at(2*ttl - 1)
			h.enqueue(h.event("e5"), key, false)
			h.at(2 * ttl)
			h.enqueue(h.event("e6"), key, true)
			h.expectOutboxLen(3)
		}},
		{"DuplicateID", func(h *harness) {
			h.at(0)
			e := h.event("e")
			h.enqueue(e, "k1", true)
			dup := e
			dup.Type = "webhook.test"
			dup.Data = []byte(`{"other":true}`)
			h.enqueue(dup, "k2", false) // the id is waiting: nothing changes
			h.expectOutboxLen(1)
			h.expectClaim(10, 60_000, e)
			h.retry(e.ID, 60_000)
			h.enqueue(e, "", false) // not reset: attempts and due instant stay
			h.expectClaim(10, 1000)
			h.enqueue(h.event("f"), "k2", true) // k2 was not used up
			h.expectOutboxLen(2)
		}},
		{"DataCompactedAndCopied", func(h *harness) {
			h.at(0)
			e := h.event("e")
			e.Data = []byte(" {\n  \"a\" : [1, 2.50, {\"b\": null}],\t\"s\": \"<&> \\u00e9 \\\"q\\\"\" }\n")
			h.enqueue(e, "", true)
			for i := range e.Data {
				e.Data[i] = 'x' // the caller's buffer is not the store's
			}
			want := e
			want.Data = []byte(`{"a":[1,2.50,{"b":null}],"s":"<&> \u00e9 \"q\""}`)
			got := h.claim(1, 0)
			if len(got) != 1 || !bytes.Equal(got[0].Data, want.Data) {
				h.t.Fatalf("Claim = %s; want data %s", eventsString(got), want.Data)
			}
			for i := range got[0].Data {
				got[0].Data[i] = 'y'
			}
			h.expectClaim(1, 0, want)
		}},
		{"Validation", func(h *harness) {
			h.at(0)
			good := h.event("good")
			bad := []struct {
				name string
				mod  func(*engine.OutboxEvent)
			}{
				{"empty id", func(e *engine.OutboxEvent) { e.ID = "" }},
				{"empty account", func(e *engine.OutboxEvent) { e.Account = "" }},
				{"empty type", func(e *engine.OutboxEvent) { e.Type = "" }},
				{"nil data", func(e *engine.OutboxEvent) { e.Data = nil }},
				{"array data", func(e *engine.OutboxEvent) { e.Data = []byte(`[1]`) }},
				{"string data", func(e *engine.OutboxEvent) { e.Data = []byte(`"x"`) }},
				{"truncated data", func(e *engine.OutboxEvent) { e.Data = []byte(`{"a":`) }},
				{"two objects", func(e *engine.OutboxEvent) { e.Data = []byte(`{} {}`) }},
				{"not JSON", func(e *engine.OutboxEvent) { e.Data = []byte(`{a:1}`) }},
			}
			for _, b := range bad {
				ev := good
				b.mod(&ev)
				added, err := h.s.Enqueue(h.ctx, ev, "key")
				h.invalid("Enqueue("+b.name+")", err)
				if added {
					h.t.Errorf("Enqueue(%s) added = true", b.name)
				}
			}
			h.expectOutboxLen(0)
			h.enqueue(good, "key", true) // the key was not used up by the failures
			_, err := h.s.Claim(h.ctx, 0, 1000)
			h.invalid("Claim(max 0)", err)
			_, err = h.s.Claim(h.ctx, -1, 1000)
			h.invalid("Claim(max -1)", err)
			_, err = h.s.Claim(h.ctx, 1, -1)
			h.invalid("Claim(visibility -1)", err)
			_, err = h.s.Claim(h.ctx, 1, engine.MaxOutboxDelayMS+1)
			h.invalid("Claim(visibility over the maximum)", err)
			h.invalid("Ack(empty id)", h.s.Ack(h.ctx, ""))
			h.invalid("Retry(empty id)", h.s.Retry(h.ctx, "", 10))
			h.invalid("Retry(delay -1)", h.s.Retry(h.ctx, good.ID, -1))
			h.invalid("Retry(delay over the maximum)", h.s.Retry(h.ctx, good.ID, engine.MaxOutboxDelayMS+1))
			// Nothing was claimed or retried by the failures.
			h.expectClaim(10, engine.MaxOutboxDelayMS, good)
			h.at(engine.MaxOutboxDelayMS - 1)
			h.expectClaim(10, 0)
			h.at(engine.MaxOutboxDelayMS)
			h.retry(good.ID, engine.MaxOutboxDelayMS)
			h.at(2 * engine.MaxOutboxDelayMS)
			h.expectClaim(10, 0, tried(good, 1))
		}},
		{"ConcurrentClaims", func(h *harness) {
			h.at(0)
			const n = 60
			want := map[string]bool{}
			for i := range n {
				ev := h.event(fmt.Sprintf("e%02d", i))
				h.enqueue(ev, "", true)
				want[ev.ID] = true
			}
			// Eight workers claim in small batches until the outbox has nothing due: each
			// event is handed out exactly once within its visibility timeout. (They also
			// stop once far more than n were handed out, so a store that hands out events
			// again fails rather than hangs.)
			var mu sync.Mutex
			claimed := map[string]int{}
			total := 0
			var errs []error
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for {
						evs, err := h.s.Claim(h.ctx, 3, 60_000)
						mu.Lock()
						if err != nil {
							errs = append(errs, err)
						}
						for _, ev := range evs {
							claimed[ev.ID]++
						}
						total += len(evs)
						enough := total > 2*n
						mu.Unlock()
						if err != nil || len(evs) == 0 || enough {
							return
						}
					}
				})
			}
			wg.Wait()
			if len(errs) > 0 {
				h.t.Fatalf("Claim: %v", errs[0])
			}
			for id, c := range claimed {
				if c != 1 || !want[id] {
					h.t.Errorf("event %s claimed %d times (known: %v)", id, c, want[id])
				}
			}
			if len(claimed) != n {
				h.t.Errorf("%d events claimed, want %d", len(claimed), n)
			}
			h.expectClaim(100, 60_000)
			h.at(60_000)
			if got := h.claim(100, 60_000); len(got) != n {
				h.t.Errorf("after the visibility timeout %d events claimable, want %d", len(got), n)
			}
		}},
	}
}
