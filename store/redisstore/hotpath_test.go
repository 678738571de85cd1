package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit/redistest"
	"github.com/leashd/leash/testkit/testcert"
)

// The decisions' path (hotpath.go) through the Store's public methods: which pipe a
// decision takes, how the pipes connect, and what a call Redis did not run does next (sent
// again on the pipe). The pipe itself is tested in package respipe.

func pipeSpend(key string, limit int64) engine.Spend {
	return engine.Spend{Counter: engine.Counter{Account: "a", Namespace: "ns", Key: key, Algorithm: engine.FixedWindow, WindowMS: 3_600_000}, Limit: limit, Cost: 1}
}

// TestPipeScriptsFlushed: scripts missing on the server (SCRIPT FLUSH, or a restarted
// Redis) are loaded again (SCRIPT LOAD) and every kind of decision is sent again on the
// pipe, encoded once: no EVAL, one EVALSHA answered NOSCRIPT and one that runs; the
// decisions carry on, each counted once.
func TestPipeScriptsFlushed(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	s := openStore(t, Options{URL: srv.URL()})
	ctx := context.Background()
	sp := pipeSpend("k", 100)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	flush := func() {
		t.Helper()
		if err := admin.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int64(5) {
		flush()
		d, err := s.Spend(ctx, sp)
		if err != nil {
			t.Fatalf("spend after SCRIPT FLUSH: %v", err)
		}
		if d.Remaining != 100-2*i-1 {
			t.Fatalf("remaining %d after SCRIPT FLUSH, want %d", d.Remaining, 100-2*i-1)
		}
		if d, err = s.Spend(ctx, sp); err != nil || d.Remaining != 100-2*i-2 {
			t.Fatalf("second spend: %+v, %v", d, err)
		}
	}
	flush()
	all := []engine.Spend{pipeSpend("m", 10), pipeSpend("m", 10)}
	all[1].Counter.WindowMS = 60_000
	out := make([]engine.Decision, 2)
	if err := s.SpendAll(ctx, all, out); err != nil || out[0].Remaining != 9 || out[1].Remaining != 9 {
		t.Fatalf("SpendAll after SCRIPT FLUSH: %+v, %v", out, err)
	}
	set := engine.LeaseSet{Account: "a", Namespace: "ns", Key: "l"}
	flush()
	if d, err := s.Acquire(ctx, set, "tok", 2, 60_000); err != nil || !d.Allowed || d.Active != 1 {
		t.Fatalf("Acquire after SCRIPT FLUSH: %+v, %v", d, err)
	}
	flush()
	if r, err := s.Renew(ctx, set, "tok", 30_000); err != nil || !r.Renewed || r.Active != 1 {
		t.Fatalf("Renew after SCRIPT FLUSH: %+v, %v", r, err)
	}
	flush()
	if r, err := s.Release(ctx, set, "tok"); err != nil || !r.Released || r.Active != 0 {
		t.Fatalf("Release after SCRIPT FLUSH: %+v, %v", r, err)
	}
	if s.pipes.Conns() != 1 {
		t.Fatalf("%d pipes open, want the node's one", s.pipes.Conns())
	}
	// 14 decisions, 9 of them right after a SCRIPT FLUSH (SpendAll, Acquire, Renew,
	// Release, and the first of each pair of Spend calls).
	stats := commandStats(t, admin)
	if ev := stats["eval"]; ev.calls != 0 {
		t.Fatalf("EVAL ran %d times: a decision went through go-redis's fallback", ev.calls)
	}
	if ev := stats["evalsha"]; ev.calls != 14+9 || ev.failed != 9 {
		t.Fatalf("EVALSHA: %d calls, %d failed; want 14 that ran and 9 answered NOSCRIPT", ev.calls, ev.failed)
	}
	if sl, atOpen := stats["script|load"], int64(len(s.scripts.All())); sl.calls != atOpen+9 {
		t.Fatalf("SCRIPT LOAD ran %d times, want %d at Open and once per flush (9)", sl.calls, atOpen)
	}
	if n := len(pipeConnsOn(t, srv)); n != 1 {
		t.Fatalf("%d connections ran EVALSHA in RESP2, want the pipe's one", n)
	}
}

// commandStat is one command's line of INFO commandstats.
type commandStat struct{ calls, rejected, failed int64 }

// commandStats returns INFO commandstats by command name (lower case, "script|load").
func commandStats(t *testing.T, admin *redis.Client) map[string]commandStat {
	t.Helper()
	info, err := admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]commandStat)
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		var st commandStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				st.calls = n
			case "rejected_calls":
				st.rejected = n
			case "failed_calls":
				st.failed = n
			}
		}
		out[name] = st
	}
	return out
}

// TestPipeConnectsLikeGoRedis: the decisions' connection takes the URL's TLS (rediss://),
// ACL user and database, like every go-redis connection, and PoolStats counts it.
func TestPipeConnectsLikeGoRedis(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, k := testcert.New(t, nil, nil, "redis", true)
	srv, tlsPort := redistest.StartTLSServer(t, testcert.WriteCert(t, dir, "cert.pem", c), testcert.WriteKey(t, dir, "key.pem", k),
		"--requirepass", "adm1n")
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "adm1n"})
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "leash", "on", ">s3cret", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	tlsAddr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	s := openStore(t, Options{URL: "rediss://leash:s3cret@" + tlsAddr + "/3?skip_verify=true"})
	for i := range int64(3) {
		d, err := s.Spend(ctx, pipeSpend("k", 10))
		if err != nil {
			t.Fatalf("spend over TLS as an ACL user on db 3: %v", err)
		}
		if d.Remaining != 9-i {
			t.Fatalf("remaining %d, want %d", d.Remaining, 9-i)
		}
	}
	if s.pipe == nil || !s.pipe.Open() || s.pipes.Conns() != 1 {
		t.Fatal("the decisions did not go over the pipe")
	}
	if st := s.PoolStats(); st.Conns < 2 {
		t.Fatalf("PoolStats counts %d connections; the pipe's (or go-redis's) is missing", st.Conns)
	}
	key := s.keys.Counter(pipeSpend("k", 10).Counter)
	db3 := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "adm1n", DB: 3})
	defer db3.Close()
	if n, err := db3.Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("counter not in db 3 (%d, %v)", n, err)
	}
	var evals int
	for _, line := range strings.Split(strings.TrimSpace(admin.ClientList(ctx).Val()), "\n") {
		if !strings.Contains(line, "cmd=evalsha") {
			continue
		}
		evals++
		if fieldOf(line, "laddr") != tlsAddr || fieldOf(line, "user") != "leash" || fieldOf(line, "db") != "3" {
			t.Fatalf("a decision went over a connection not on TLS as leash on db 3: %s", line)
		}
	}
	if evals != 1 {
		t.Fatalf("%d connections ran the decisions, want the pipe's one", evals)
	}
}

// TestClusterDecisionsUsePipes: on a cluster each decision goes on the pipe to the master
// of its key's slot: one pipe per master.
func TestClusterDecisionsUsePipes(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	s := openStore(t, Options{ClusterAddrs: c.Addrs()})
	ctx := context.Background()
	for i := range 64 {
		if _, err := s.Spend(ctx, pipeSpend("k"+strconv.Itoa(i), 10)); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.pipes.Conns(); n != len(c.Nodes) {
		t.Fatalf("%d pipes open after spends on 64 keys, want one per master (%d)", n, len(c.Nodes))
	}
}

func fieldOf(line, name string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}

// TestClusterDecisionsFollowSlotMigration: a slot moving between masters while the Store's
// slot map still names the old one. Migrating, the old master answers ASK for a key it
// does not have, and the decision is sent again, after ASKING, to the new one (which
// answers NOSCRIPT first: the script is loaded there, and the call sent again); migrated,
// the old master answers MOVED and the decision is sent again to the master it names.
// Every decision runs once, on a pipe, its arguments encoded once (no EVAL anywhere).
func TestClusterDecisionsFollowSlotMigration(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 0)
	s := openStore(t, Options{ClusterAddrs: c.Addrs()})
	ctx := context.Background()
	sp := pipeSpend("k", 100)
	key := s.keys.Counter(sp.Counter)
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
	src, err := c.MasterFor(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	dst := c.Nodes[0]
	if dst == src {
		dst = c.Nodes[1]
	}
	slot, err := admins[src].ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	do := func(n *redistest.Server, args ...any) {
		t.Helper()
		if err := admins[n].Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, n.Addr(), err)
		}
	}
	tries := func(n *redistest.Server) int64 { // EVALSHA run or redirected on n
		ev := commandStats(t, admins[n])["evalsha"]
		return ev.calls + ev.rejected
	}
	keysIn := func(n *redistest.Server) int64 {
		k, err := admins[n].ClusterCountKeysInSlot(ctx, int(slot)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	remaining := int64(100)
	spend := func(what string) {
		t.Helper()
		remaining--
		d, err := s.Spend(ctx, sp)
		if err != nil || !d.Allowed || d.Remaining != remaining {
			t.Fatalf("spend %s: %+v, %v; want remaining %d", what, d, err, remaining)
		}
	}
	// Make the Store's slot map name src, then start the migration: src answers ASK.
	if _, err := s.pipeFor(ctx, key); err != nil {
		t.Fatal(err)
	}
	do(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[src])
	do(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[dst])
	do(dst, "SCRIPT", "FLUSH") // and the new master has lost its scripts: ASK, then NOSCRIPT
	srcTries := tries(src)
	spend("while the slot migrates")
	if got := tries(src) - srcTries; got != 1 {
		t.Fatalf("the migrating master saw %d EVALSHA, want 1 (answered ASK)", got)
	}
	if keysIn(src) != 0 || keysIn(dst) != 1 {
		t.Fatalf("keys in the slot: %d on the old master, %d on the new; want the counter on the new", keysIn(src), keysIn(dst))
	}
	if st := commandStats(t, admins[dst])["asking"]; st.calls != 2 {
		t.Fatalf("ASKING ran %d times on the importing master, want 2 (before NOSCRIPT, before the decision)", st.calls)
	}

	// Finish the migration; then move the slot back and forth (with its key) until a
	// decision meets a stale slot map (go-redis reloads it every second on its own).
	from, to := src, dst
	moved := false
	for round := 0; round < 5 && !moved; round++ {
		if round > 0 {
			from, to = to, from
			do(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from])
			do(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to])
			do(from, "MIGRATE", "127.0.0.1", to.Port, "", 0, 5000, "KEYS", key)
		}
		for _, n := range c.Nodes {
			do(n, "CLUSTER", "SETSLOT", slot, "NODE", ids[to])
		}
		fromTries := tries(from)
		spend("after the slot moved")
		moved = tries(from)-fromTries == 1
		if keysIn(from) != 0 || keysIn(to) != 1 {
			t.Fatalf("keys in the slot: %d on the old master, %d on the new", keysIn(from), keysIn(to))
		}
	}
	if !moved {
		t.Fatal("no decision met a stale slot map (MOVED) in 5 slot moves")
	}
	for _, n := range c.Nodes {
		if ev := commandStats(t, admins[n])["eval"]; ev.calls != 0 {
			t.Fatalf("EVAL ran %d times on %s: a decision went through go-redis", ev.calls, n.Addr())
		}
	}
}
