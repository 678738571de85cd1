package redisstore

import (
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit/storetest"
)

// TestConformanceSingle runs the shared conformance suite, unchanged, against one Redis
// node (the harness's, or LEASH_TEST_REDIS_URL). The suite's fake clock drives the scripts
// through Options.Clock.
func TestConformanceSingle(t *testing.T) {
	t.Parallel()
	url := singleURL(t)
	storetest.Run(t, func(t *testing.T, clock engine.Clock) engine.Store {
		return openStore(t, Options{URL: url, Clock: clock})
	})
}

// TestConformanceCluster runs the same suite against a 3-master Redis Cluster started by
// the harness.
func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	storetest.Run(t, func(t *testing.T, clock engine.Clock) engine.Store {
		return openStore(t, Options{ClusterAddrs: c.Addrs(), Clock: clock})
	})
}
