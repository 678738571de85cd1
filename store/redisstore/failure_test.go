package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/redistest"
)

func bufLogger(w *testkit.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestRedisStoppedAndRestarted: with Redis gone every call fails within the timeout (well
// under 2 x ReadTimeout) and Ping fails; once Redis is back on the same port the same
// Store serves again, with no restart.
func TestRedisStoppedAndRestarted(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	const readTimeout = 500 * time.Millisecond
	s := openStore(t, Options{URL: srv.URL(), ReadTimeout: readTimeout})
	ctx := context.Background()
	sp := engine.Spend{Counter: engine.Counter{Account: "a", Namespace: "ns", Key: "k", Algorithm: engine.FixedWindow, WindowMS: 60_000}, Limit: 1000, Cost: 1}
	if _, err := s.Spend(ctx, sp); err != nil {
		t.Fatal(err)
	}

	// Requests in flight while Redis dies.
	stopLoad := make(chan struct{})
	var loadWG sync.WaitGroup
	var slowest time.Duration
	var slowMu sync.Mutex
	var spent, failed atomic.Int64 // the load's calls, and those that failed
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
				start := time.Now()
				_, err := s.Spend(ctx, sp)
				spent.Add(1)
				if d := time.Since(start); err != nil {
					failed.Add(1)
					slowMu.Lock()
					slowest = max(slowest, d)
					slowMu.Unlock()
				}
			}
		}()
	}
	testkit.Eventually(t, "the load under way", 5*time.Second, func() bool { return spent.Load() >= 100 })
	srv.Stop()
	// Calls in flight and calls made after the stop fail: enough of them to time.
	testkit.Eventually(t, "the load's calls failing", 5*time.Second, func() bool { return failed.Load() >= 16 })

	var worst time.Duration
	for range 10 {
		start := time.Now()
		_, err := s.Spend(ctx, sp)
		d := time.Since(start)
		if err == nil {
			t.Fatal("spend succeeded with Redis stopped")
		}
		worst = max(worst, d)
		start = time.Now()
		if err := s.Ping(ctx); err == nil {
			t.Fatal("ping succeeded with Redis stopped")
		}
		worst = max(worst, time.Since(start))
		_, err = s.Acquire(ctx, engine.LeaseSet{Account: "a", Namespace: "ns", Key: "k"}, "tok", 1, 1000)
		if err == nil {
			t.Fatal("acquire succeeded with Redis stopped")
		}
	}
	close(stopLoad)
	loadWG.Wait()
	worst = max(worst, slowest)
	t.Logf("with Redis stopped: slowest failing call %v (ReadTimeout %v)", worst, readTimeout)
	if worst >= 2*readTimeout {
		t.Fatalf("a failing call took %v, not under 2 x ReadTimeout (%v)", worst, 2*readTimeout)
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	testkit.Eventually(t, "the store serves again after Redis came back", 10*time.Second, func() bool {
		_, err := s.Spend(ctx, sp)
		return err == nil && s.Ping(ctx) == nil
	})
	t.Logf("recovered %v after Redis restarted", time.Since(back).Round(time.Millisecond))
	// Scripts were lost with the restart (NOSCRIPT): EVAL reloads them; every call works.
	for range 20 {
		if _, err := s.Spend(ctx, sp); err != nil {
			t.Fatalf("spend after recovery: %v", err)
		}
	}
	if _, err := s.Acquire(ctx, engine.LeaseSet{Account: "a", Namespace: "ns", Key: "k"}, "tok", 1, 1000); err != nil {
		t.Fatalf("acquire after recovery: %v", err)
	}
}

// TestHungRedisTimesOut: a Redis that is frozen (SIGSTOP: connections are accepted by the
// kernel but nothing answers) makes calls fail within the timeout instead of hanging.
func TestHungRedisTimesOut(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	const readTimeout = 300 * time.Millisecond
	s := openStore(t, Options{URL: srv.URL(), ReadTimeout: readTimeout})
	ctx := context.Background()
	srv.Signal(syscall.SIGSTOP)
	defer srv.Signal(syscall.SIGCONT)
	sp := engine.Spend{Counter: engine.Counter{Account: "a", Namespace: "ns", Key: "k", Algorithm: engine.SlidingWindow, WindowMS: 1000}, Limit: 10, Cost: 1}
	for range 3 {
		start := time.Now()
		_, err := s.Spend(ctx, sp)
		d := time.Since(start)
		if err == nil {
			t.Fatal("spend succeeded on a frozen Redis")
		}
		t.Logf("frozen Redis: spend failed after %v (ReadTimeout %v)", d.Round(time.Millisecond), readTimeout)
		if d >= 2*readTimeout {
			t.Fatalf("spend took %v on a frozen Redis, not under 2 x ReadTimeout", d)
		}
		start = time.Now()
		if s.Ping(ctx) == nil {
			t.Fatal("ping succeeded on a frozen Redis")
		}
		if d := time.Since(start); d >= 2*readTimeout {
			t.Fatalf("ping took %v on a frozen Redis", d)
		}
	}
	srv.Signal(syscall.SIGCONT)
	testkit.Eventually(t, "recovery after the freeze", 5*time.Second, func() bool {
		_, err := s.Spend(ctx, sp)
		return err == nil
	})
}

// TestStartupWaitsForRedis: Open retries a Redis that is not up yet, logging it, and
// succeeds once it is.
func TestStartupWaitsForRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	srv.Stop()
	var logs testkit.SyncBuffer
	done := make(chan error, 1)
	var s *Store
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var err error
		s, err = Open(ctx, Options{URL: srv.URL(), Prefix: uniquePrefix(), Logger: bufLogger(&logs)})
		done <- err
	}()
	// Open has tried, failed and said it retries: it has not returned.
	testkit.Eventually(t, "the retry log line", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "Redis not reachable yet; retrying")
	})
	select {
	case err := <-done:
		t.Fatalf("Open returned before Redis was up: %v", err)
	default:
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if !strings.Contains(logs.String(), "Redis not reachable yet; retrying") {
		t.Fatalf("no retry log line; logs:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "retry_in_ms=") { // a duration names its unit
		t.Fatalf("retry line without retry_in_ms; logs:\n%s", logs.String())
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}

	// With no Redis at all Open gives up when its context ends.
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Open(ctx, Options{URL: srv.URL(), Logger: quietLogger()})
	if err == nil {
		t.Fatal("Open succeeded with no Redis")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Open took %v to give up after its context ended", d)
	}
}

// TestWrongPasswordFailsAtOnce: a rejected password is an immediate, clear error.
func TestWrongPasswordFailsAtOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false, "--requirepass", "s3cret")
	for _, o := range []Options{
		{URL: srv.URL(), Password: "wrong"},
		{URL: srv.URL()}, // NOAUTH
		{URL: srv.URL(), Username: "nobody", Password: "s3cret"},
	} {
		o.Logger = quietLogger()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		_, err := Open(ctx, o)
		cancel()
		if err == nil {
			t.Fatal("Open succeeded with wrong credentials")
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("wrong credentials took %v to fail; want an immediate error", d)
		}
		if !strings.Contains(err.Error(), "rejected the credentials") {
			t.Fatalf("error does not say the credentials were rejected: %v", err)
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "wrong") {
			t.Fatalf("error leaks the password: %v", err)
		}
	}
	// The right password, given outside the URL, works.
	s := openStore(t, Options{URL: srv.URL(), Password: "s3cret"})
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestEvictionPolicyWarning: a maxmemory-policy that can evict keys is warned about.
func TestEvictionPolicyWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy string
		warn   bool
	}{{"allkeys-lru", true}, {"noeviction", false}, {"volatile-ttl", false}} {
		srv := redistest.StartServer(t, false, "--maxmemory-policy", tc.policy)
		var logs testkit.SyncBuffer
		openStore(t, Options{URL: srv.URL(), Logger: bufLogger(&logs)})
		if got := strings.Contains(logs.String(), "maxmemory-policy can evict"); got != tc.warn {
			t.Fatalf("policy %s: warned = %v, want %v; logs:\n%s", tc.policy, got, tc.warn, logs.String())
		}
	}
}

// TestInvalidOptions: option mistakes are immediate errors.
func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, o := range []Options{
		{},
		{URL: "redis://127.0.0.1:1/0", ClusterAddrs: []string{"127.0.0.1:1"}},
		{URL: "http://user:pw@127.0.0.1:1/0"},
		{URL: "unix://user:pw@/tmp/redis.sock"}, // the decisions' connection speaks TCP only
		{URL: "redis://user:pw@127.0.0.1:1/0?no_such_option=1"},
		{Sentinel: Sentinel{Master: "m"}},
		{URL: "redis://127.0.0.1:1/0", Prefix: "a{b}"},
	} {
		o.Logger = quietLogger()
		_, err := Open(ctx, o)
		if err == nil {
			t.Fatalf("Open(%+v) succeeded", o)
		}
		if strings.Contains(err.Error(), "pw") {
			t.Fatalf("error leaks the URL's password: %v", err)
		}
	}
	if _, err := Open(ctx, Options{URL: "http://x"}); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("bad scheme: %v", err)
	}
}

// TestNewClient: one constructor makes the client each deployment needs, with the options
// the failure behaviour depends on (no retries, timeouts, pool), the URL's settings and
// the Username/Password override.
func TestNewClient(t *testing.T) {
	t.Parallel()
	o := Options{DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second, PoolSize: 7}
	check := func(what string, maxRetries, dialerRetries int, dial, read, write, poolTO time.Duration, poolSize int, ctxTO bool) {
		t.Helper()
		// MaxRetries -1 ("none") reads 0 once go-redis has applied its defaults (unset is 3).
		if maxRetries > 0 || dialerRetries != 1 || dial != time.Second || read != 2*time.Second || write != 3*time.Second ||
			poolTO != 2*time.Second || poolSize != 7 || !ctxTO {
			t.Errorf("%s: MaxRetries %d, DialerRetries %d, timeouts %v/%v/%v, pool %d/%v, ContextTimeoutEnabled %v",
				what, maxRetries, dialerRetries, dial, read, write, poolSize, poolTO, ctxTO)
		}
	}

	single := o
	single.URL = "rediss://u:p@127.0.0.1:7001/4?skip_verify=true&client_name=leash"
	single.Password = "override"
	c, err := newClient(&single)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	singleClient, ok := c.(*redis.Client)
	if !ok {
		t.Fatalf("URL: %T, want *redis.Client", c)
	}
	so := singleClient.Options()
	check("URL", so.MaxRetries, so.DialerRetries, so.DialTimeout, so.ReadTimeout, so.WriteTimeout, so.PoolTimeout, so.PoolSize, so.ContextTimeoutEnabled)
	if so.Addr != "127.0.0.1:7001" || so.DB != 4 || so.Username != "u" || so.Password != "override" || so.ClientName != "leash" ||
		so.TLSConfig == nil || !so.TLSConfig.InsecureSkipVerify || so.MaintNotificationsConfig.Mode != maintnotifications.ModeDisabled {
		t.Errorf("URL: addr %s db %d user %s password %s, client name %q, TLS %v, maintnotifications %v",
			so.Addr, so.DB, so.Username, so.Password, so.ClientName, so.TLSConfig, so.MaintNotificationsConfig)
	}

	cluster := o
	cluster.ClusterAddrs = []string{"127.0.0.1:7002"} // one seed is still a cluster
	cluster.Username, cluster.Password = "u", "p"
	c, err = newClient(&cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("ClusterAddrs: %T, want *redis.ClusterClient", c)
	}
	co := cc.Options()
	check("ClusterAddrs", co.MaxRetries, co.DialerRetries, co.DialTimeout, co.ReadTimeout, co.WriteTimeout, co.PoolTimeout, co.PoolSize, co.ContextTimeoutEnabled)
	if co.ClusterStateReloadInterval != time.Second || co.Username != "u" || co.Password != "p" || co.MaintNotificationsConfig.Mode != maintnotifications.ModeDisabled {
		t.Errorf("ClusterAddrs: reload every %v, user %s password %s, maintnotifications %v",
			co.ClusterStateReloadInterval, co.Username, co.Password, co.MaintNotificationsConfig)
	}

	sentinel := o
	sentinel.Sentinel = Sentinel{Master: "m", Addrs: []string{"127.0.0.1:7003"}}
	sentinel.Username, sentinel.Password = "u", "p"
	c, err = newClient(&sentinel)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fc, ok := c.(*redis.Client)
	if !ok {
		t.Fatalf("Sentinel: %T, want a failover *redis.Client", c)
	}
	fo := fc.Options()
	check("Sentinel", fo.MaxRetries, fo.DialerRetries, fo.DialTimeout, fo.ReadTimeout, fo.WriteTimeout, fo.PoolTimeout, fo.PoolSize, fo.ContextTimeoutEnabled)
	if fo.Addr != "FailoverClient" || fo.Username != "u" || fo.Password != "p" {
		t.Errorf("Sentinel: addr %s, user %s password %s", fo.Addr, fo.Username, fo.Password)
	}
}
