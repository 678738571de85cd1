// Package storetest is the conformance suite every store must pass: the memory store and
// the Redis store alike (spec §1.3: semantics do not depend on the backend).
//
// It runs per port: RunDecider, RunPinger, RunRules, RunUsage, RunWebhooks, RunDemand,
// RunAccounts and RunAudit each take a constructor of that port alone, so a backend can
// be checked port by port; RunEngine drives the engine over a whole store; Run is the sum
// of them all over one engine.Store. The suite uses a store only through the engine's ports,
// with a FakeClock it owns, and checks exact numbers computed by hand from spec §4 to §8
// and §11. Every subtest uses its own account ids (from its name plus a random suffix),
// so a store backed by one shared server can be used; the constructor is still called
// once per subtest, and must give each subtest an empty webhook outbox (a store has one
// outbox, not one per account): a new memory store, or a Redis store with its own key
// prefix.
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

// Constructor makes one subtest's store (or one port of it, P) with the clock it must use;
// it should register the store's Close with t.Cleanup.
type Constructor[P any] func(t *testing.T, clock engine.Clock) P

// Run runs the whole conformance suite: every port's run below on the ports of one
// engine.Store, and RunEngine on the whole store. A store that is not also an
// engine.AccountStore and an engine.AuditStore fails those ports' subtests.
func Run(t *testing.T, newStore Constructor[engine.Store], opts ...Option) {
	RunDecider(t, func(t *testing.T, c engine.Clock) engine.Decider { return newStore(t, c) }, opts...)
	RunPinger(t, func(t *testing.T, c engine.Clock) engine.Pinger { return newStore(t, c) })
	RunRules(t, func(t *testing.T, c engine.Clock) engine.RuleStore { return newStore(t, c) })
	RunUsage(t, func(t *testing.T, c engine.Clock) engine.UsageStore { return newStore(t, c) })
	RunWebhooks(t, func(t *testing.T, c engine.Clock) engine.WebhookStore { return newStore(t, c) })
	RunDemand(t, func(t *testing.T, c engine.Clock) engine.DemandStore { return newStore(t, c) })
	RunAccounts(t, func(t *testing.T, c engine.Clock) engine.AccountStore {
		return portOf[engine.AccountStore](t, newStore(t, c))
	})
	RunAudit(t, func(t *testing.T, c engine.Clock) engine.AuditStore {
		return portOf[engine.AuditStore](t, newStore(t, c))
	})
	RunEngine(t, newStore)
}

// RunEngine runs the engine over a whole store, the one part of the suite that needs
// every port at once: the admin API's accounts beside configured ones, the keys they
// issue, and a suspended account's decisions. A store that is not also an
// engine.AccountStore fails it.
func RunEngine(t *testing.T, newStore Constructor[engine.Store]) {
	run(t, nil, []group{{"Engine", []subtest{{"AccountsConfigReadOnly", engineAccountsTest}}}}, func(t *testing.T, c engine.Clock) ports {
		s := newStore(t, c)
		return ports{Decider: s, RuleStore: s, UsageStore: s, WebhookStore: s, DemandStore: s, Pinger: s,
			AccountStore: portOf[engine.AccountStore](t, s), store: s}
	})
}

// portOf returns s as the port P, and fails the subtest when s is not one.
func portOf[P any](t *testing.T, s engine.Store) P {
	t.Helper()
	p, ok := s.(P)
	if !ok {
		t.Fatalf("%T does not implement %T", s, (*P)(nil))
	}
	return p
}

// Option changes how a port's suite runs.
type Option func(*options)

type options struct {
	// sample: the property tests run one case in sample (1: every case).
	sample int
}

// Sample runs the property tests on one case in n of their random cases, for a variant
// of a store whose paths a full run already covers (the same scripts, merged or reserved
// differently): every other subtest runs whole. n < 1 counts as 1.
func Sample(n int) Option { return func(o *options) { o.sample = max(1, n) } }

// RunDecider runs the suite of the decision port: the three algorithms, counters, resets,
// SpendAll, overdraft, leases (and their account-wide read) and the properties.
func RunDecider(t *testing.T, newDecider Constructor[engine.Decider], opts ...Option) {
	run(t, opts, []group{
		{"FixedWindow", fixedWindowTests()},
		{"SlidingWindow", slidingWindowTests()},
		{"TokenBucket", tokenBucketTests()},
		{"Counters", append(counterTests(), named(isolationTests(), "Counters", "Isolation"))},
		{"Reset", resetTests()},
		{"SpendAll", spendAllTests()},
		{"Overdraft", overdraftTests()},
		{"Leases", append(leaseTests(), named(isolationTests(), "Leases", "Isolation"), named(viewTests(), "HeldLeases", "Held"))},
		{"Property", propertyTests()},
	}, func(t *testing.T, c engine.Clock) ports { return ports{Decider: newDecider(t, c)} })
}

// RunPinger runs the suite of the health port.
func RunPinger(t *testing.T, newPinger Constructor[engine.Pinger]) {
	run(t, nil, []group{{"Ping", pingTests()}}, func(t *testing.T, c engine.Clock) ports { return ports{Pinger: newPinger(t, c)} })
}

// RunRules runs the suite of the rules port, its namespace list included.
func RunRules(t *testing.T, newRules Constructor[engine.RuleStore]) {
	run(t, nil, []group{
		{"Rules", append(ruleTests(), named(isolationTests(), "Rules", "Isolation"), named(viewTests(), "RuleNamespaces", "Namespaces"))},
	}, func(t *testing.T, c engine.Clock) ports { return ports{RuleStore: newRules(t, c)} })
}

// RunUsage runs the suite of the usage port, an account's usage included.
func RunUsage(t *testing.T, newUsage Constructor[engine.UsageStore]) {
	run(t, nil, []group{
		{"Usage", append(usageTests(), named(isolationTests(), "Usage", "Isolation"), named(viewTests(), "AccountUsage", "Account"))},
	}, func(t *testing.T, c engine.Clock) ports { return ports{UsageStore: newUsage(t, c)} })
}

// RunWebhooks runs the suite of the webhooks port: webhooks and the outbox. Each subtest
// needs a store with an empty outbox.
func RunWebhooks(t *testing.T, newWebhooks Constructor[engine.WebhookStore]) {
	run(t, nil, []group{{"Webhooks", webhookTests()}, {"Outbox", outboxTests()}},
		func(t *testing.T, c engine.Clock) ports { return ports{WebhookStore: newWebhooks(t, c)} })
}

// RunDemand runs the suite of the RLQS demand port.
func RunDemand(t *testing.T, newDemand Constructor[engine.DemandStore]) {
	run(t, nil, []group{{"Demand", demandTests()}}, func(t *testing.T, c engine.Clock) ports { return ports{DemandStore: newDemand(t, c)} })
}

// RunAccounts runs the suite of the admin API's accounts and keys.
func RunAccounts(t *testing.T, newAccounts Constructor[engine.AccountStore]) {
	run(t, nil, []group{{"Accounts", accountTests()}}, func(t *testing.T, c engine.Clock) ports { return ports{AccountStore: newAccounts(t, c)} })
}

// RunAudit runs the suite of the audit log.
func RunAudit(t *testing.T, newAudit Constructor[engine.AuditStore]) {
	run(t, nil, []group{{"Audit", auditTests()}}, func(t *testing.T, c engine.Clock) ports { return ports{AuditStore: newAudit(t, c)} })
}

// group is a named list of subtests.
type group struct {
	name  string
	tests []subtest
}

// run runs groups, each subtest on the ports newPorts makes for it.
func run(t *testing.T, opts []Option, groups []group, newPorts Constructor[ports]) {
	o := options{sample: 1}
	for _, opt := range opts {
		opt(&o)
	}
	if want := time.Date(2027, 1, 16, 0, 0, 0, 0, time.UTC).UnixMilli(); BaseMS != want {
		t.Fatalf("BaseMS is %d, want %d", BaseMS, want)
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, st := range g.tests {
				t.Run(st.name, func(t *testing.T) {
					h := newHarness(t, newPorts)
					h.sample = o.sample
					st.run(h)
				})
			}
		})
	}
}

type subtest struct {
	name string
	run  func(h *harness)
}

// named returns the subtest of tests called name, renamed as.
func named(tests []subtest, name, as string) subtest {
	for _, st := range tests {
		if st.name == name {
			return subtest{as, st.run}
		}
	}
	panic("storetest: no subtest " + name)
}

// ports are the ports a subtest may use: a port's run sets only its own, so a subtest
// that strays to another fails at once (a nil interface).
type ports struct {
	engine.Decider
	engine.RuleStore
	engine.UsageStore
	engine.WebhookStore
	engine.DemandStore
	engine.Pinger
	engine.AccountStore
	engine.AuditStore
	// store is the whole store, for the engine's subtests (Run only).
	store engine.Store
}

// harness is one subtest's store ports, clock and accounts.
type harness struct {
	t     *testing.T
	s     ports
	clock *testkit.FakeClock
	ctx   context.Context
	// a and b are two distinct accounts unique to the subtest.
	a, b string
	// sample: the property tests run one case in sample (Sample).
	sample int
}

// cases is how many of a property test's n random cases run: n / sample, at least 1.
func (h *harness) cases(n int) int { return max(1, n/max(1, h.sample)) }

func newHarness(t *testing.T, newPorts Constructor[ports]) *harness {
	clock := testkit.NewFakeClock(time.UnixMilli(BaseMS))
	p := newPorts(t, clock)
	id := accountID(t.Name())
	return &harness{t: t, s: p, clock: clock, ctx: context.Background(), a: id + "-a", b: id + "-b"}
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
