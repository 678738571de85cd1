package redisstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/redisstore/respipe"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/redistest"
)

// TestSentinelFailover: a master, one replica and three sentinels on loopback. Leases
// taken with WaitReplicas 1 are on the replica before they are granted; the master is
// killed by PID; once the sentinels promote the replica, the same Store serves again and
// the leases are still held.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	ss := redistest.StartSentinels(t)
	so := Sentinel{Master: ss.Name, Addrs: ss.SentinelAddrs()}
	prefix := uniquePrefix()
	s := openStore(t, Options{Sentinel: so, Prefix: prefix})
	durable := openStore(t, Options{Sentinel: so, Prefix: prefix, WaitReplicas: 1})
	ctx := context.Background()

	set := engine.LeaseSet{Account: "acme", Namespace: "jobs", Key: "k"}
	for i := range 3 {
		d, err := durable.Acquire(ctx, set, "token-"+string(rune('a'+i)), 3, 600_000)
		if err != nil || !d.Allowed {
			t.Fatalf("acquire %d with WaitReplicas 1: %v %v", i, d, err)
		}
	}
	// WaitReplicas above the replicas there are: refused, and the lease undone.
	over := openStore(t, Options{Sentinel: so, Prefix: prefix, WaitReplicas: 2, ReadTimeout: 400 * time.Millisecond})
	start := time.Now()
	_, err := over.Acquire(ctx, engine.LeaseSet{Account: "acme", Namespace: "jobs", Key: "other"}, "token-x", 3, 600_000)
	if !errors.Is(err, errNotReplicated) {
		t.Fatalf("acquire with WaitReplicas 2 and one replica: %v, want errNotReplicated", err)
	}
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Fatalf("the refused acquisition took %v", d)
	}
	if r, err := s.Release(ctx, engine.LeaseSet{Account: "acme", Namespace: "jobs", Key: "other"}, "token-x"); err != nil || r.Released || r.Active != 0 {
		t.Fatalf("the refused lease is still held: %+v %v", r, err)
	}

	sp := engine.Spend{Counter: engine.Counter{Account: "acme", Namespace: "api", Key: "k", Algorithm: engine.SlidingWindow, WindowMS: 60_000}, Limit: 1_000_000, Cost: 1}
	if _, err := s.Spend(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if !s.pipe.Open() || len(pipeConnsOn(t, ss.Master)) != 1 {
		t.Fatal("the decisions did not go over the pipe to the master")
	}

	// Measure what asynchronous replication loses: spends run on one counter while the
	// master is killed; after the failover the counter is compared with the spends that
	// were acknowledged.
	loss := engine.Spend{Counter: engine.Counter{Account: "acme", Namespace: "api", Key: "loss", Algorithm: engine.FixedWindow, WindowMS: 31_622_400_000}, Limit: 1_000_000_000, Cost: 1}
	var acked, refused atomic.Int64 // the load's spends acknowledged, and failed
	stopLoad := make(chan struct{})
	var loadWG sync.WaitGroup
	for range 8 {
		loadWG.Add(1)
		go func() {
			defer loadWG.Done()
			for {
				select {
				case <-stopLoad:
					return
				default:
				}
				if _, err := s.Spend(ctx, loss); err == nil {
					acked.Add(1)
				} else {
					refused.Add(1)
					time.Sleep(20 * time.Millisecond) // pacing: no busy loop against a dead master
				}
			}
		}()
	}
	testkit.Eventually(t, "the load under way", 10*time.Second, func() bool { return acked.Load() >= 200 })
	killed := time.Now()
	refusedAtKill := refused.Load()
	ss.Master.Stop()
	ackedAtKill := acked.Load()
	// The load runs into the dead master: every caller's next spend fails.
	testkit.Eventually(t, "the load's spends failing after the kill", 10*time.Second, func() bool { return refused.Load() >= refusedAtKill+8 })
	close(stopLoad)
	loadWG.Wait()
	if acked.Load() != ackedAtKill {
		// Only in-flight replies can land after the kill.
		t.Logf("%d spends acknowledged just after the kill", acked.Load()-ackedAtKill)
	}
	var firstErr error
	var firstOK time.Duration
	failures, streak := 0, 0
	// Until 20 requests in a row succeed: right after the promotion a lagging sentinel
	// can still name the old master for a moment.
	for streak < 20 {
		_, err := s.Spend(ctx, sp)
		if err == nil {
			if firstOK == 0 {
				firstOK = time.Since(killed)
			}
			streak++
			continue
		}
		streak = 0
		failures++
		if firstErr == nil {
			firstErr = err
		}
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("requests not succeeding within 30 s of killing the master: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("master killed; first request succeeding after %v, steadily after %v (%d failed meanwhile, first: %v)",
		firstOK.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), failures, firstErr)
	look := loss
	look.Cost = 0
	dl, err := s.Spend(ctx, look)
	if err != nil {
		t.Fatal(err)
	}
	stored := look.Limit - dl.Remaining
	t.Logf("failover loss: %d spends acknowledged, %d on the promoted replica: %d lost", acked.Load(), stored, acked.Load()-stored)

	sentinels := redis.NewSentinelClient(&redis.Options{Addr: ss.Sentinels[0].Addr()})
	defer sentinels.Close()
	// The store may have found the new master through another sentinel: this one can lag
	// a moment behind on a loaded machine.
	var addr []string
	testkit.Eventually(t, "sentinel 0 to name the former replica as master", 5*time.Second, func() bool {
		addr, err = sentinels.GetMasterAddrByName(ctx, ss.Name).Result()
		return err == nil && addr[1] == itoa(int64(ss.Replica.Port))
	})
	// The leases acknowledged by the replica survived the failover: the set is full.
	var d engine.LeaseDecision
	// A sentinel that has not yet heard of the promotion can still name the old master to
	// a new connection for a moment.
	testkit.Eventually(t, "an acquire succeeds after the failover", 30*time.Second-time.Since(killed), func() bool {
		d, err = s.Acquire(ctx, set, "token-late", 3, 600_000)
		if err != nil {
			t.Logf("%v after the kill: acquire failed: %v", time.Since(killed).Round(time.Millisecond), err)
		}
		return err == nil
	})
	if d.Allowed || d.Active != 3 {
		t.Fatalf("after failover: allowed %v with %d active, want denied with the 3 replicated leases", d.Allowed, d.Active)
	}
	testkit.Eventually(t, "a ping succeeds after the failover", 30*time.Second-time.Since(killed), func() bool {
		err := s.Ping(ctx)
		if err != nil {
			t.Logf("%v after the kill: ping failed: %v", time.Since(killed).Round(time.Millisecond), err)
		}
		return err == nil
	})
	t.Logf("ping succeeds %v after the kill", time.Since(killed).Round(time.Millisecond))
}

// pipeConnsOn returns the CLIENT LIST lines of srv's connections that ran a decision in
// RESP2: the pipe's (go-redis speaks RESP3).
func pipeConnsOn(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer admin.Close()
	list, err := admin.ClientList(context.Background()).Result()
	for try := 0; err != nil && try < 3; try++ {
		// A failover closes every client connection of the nodes it reconfigures.
		time.Sleep(50 * time.Millisecond)
		list, err = admin.ClientList(context.Background()).Result()
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if fieldOf(line, "cmd") == "evalsha" && fieldOf(line, "resp") == "2" {
			out = append(out, line)
		}
	}
	return out
}

// TestSentinelPipeFollowsTheMaster: after a failover that leaves the old master running
// (SENTINEL FAILOVER: it becomes a replica), the decisions' pipe is on the new master.
func TestSentinelPipeFollowsTheMaster(t *testing.T) {
	t.Parallel()
	ss := redistest.StartSentinels(t)
	s := openStore(t, Options{Sentinel: Sentinel{Master: ss.Name, Addrs: ss.SentinelAddrs()}})
	ctx := context.Background()
	sp := engine.Spend{Counter: engine.Counter{Account: "acme", Namespace: "api", Key: "k", Algorithm: engine.FixedWindow, WindowMS: 3_600_000}, Limit: 1_000_000, Cost: 1}
	if _, err := s.Spend(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if len(pipeConnsOn(t, ss.Master)) != 1 {
		t.Fatal("the pipe is not on the master")
	}
	sentinels := redis.NewSentinelClient(&redis.Options{Addr: ss.Sentinels[0].Addr()})
	defer sentinels.Close()
	start := time.Now()
	if err := sentinels.Failover(ctx, ss.Name).Err(); err != nil {
		t.Fatal(err)
	}
	failures, streak := 0, 0
	for streak < 20 || len(pipeConnsOn(t, ss.Replica)) == 0 {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("after 30 s: %d spends in a row succeeded, pipe connections on the new master: %v", streak, pipeConnsOn(t, ss.Replica))
		}
		if _, err := s.Spend(ctx, sp); err != nil {
			failures, streak = failures+1, 0
			time.Sleep(50 * time.Millisecond)
			continue
		}
		streak++
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the pipe moved to the new master %v after SENTINEL FAILOVER (%d spends failed meanwhile)", time.Since(start).Round(time.Millisecond), failures)
	if got := pipeConnsOn(t, ss.Master); len(got) != 0 {
		t.Fatalf("pipe connections left on the demoted master: %v", got)
	}
}

// TestSentinelPipeRedialsOnReadOnly: on Sentinel, a READONLY answer on the pipe (its node
// was demoted without closing the connection) makes the pipe dial again, to whichever node
// the sentinels name, and the same decision is sent again there: it succeeds, counted
// once. Here the failover is done by hand (REPLICAOF both ways), the Store is told it runs
// on Sentinel, and its pipe dials where the test says the master is, as go-redis's
// Sentinel dialer dials where the sentinels say.
func TestSentinelPipeRedialsOnReadOnly(t *testing.T) {
	t.Parallel()
	a, b := redistest.StartServer(t, false), redistest.StartServer(t, false)
	s := openStore(t, Options{URL: a.URL()}) // the plain road: its failover is the subject
	s.sentinel = true
	var master atomic.Value
	master.Store(a.Addr())
	o := pipeOptions(s.client, false)
	o.Dial = func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", master.Load().(string))
	}
	s.pipes.Close()
	s.pipes = respipe.NewPool(o)
	s.pipe = s.pipes.Pipe(a.Addr())

	ctx := context.Background()
	adminA := redis.NewClient(&redis.Options{Addr: a.Addr()})
	defer adminA.Close()
	adminB := redis.NewClient(&redis.Options{Addr: b.Addr()})
	defer adminB.Close()
	if err := adminA.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := adminB.ReplicaOf(ctx, "127.0.0.1", itoa(int64(a.Port))).Err(); err != nil {
		t.Fatal(err)
	}
	sp := engine.Spend{Counter: engine.Counter{Account: "acme", Namespace: "api", Key: "k", Algorithm: engine.FixedWindow, WindowMS: 3_600_000}, Limit: 1_000_000, Cost: 1}
	if d, err := s.Spend(ctx, sp); err != nil || d.Remaining != 999_999 {
		t.Fatalf("spend on the master: %+v, %v", d, err)
	}
	before := pipeConnsOn(t, a)
	if len(before) != 1 {
		t.Fatalf("pipe connections: %v", before)
	}
	waitReplicated(t, adminA, adminB)

	// The failover: b is promoted, a demoted (its connections stay open), the sentinels
	// name b; b has the script (loaded by hand: SCRIPT LOAD is not replicated).
	if err := adminB.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	if err := adminA.ReplicaOf(ctx, "127.0.0.1", itoa(int64(b.Port))).Err(); err != nil {
		t.Fatal(err)
	}
	master.Store(b.Addr())
	if err := adminB.ScriptLoad(ctx, s.scripts.Spend.Src).Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Spend(ctx, sp); err != nil || d.Remaining != 999_998 {
		t.Fatalf("first spend after the failover: %+v, %v; want it sent again to the new master", d, err)
	}
	if got := pipeConnsOn(t, b); len(got) != 1 {
		t.Fatalf("pipe connections on the new master: %v", got)
	}
	if got := pipeConnsOn(t, a); len(got) != 0 {
		t.Fatalf("pipe connections left on the demoted master: %v", got)
	}
	if ev := commandStats(t, adminA)["evalsha"]; ev.calls+ev.rejected != 2 {
		t.Fatalf("the demoted master saw %d EVALSHA, want 2 (the spend, the one answered READONLY)", ev.calls+ev.rejected)
	}
}

// waitReplicated waits until the replica's offset has reached the master's.
func waitReplicated(t *testing.T, master, replica *redis.Client) {
	t.Helper()
	ctx := context.Background()
	offset := func(c *redis.Client, field string) string {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
				return v
			}
		}
		return ""
	}
	testkit.Eventually(t, "the replica at the master's offset", 10*time.Second, func() bool {
		m, r := offset(master, "master_repl_offset"), offset(replica, "slave_repl_offset")
		return m != "" && m == r && offset(replica, "master_link_status") == "up"
	})
}
