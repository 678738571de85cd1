// Package storetest is the conformance suite every engine.Store must pass: the memory
// store and the Redis store alike (spec §1.3: semantics do not depend on the backend).
//
// Run drives a store only through the engine.Store interface, with a FakeClock the suite
// owns, and checks exact numbers computed by hand from spec §4 to §8 and §11. Every
// subtest uses its own account ids (from its name plus a random suffix), so a store
// backed by one shared server can be used; the factory is still called once per subtest,
// and must give each subtest an empty webhook outbox (a store has one outbox, not one
// per account): a new memory store, or a Redis store with its own key prefix.
package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"

	"github.com/leashd/leash/engine"
)

// BaseMS is the instant (Unix ms) every subtest's clock starts at: 2027-01-16T00:00:00Z,
// a multiple of one day (and so of 1 s, 1 min and 1 h) since the Unix epoch.
const BaseMS int64 = 1_800_057_600_000

// baseMS is BaseMS, short for the tables.
const baseMS = BaseMS

// Run runs the conformance suite. newStore is called once per subtest with the clock the
// store must use; it should register the store's Close with t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T, clock engine.Clock) engine.Store) {
	if want := time.Date(2027, 1, 16, 0, 0, 0, 0, time.UTC).UnixMilli(); BaseMS != want {
		t.Fatalf("BaseMS is %d, want %d", BaseMS, want)
	}
	groups := []struct {
		name  string
		tests []subtest
	}{
		{"FixedWindow", fixedWindowTests()},
		{"SlidingWindow", slidingWindowTests()},
		{"TokenBucket", tokenBucketTests()},
		{"Counters", counterTests()},
		{"Reset", resetTests()},
		{"SpendAll", spendAllTests()},
		{"Overdraft", overdraftTests()},
		{"Leases", leaseTests()},
		{"Rules", ruleTests()},
		{"Usage", usageTests()},
		{"Webhooks", webhookTests()},
		{"Outbox", outboxTests()},
		{"Demand", demandTests()},
		{"Isolation", isolationTests()},
		{"Accounts", accountTests()},
		{"Audit", auditTests()},
		{"Property", propertyTests()},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, st := range g.tests {
				t.Run(st.name, func(t *testing.T) {
					st.run(newHarness(t, newStore))
				})
			}
		})
	}
}

type subtest struct {
	name string
	run  func(h *harness)
}

// harness is one subtest's store, clock and accounts.
type harness struct {
	t     *testing.T
	s     engine.Store
	clock *testkit.FakeClock
	ctx   context.Context
	// a and b are two distinct accounts unique to the subtest.
	a, b string
}

func newHarness(t *testing.T, newStore func(t *testing.T, clock engine.Clock) engine.Store) *harness {
	clock := testkit.NewFakeClock(time.UnixMilli(BaseMS))
	s := newStore(t, clock)
	id := accountID(t.Name())
	return &harness{t: t, s: s, clock: clock, ctx: context.Background(), a: id + "-a", b: id + "-b"}
}

// accountID turns a test name into a valid, unique account id prefix
// ([a-z0-9][a-z0-9_-]{0,63} with room for a suffix).
func accountID(name string) string {
	var sb strings.Builder
	sb.WriteString("t")
	for _, r := range strings.ToLower(name) {
		if sb.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
	}
	return fmt.Sprintf("%s-%08x", sb.String(), rand.Uint32())
}

// at sets the clock to Base + ms.
func (h *harness) at(ms int64) { h.clock.SetMS(baseMS + ms) }

// counter is a counter of account a in namespace "ns".
func (h *harness) counter(alg engine.Algorithm, key string, windowMS int64) engine.Counter {
	return engine.Counter{Account: h.a, Namespace: "ns", Key: key, Algorithm: alg, WindowMS: windowMS}
}

func (h *harness) spend(c engine.Counter, limit, cost int64) engine.Decision {
	h.t.Helper()
	d, err := h.s.Spend(h.ctx, engine.Spend{Counter: c, Limit: limit, Cost: cost})
	if err != nil {
		h.t.Fatalf("Spend(%+v, limit %d, cost %d): %v", c, limit, cost, err)
	}
	return d
}

// expect spends and checks the verdict, the echoed limit and the store's time.
func (h *harness) expect(c engine.Counter, limit, cost int64, allowed bool, remaining, resetMS int64) {
	h.t.Helper()
	d := h.spend(c, limit, cost)
	now := h.clock.NowMS()
	if d.Allowed != allowed || d.Remaining != remaining || d.ResetMS != resetMS || d.Limit != limit || d.NowMS != now {
		h.t.Errorf("at Base%+d: %s %q W=%d limit %d cost %d: got allowed=%v remaining=%d reset_ms=%d limit=%d now=%d; want %v %d %d %d %d",
			now-baseMS, c.Algorithm, c.Key, c.WindowMS, limit, cost,
			d.Allowed, d.Remaining, d.ResetMS, d.Limit, d.NowMS, allowed, remaining, resetMS, limit, now)
	}
}

// yes and no name the expected verdict in tables.
const (
	yes = true
	no  = false
)

// step is one spend at Base + at with its expected verdict.
type step struct {
	at                 int64
	limit, cost        int64
	allowed            bool
	remaining, resetMS int64
}

func (h *harness) steps(c engine.Counter, steps []step) {
	h.t.Helper()
	for _, s := range steps {
		h.at(s.at)
		h.expect(c, s.limit, s.cost, s.allowed, s.remaining, s.resetMS)
	}
}

func (h *harness) reset(c engine.Counter) bool {
	h.t.Helper()
	existed, err := h.s.Reset(h.ctx, c)
	if err != nil {
		h.t.Fatalf("Reset(%+v): %v", c, err)
	}
	return existed
}

func (h *harness) expectReset(c engine.Counter, existed bool) {
	h.t.Helper()
	if got := h.reset(c); got != existed {
		h.t.Errorf("at Base%+d: Reset(%s %q W=%d) existed = %v, want %v", h.clock.NowMS()-baseMS, c.Algorithm, c.Key, c.WindowMS, got, existed)
	}
}
