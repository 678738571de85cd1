package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/redisstore/lua"
	"github.com/leashd/leash/store/redisstore/respipe"
	"github.com/leashd/leash/testkit/redistest"
)

// Spend on a Redis 7 Cluster merges the requests for one master across slots
// (spend_x.lua, hotpath.go). These tests check what that form adds: keys of another master
// are answered undecided and spend nothing, such requests are decided again where their key
// lives, and the slot and version checks it rests on.

// TestCrossSlotKeyOfAnotherMaster: a spend_x.lua call on one master that carries a key
// another master serves decides its own keys, answers that one -1 with nothing spent
// anywhere, and writes nothing for it.
func TestCrossSlotKeyOfAnotherMaster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	s := openStore(t, Options{ClusterAddrs: c.Addrs()})
	ctx := context.Background()
	p := uniquePrefix()
	here := "{" + p + ":here}"
	a, err := c.MasterFor(ctx, here)
	if err != nil {
		t.Fatal(err)
	}
	var there string
	for i := 0; there == ""; i++ {
		k := fmt.Sprintf("{%s:there%d}", p, i)
		if m, err := c.MasterFor(ctx, k); err != nil {
			t.Fatal(err)
		} else if m != a {
			there = k
		}
	}
	node := redis.NewClient(&redis.Options{Addr: a.Addr(), MaxRetries: -1})
	defer node.Close()
	r, err := s.scripts.SpendX.Run(ctx, node, []string{here}, "t", 0,
		here, "f", 10, 60000, 1, there, "f", 10, 60000, 1, here, "f", 10, 60000, 1).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(r) != 12 || r[0] != 1 || r[1] != 9 || r[4] != -1 || r[8] != 1 || r[9] != 8 {
		t.Fatalf("reply %v: want here allowed (9 left), there undecided (-1), here allowed (8 left)", r)
	}
	if n, err := s.cluster.Exists(ctx, there).Result(); err != nil || n != 0 {
		t.Fatalf("the other master's key exists (%d, %v): spent although undecided", n, err)
	}
	if v, err := node.Get(ctx, here).Result(); err != nil || v == "" {
		t.Fatalf("the key decided here: %q, %v", v, err)
	}
}

// TestCrossSlotStaleSlotMap: a slot moved to another master while the Store's slot map
// still names the old one; requests for it, merged with others on the old master, come back
// undecided and are decided on the new one: each counter allows exactly its limit, and the
// moved one lives on its new master only. (Rounds repeat, each with a fresh slot, until a
// request came back undecided: which request heads a merged call is the scheduler's pick.)
func TestCrossSlotStaleSlotMap(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 0)
	s := openStore(t, Options{ClusterAddrs: c.Addrs()})
	ctx := context.Background()
	admins := make(map[*redistest.Server]*redis.Client)
	ids := make(map[*redistest.Server]string)
	for _, n := range c.Nodes {
		admins[n] = redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		defer admins[n].Close()
		id, err := admins[n].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = id
	}
	next := 0
	for round := 0; s.undecided.Load() == 0; round++ {
		if round == 20 {
			t.Fatal("no request came back undecided in 20 rounds")
		}
		// Counters "stay" and "moves" on one master, then moves's (empty) slot given to another.
		stay := pipeSpend(fmt.Sprintf("stay%d", round), 0)
		src, err := c.MasterFor(ctx, s.keys.Counter(stay.Counter))
		if err != nil {
			t.Fatal(err)
		}
		var moves engine.Spend
		for ; ; next++ {
			moves = pipeSpend(fmt.Sprintf("moves%d", next), 0)
			if m, err := c.MasterFor(ctx, s.keys.Counter(moves.Counter)); err != nil {
				t.Fatal(err)
			} else if m == src && lua.Slot(s.keys.Counter(moves.Counter)) != lua.Slot(s.keys.Counter(stay.Counter)) {
				next++
				break
			}
		}
		if p, err := s.pipeFor(ctx, s.keys.Counter(moves.Counter)); err != nil || p.Addr() != src.Addr() {
			t.Fatalf("the slot map names %v (%v), want %s", p, err, src.Addr())
		}
		dst := c.Nodes[0]
		if dst == src {
			dst = c.Nodes[1]
		}
		slot := int64(lua.Slot(s.keys.Counter(moves.Counter)))
		for _, n := range c.Nodes {
			if err := admins[n].Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[dst]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		const callers, perCaller, limit = 32, 20, 150 // 320 requests a counter
		var allowed [2]atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range callers {
			wg.Go(func() {
				<-start
				sp := stay
				if g%2 == 1 {
					sp = moves
				}
				sp.Limit = limit
				for range perCaller {
					d, err := s.Spend(ctx, sp)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						allowed[g%2].Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		for i, name := range []string{"stay", "moves"} {
			if n := allowed[i].Load(); n != limit {
				t.Fatalf("round %d: %s: %d allowed, want the limit %d", round, name, n, limit)
			}
		}
		for n, want := range map[*redistest.Server]int64{src: 0, dst: 1} {
			if k, err := admins[n].ClusterCountKeysInSlot(ctx, int(slot)).Result(); err != nil || k != want {
				t.Fatalf("round %d: %s holds %d keys of the moved slot (%v), want %d", round, n.Addr(), k, err, want)
			}
		}
		t.Logf("round %d: %d requests came back undecided", round, s.undecided.Load())
	}
}

// TestKeySlot: lua.Slot agrees with CLUSTER KEYSLOT, hash tags included.
func TestKeySlot(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	node := redis.NewClient(&redis.Options{Addr: c.Nodes[0].Addr(), MaxRetries: -1})
	defer node.Close()
	for _, k := range []string{"", "a", "foo", "{user1000}.following", "{}x", "x{}y", "{a}{b}", "no}brace{", "{" + uniquePrefix() + ":a:ns:k}:f"} {
		want, err := node.ClusterKeySlot(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := lua.Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, want %d", k, got, want)
		}
	}
}

// TestAtLeast7: the version check reads INFO server's redis_version.
func TestAtLeast7(t *testing.T) {
	t.Parallel()
	for info, want := range map[string]bool{
		"# Server\r\nredis_version:7.0.15\r\nredis_mode:cluster\r\n": true,
		"# Server\r\nredis_version:7.2.4\r\n":                        true,
		"# Server\r\nredis_version:6.2.14\r\n":                       false,
		"# Server\r\nredis_git_sha1:0\r\n":                           false,
		"redis_version:10.0.0\n":                                     true,
	} {
		if got := atLeast7(info); got != want {
			t.Errorf("atLeast7(%q) = %v, want %v", info, got, want)
		}
	}
}

// TestRedirectLoopAnswersNotServed: a decision that every node it is sent to redirects
// (a slot left MIGRATING towards a node that does not import it: ASK there, MOVED back) is
// sent again until its deadline, then fails as not served, never with the redirect itself
// (spec §3.8: 503 at the edge); once the slot is stable again it is decided.
func TestRedirectLoopAnswersNotServed(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 0)
	s := openStore(t, Options{ClusterAddrs: c.Addrs()})
	ctx := context.Background()
	sp := pipeSpend("loops", 10)
	key := s.keys.Counter(sp.Counter)
	src, err := c.MasterFor(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	dst := c.Nodes[0]
	if dst == src {
		dst = c.Nodes[1]
	}
	srcAdmin := redis.NewClient(&redis.Options{Addr: src.Addr(), MaxRetries: -1})
	defer srcAdmin.Close()
	dstAdmin := redis.NewClient(&redis.Options{Addr: dst.Addr(), MaxRetries: -1})
	defer dstAdmin.Close()
	dstID, err := dstAdmin.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	slot := int64(lua.Slot(key))
	if err := srcAdmin.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err(); err != nil {
		t.Fatal(err)
	}
	for _, sp := range []engine.Spend{sp, {Counter: sp.Counter, Limit: sp.Limit, Cost: 1}} {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = s.Spend(cctx, sp)
		cancel()
		var reply respipe.ReplyError
		// Which of the two ends it depends on where the deadline falls: between sends, or
		// while a send is under way.
		if errors.As(err, &reply) || !errors.Is(err, errNotServed) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a decision redirected until its deadline: %v, want not served or the deadline, with no reply text", err)
		}
	}
	if err := srcAdmin.Do(ctx, "CLUSTER", "SETSLOT", slot, "STABLE").Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Spend(ctx, sp); err != nil || !d.Allowed || d.Remaining != 9 {
		t.Fatalf("after the slot is stable: %+v, %v; want allowed, 9 left (nothing spent before)", d, err)
	}
}
