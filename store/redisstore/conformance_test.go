package redisstore

import (
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit/storetest"
)

// TestConformanceSingle runs the shared conformance suite, unchanged, against one Redis
// node (the harness's, or LEASH_TEST_REDIS_URL), every request decided in Redis, port by
// port: each port's run gets that port's own type (Store.Decider, Store.RuleStore, ...)
// alone, not the Store that holds them all; the engine's part gets the whole Store. The
// suite's fake clock drives the scripts through Options.Clock.
func TestConformanceSingle(t *testing.T) {
	t.Parallel()
	url := singleURL(t)
	open := func(t *testing.T, clock engine.Clock) *Store { return openStore(t, Options{URL: url, Clock: clock}) }
	storetest.RunDecider(t, func(t *testing.T, c engine.Clock) engine.Decider { return open(t, c).Decider })
	storetest.RunPinger(t, func(t *testing.T, c engine.Clock) engine.Pinger { return open(t, c).Pinger })
	storetest.RunRules(t, func(t *testing.T, c engine.Clock) engine.RuleStore { return open(t, c).RuleStore })
	storetest.RunUsage(t, func(t *testing.T, c engine.Clock) engine.UsageStore { return open(t, c).UsageStore })
	storetest.RunWebhooks(t, func(t *testing.T, c engine.Clock) engine.WebhookStore { return open(t, c).WebhookStore })
	storetest.RunDemand(t, func(t *testing.T, c engine.Clock) engine.DemandStore { return open(t, c).DemandStore })
	storetest.RunAccounts(t, func(t *testing.T, c engine.Clock) engine.AccountStore { return open(t, c).AccountStore })
	storetest.RunAudit(t, func(t *testing.T, c engine.Clock) engine.AuditStore { return open(t, c).AuditStore })
	storetest.RunEngine(t, func(t *testing.T, c engine.Clock) engine.Store { return open(t, c) })
}

// TestConformanceCluster runs the whole suite (storetest.Run) against a 3-master Redis
// Cluster started by the harness.
func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	storetest.Run(t, func(t *testing.T, clock engine.Clock) engine.Store {
		return openStore(t, Options{ClusterAddrs: c.Addrs(), Clock: clock})
	})
}

// eager reserves on every counter's first request and down to the last unit, so the suite
// runs through reservations (reserve.go) wherever a window counter is spent on.
var eager = ReserveOptions{From: 1, Share: 2, Part: 1, Hits: 1}

// runReserving runs the suite's decision port, its property tests whole, and the engine's
// part with eager reservations: reservations change how window counters are spent and
// nothing else, so the other ports are left to the runs without them.
func runReserving(t *testing.T, o Options) {
	newStore := func(t *testing.T, clock engine.Clock) rstore {
		o := o
		o.Clock = clock
		return openReserving(t, o, eager)
	}
	storetest.RunDecider(t, func(t *testing.T, c engine.Clock) engine.Decider { return newStore(t, c) })
	storetest.RunEngine(t, func(t *testing.T, c engine.Clock) engine.Store { return newStore(t, c) })
}

// TestConformanceSingleReserving runs the suite with eager reservations on one node.
func TestConformanceSingleReserving(t *testing.T) {
	t.Parallel()
	runReserving(t, Options{URL: singleURL(t)})
}

// TestConformanceClusterReserving runs the suite with eager reservations on a 3-master
// Cluster.
func TestConformanceClusterReserving(t *testing.T) {
	t.Parallel()
	runReserving(t, Options{ClusterAddrs: sharedCluster(t).Addrs()})
}
