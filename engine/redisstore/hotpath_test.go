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
// decision takes, how the pipes connect, and the fallback to go-redis. The pipe itself is
// tested in package respipe.

func pipeSpend(key string, limit int64) engine.Spend {
	return engine.Spend{Counter: engine.Counter{Account: "a", Namespace: "ns", Key: key, Algorithm: engine.FixedWindow, WindowMS: 3_600_000}, Limit: limit, Cost: 1}
}

// TestPipeScriptsFlushed: scripts missing on the server (SCRIPT FLUSH, or a restarted
// Redis) make every kind of decision fall back to go-redis, which loads them again, and
// the decisions carry on, each counted once.
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
	key := s.keys.counter(pipeSpend("k", 10).Counter)
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
