package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit/redistest"
)

// shared holds the servers tests share (one single node, one cluster), started on first
// use and stopped by TestMain. Every test uses its own key prefix on them.
var shared struct {
	singleOnce sync.Once
	single     *redistest.Server
	singleErr  error

	clusterOnce sync.Once
	cluster     *redistest.Cluster
	clusterErr  error
}

func TestMain(m *testing.M) {
	RouteDriverLogs(quietLogger()) // go-redis logs each failed dial; the failure tests make many
	if _, err := exec.LookPath("redis-server"); err != nil && os.Getenv("LEASH_TEST_REDIS_URL") == "" {
		// t.Skip messages show only with -v: say it where everyone sees it.
		bar := strings.Repeat("!", 78)
		fmt.Fprintf(os.Stderr, "\n%s\n!!! store/redisstore: redis-server is not installed: the Redis store tests are SKIPPED\n"+
			"!!! (apt-get install -y redis-server redis-tools; with CI=true they fail instead)\n%s\n\n", bar, bar)
	}
	code := m.Run()
	if shared.single != nil {
		shared.single.Destroy()
	}
	if shared.cluster != nil {
		shared.cluster.Destroy()
	}
	os.Exit(code)
}

// singleURL returns LEASH_TEST_REDIS_URL when set, else the URL of the shared
// harness-started single node.
func singleURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("LEASH_TEST_REDIS_URL"); u != "" {
		return u
	}
	bin := redistest.Require(t)
	shared.singleOnce.Do(func() { shared.single, shared.singleErr = redistest.NewServer(bin, false) })
	if shared.singleErr != nil {
		t.Fatal(shared.singleErr)
	}
	return shared.single.URL()
}

// sharedCluster returns the shared 3-master cluster.
func sharedCluster(t testing.TB) *redistest.Cluster {
	t.Helper()
	bin := redistest.Require(t)
	cli := redistest.RequireCLI(t)
	shared.clusterOnce.Do(func() { shared.cluster, shared.clusterErr = redistest.NewCluster(bin, cli, 0) })
	if shared.clusterErr != nil {
		t.Fatal(shared.clusterErr)
	}
	return shared.cluster
}

// uniquePrefix returns a fresh key prefix, so tests sharing a Redis never see each
// other's keys.
func uniquePrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openStore opens a store with a unique prefix (unless set) and closes it when the test
// ends.
// testReadTimeout is the ReadTimeout of a test's store: d when the test sets one, else
// 5 s. A test that sets none checks what the store decides, not when it gives up, and the
// production default (500 ms) failed such tests on a busy machine (make test-stress); the
// tests of timeouts set their own.
func testReadTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return 5 * time.Second
	}
	return d
}

func openStore(t testing.TB, o Options) *Store {
	t.Helper()
	if o.Prefix == "" {
		o.Prefix = uniquePrefix()
	}
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	o.ReadTimeout = testReadTimeout(o.ReadTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	s, err := Open(ctx, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if os.Getenv("LEASH_TEST_REDIS_URL") != "" && s.cluster == nil {
			// Leave a Redis we did not start as we found it.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			iter := s.client.Scan(ctx, 0, "{"+s.keys.Prefix()+":*", 1000).Iterator()
			for iter.Next(ctx) {
				s.client.Del(ctx, iter.Val())
			}
		}
		_ = s.Close()
	})
	return s
}

// singleStore opens a store on the shared single node.
func singleStore(t testing.TB, clock engine.Clock) *Store {
	t.Helper()
	return openStore(t, Options{URL: singleURL(t), Clock: clock})
}
