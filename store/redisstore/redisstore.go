// Package redisstore is Leash's Redis Store (single node, Redis Cluster or Sentinel). Every
// decision (Spend, Reset, Acquire, Release, Renew) is one EVALSHA of a Lua script that
// reads the time from Redis TIME and implements engine/algo's integer formulas (Spend
// requests written together share one, decided in turn). Spend,
// SpendAll, Acquire, Release and Renew go on the decisions' own connection to the master
// (package respipe; hotpath.go picks it, and sends again there what Redis answers it did
// not run, once go-redis has found the node or loaded the script); everything else goes
// through one go-redis v9 client (newClient). Rules are cached in process and invalidated
// across instances within 1 s; usage batches are applied idempotently. docs/redis.md
// describes the connections, the key layout, the scripts, the TTLs and the measurements.
package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/hotpath"
	"github.com/leashd/leash/store/redisstore/lua"
	"github.com/leashd/leash/store/redisstore/respipe"
	"github.com/leashd/leash/store/redisstore/rules"
)

// Store is Leash's Redis backend: an engine.Store, engine.AccountStore, engine.AuditStore
// and hotpath.Port. It is a thin composite of one small type per port, all sharing one
// connection (conn); a caller that needs one port may take that one alone (s.Decider,
// s.RuleStore, ...). It is safe for concurrent use; Close stops it.
type Store struct {
	*conn
	*Decider
	*Reservations
	*RuleStore
	*UsageStore
	*WebhookStore
	*DemandStore
	*Pinger
	*AccountStore
	*AuditStore
}

// Decider is the engine.Decider on Redis: counters (counters.go) and leases (leases.go).
type Decider struct {
	*conn
	hot *Reservations // an overdraft spend and a reset fence the slices instances hold
}

// Reservations is the hotpath.Port on Redis (reserve.go): reserve calls, the fence log,
// and the Spend of a counter whose key the hot path made.
type Reservations struct{ *conn }

// RuleStore is the engine.RuleStore on Redis, read through an in-process cache (rules.go).
type RuleStore struct {
	*conn
	rules *rules.Cache
}

// UsageStore is the engine.UsageStore on Redis (usage.go).
type UsageStore struct{ *conn }

// WebhookStore is the engine.WebhookStore on Redis: webhooks and the outbox (webhooks.go).
type WebhookStore struct{ *conn }

// DemandStore is the engine.DemandStore on Redis: RLQS demand (demand.go).
type DemandStore struct{ *conn }

// Pinger is the engine.Pinger on Redis.
type Pinger struct{ *conn }

// AccountStore is the engine.AccountStore on Redis: the admin API's accounts and keys
// (accounts.go).
type AccountStore struct{ *conn }

// AuditStore is the engine.AuditStore on Redis: the audit log (audit.go).
type AuditStore struct{ *conn }

// conn is the connection every port type shares: the go-redis client, the decisions'
// pipes, the scripts and key names, and the store's lifetime (Close).
type conn struct {
	log          *slog.Logger
	client       redis.UniversalClient
	cluster      *redis.ClusterClient // set in cluster mode
	keys         lua.Keys
	scripts      *lua.Set
	clock        engine.Clock // tests only; nil means Redis TIME
	slack        int64        // extra ms on every TTL (see Options.Clock)
	opTimeout    time.Duration
	opDeadline   *respipe.SharedDeadline // opTimeout-bounded contexts for callers without a sooner deadline
	waitReplicas int
	pipes        *respipe.Pool // the decisions' connections (hotpath.go)
	pipe         *respipe.Pipe // the single node's or Sentinel master's pipe; nil on a cluster (pipeFor picks one per key)
	sentinel     bool          // Sentinel: the pipe dials whichever node the sentinels name master
	crossSlot    bool          // Cluster of Redis >= 7.0: Spend merges across slots (hotpath.go)
	undecided    atomic.Int64  // Spend requests a cross-slot call left undecided, sent again (reserve.go: SpendKey)
	redisTime    redisClock    // Redis's clock as last read, for reserve calls' deadlines (reserve.go)
	// When a decision call or a ping last succeeded, and last failed for want of Redis
	// (Unix ns): the hot path's slices decide only while the last outcome is a success
	// (Answering).
	lastOK, lastDown atomic.Int64
	closed           atomic.Bool

	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

var (
	_ engine.Store        = (*Store)(nil)
	_ engine.Decider      = (*Decider)(nil)
	_ hotpath.Port        = (*Reservations)(nil)
	_ engine.RuleStore    = (*RuleStore)(nil)
	_ engine.UsageStore   = (*UsageStore)(nil)
	_ engine.WebhookStore = (*WebhookStore)(nil)
	_ engine.DemandStore  = (*DemandStore)(nil)
	_ engine.Pinger       = (*Pinger)(nil)
	_ engine.AccountStore = (*AccountStore)(nil)
	_ engine.AuditStore   = (*AuditStore)(nil)
)

// errClosed is returned by every method after Close.
var errClosed = errors.New("redisstore: store is closed")

// Sentinel names a Sentinel-managed master and the sentinels to ask for it.
type Sentinel struct {
	// Master is the master's name as the sentinels know it.
	Master string
	// Addrs are the sentinels' host:port addresses.
	Addrs []string
	// Username and Password authenticate to the sentinels themselves, when they need it.
	Username, Password string
}

// Options configures Open. Exactly one of URL, ClusterAddrs and Sentinel is set.
type Options struct {
	// URL is a single node: redis://host:port/db, or rediss:// for TLS.
	URL string
	// ClusterAddrs are Redis Cluster seed nodes (host:port).
	ClusterAddrs []string
	// Sentinel is a Sentinel-managed master.
	Sentinel Sentinel

	// Username and Password are the Redis ACL user and password. They override any in the
	// URL, so the URL can stay free of secrets.
	Username, Password string
	// Prefix starts every key, so several deployments can share one Redis; default "leash".
	Prefix string
	// WaitReplicas, when above 0, makes every lease acquisition WAIT for that many replicas
	// to acknowledge it (spec §11.3); an acquisition they do not acknowledge within
	// half of ReadTimeout is undone and fails.
	WaitReplicas int

	// DialTimeout bounds connecting; default 500ms.
	DialTimeout time.Duration
	// ReadTimeout bounds each store operation from start to reply (a usage flush: twice
	// that); default 500ms.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a command; default 500ms.
	WriteTimeout time.Duration
	// PoolSize is the number of connections per node; 0 means the driver's default
	// (10 per CPU).
	PoolSize int
	// TLS, when set, encrypts every connection with it (a private CA, a client
	// certificate), whatever the mode; a node's host is the server name unless TLS names
	// one. A rediss:// URL without it uses TLS with the system's roots.
	TLS *tls.Config

	// Logger receives start-up progress and warnings; default slog.Default().
	Logger *slog.Logger

	// Clock is FOR TESTS ONLY. When nil (always, in production) every script takes the
	// time from Redis TIME, so all instances share one clock whatever their own clocks
	// say (spec §4.5). When set, the scripts are given Clock's time instead; that is how
	// the conformance suite's fake clock drives Redis. Never set it in a deployment: two
	// instances with different clocks would then disagree.
	Clock engine.Clock
}

const (
	defaultTimeout = 500 * time.Millisecond
	// testSlack is added to TTLs in test-clock mode: Redis expires keys on real time while
	// the scripts follow the test clock.
	testSlack = int64(10 * time.Minute / time.Millisecond)
	// prodSlack keeps a key a little past the instant its state stops mattering.
	prodSlack = int64(1000)
)

// Open connects to Redis and returns a Store. A Redis that does not answer yet is retried
// with backoff (logging each attempt) until ctx ends; a rejected password or user, or an
// invalid option, fails at once.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Prefix == "" {
		opts.Prefix = "leash"
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, errors.New("redisstore: prefix must not contain braces")
	}
	for _, d := range []*time.Duration{&opts.DialTimeout, &opts.ReadTimeout, &opts.WriteTimeout} {
		if *d <= 0 {
			*d = defaultTimeout
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.WaitReplicas < 0 || opts.PoolSize < 0 {
		return nil, errors.New("redisstore: WaitReplicas and PoolSize must not be negative")
	}
	s := &conn{
		log:          opts.Logger,
		keys:         lua.NewKeys(opts.Prefix),
		scripts:      lua.NewSet(),
		clock:        opts.Clock,
		slack:        prodSlack,
		opTimeout:    opts.ReadTimeout,
		opDeadline:   respipe.NewSharedDeadline(opts.ReadTimeout),
		waitReplicas: opts.WaitReplicas,
	}
	if opts.Clock != nil {
		s.slack = testSlack
		s.log.Warn("redis store: using a test clock instead of Redis TIME; this is for tests only")
	}
	c, err := newClient(&opts)
	if err != nil {
		return nil, err
	}
	s.client = c
	s.cluster, _ = c.(*redis.ClusterClient)
	if err := s.waitReady(ctx, &opts); err != nil {
		_ = s.client.Close()
		return nil, err
	}
	s.checkEviction(ctx)
	s.loadScripts(ctx)
	s.crossSlot = s.crossSlotMerge(ctx)
	s.sentinel = opts.Sentinel.Master != ""
	s.pipes = respipe.NewPool(pipeOptions(s.client, s.sentinel))
	if s.cluster == nil {
		s.pipe = s.pipes.Pipe(s.client.(*redis.Client).Options().Addr)
	}
	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	rs := &RuleStore{conn: s, rules: rules.NewCache()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		rs.rules.Poll(bg, s.rulesVersion, s.log)
	}()
	hot := &Reservations{s}
	return &Store{conn: s, Decider: &Decider{conn: s, hot: hot}, Reservations: hot, RuleStore: rs,
		UsageStore: &UsageStore{s}, WebhookStore: &WebhookStore{s}, DemandStore: &DemandStore{s},
		Pinger: &Pinger{s}, AccountStore: &AccountStore{s}, AuditStore: &AuditStore{s}}, nil
}

// newClient builds the go-redis client for the configured deployment with
// redis.NewUniversalClient: a Client for a single node (URL), a FailoverClient for
// Sentinel, a ClusterClient for ClusterAddrs.
func newClient(o *Options) (redis.UniversalClient, error) {
	modes := 0
	if o.URL != "" {
		modes++
	}
	if len(o.ClusterAddrs) > 0 {
		modes++
	}
	if o.Sentinel.Master != "" || len(o.Sentinel.Addrs) > 0 {
		modes++
	}
	if modes != 1 {
		return nil, errors.New("redisstore: set exactly one of URL, ClusterAddrs and Sentinel")
	}
	u := &redis.UniversalOptions{
		Username: o.Username,
		Password: o.Password,
		// Nothing is retransmitted: a retried spend could count twice. MOVED/ASK
		// redirects (the command did not run) are still followed.
		MaxRetries:            -1,
		DialTimeout:           o.DialTimeout,
		DialerRetries:         1,
		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		ContextTimeoutEnabled: true,
		PoolSize:              o.PoolSize,
		PoolTimeout:           o.ReadTimeout,
		// Not applied to Sentinel: FailoverOptions has no such field.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	switch {
	case len(o.ClusterAddrs) > 0:
		u.Addrs = o.ClusterAddrs
		// UniversalOptions has no ClusterStateReloadInterval, so the cluster client is
		// made from its ClusterOptions. A dead master is noticed within a second instead
		// of the default 60 s.
		co := u.Cluster()
		co.ClusterStateReloadInterval = time.Second
		return redis.NewClusterClient(co), nil
	case o.Sentinel.Master != "" || len(o.Sentinel.Addrs) > 0:
		if o.Sentinel.Master == "" || len(o.Sentinel.Addrs) == 0 {
			return nil, errors.New("redisstore: Sentinel needs both Master and Addrs")
		}
		u.MasterName = o.Sentinel.Master
		u.Addrs = o.Sentinel.Addrs
		u.SentinelUsername = o.Sentinel.Username
		u.SentinelPassword = o.Sentinel.Password
	default:
		ro, err := redis.ParseURL(o.URL)
		if err != nil || ro.Network != "tcp" {
			// The URL may carry a password: never echo it.
			return nil, errors.New("redisstore: URL is not a valid redis:// or rediss:// URL")
		}
		u.Addrs = []string{ro.Addr}
		u.DB = ro.DB
		u.TLSConfig = ro.TLSConfig
		if u.Username == "" {
			u.Username = ro.Username
		}
		if u.Password == "" {
			u.Password = ro.Password
		}
		// The URL's query options that Options does not set.
		u.ClientName, u.Protocol = ro.ClientName, ro.Protocol
		u.MinRetryBackoff, u.MaxRetryBackoff = ro.MinRetryBackoff, ro.MaxRetryBackoff
		u.PoolFIFO, u.MinIdleConns, u.MaxIdleConns, u.MaxActiveConns = ro.PoolFIFO, ro.MinIdleConns, ro.MaxIdleConns, ro.MaxActiveConns
		u.MaxConcurrentDials = ro.MaxConcurrentDials
		u.ConnMaxIdleTime, u.ConnMaxLifetime, u.ConnMaxLifetimeJitter = ro.ConnMaxIdleTime, ro.ConnMaxLifetime, ro.ConnMaxLifetimeJitter
		u.PipelinePoolSize, u.PipelineReadBufferSize, u.PipelineWriteBufferSize = ro.PipelinePoolSize, ro.PipelineReadBufferSize, ro.PipelineWriteBufferSize
	}
	if o.TLS != nil {
		u.TLSConfig = o.TLS
	}
	return redis.NewUniversalClient(u), nil
}

// RouteDriverLogs sends go-redis's own log lines (e.g. every failed dial while Redis is
// down) to l at debug level instead of the standard logger. go-redis's logger is
// process-wide: call this once at start-up, before Open.
func RouteDriverLogs(l *slog.Logger) { redis.SetLogger(driverLogger{l}) }

type driverLogger struct{ l *slog.Logger }

func (d driverLogger) Printf(ctx context.Context, format string, v ...any) {
	d.l.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// isAuthError reports a rejected user or password: retrying cannot help.
func isAuthError(err error) bool {
	if err == nil {
		return false
	}
	m := err.Error()
	for _, p := range []string{"NOAUTH", "WRONGPASS", "invalid password", "invalid username-password", "AUTH <password> called without", "NOPERM"} {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

// waitReady pings until Redis answers, backing off from 100ms to 5s, until ctx ends.
func (s *conn) waitReady(ctx context.Context, o *Options) error {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, o.DialTimeout+o.ReadTimeout)
		err := s.ping(pctx)
		cancel()
		if err == nil {
			if attempt > 1 {
				s.log.Info("redis store: Redis is reachable", "attempts", attempt)
			}
			return nil
		}
		if isAuthError(err) {
			return fmt.Errorf("redisstore: Redis rejected the credentials (check store.redis.username and store.redis.password): %w", err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("redisstore: Redis not reachable before start-up gave up: %w", err)
		}
		s.log.Warn("redis store: Redis not reachable yet; retrying", "attempt", attempt, "retry_in_ms", backoff.Milliseconds(), "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisstore: Redis not reachable before start-up gave up: %w", err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// checkEviction warns when a node's maxmemory-policy could evict Leash's keys (anything
// but noeviction or volatile-*; spec §11.4).
func (s *conn) checkEviction(ctx context.Context) {
	check := func(ctx context.Context, c *redis.Client) error {
		cctx, cancel := context.WithTimeout(ctx, s.opTimeout)
		defer cancel()
		m, err := c.ConfigGet(cctx, "maxmemory-policy").Result()
		if err != nil {
			s.log.Info("redis store: could not read maxmemory-policy (CONFIG GET refused?); make sure it is noeviction or volatile-*", "node", c.Options().Addr, "err", err)
			return nil
		}
		if p := m["maxmemory-policy"]; p != "noeviction" && !strings.HasPrefix(p, "volatile-") {
			s.log.Warn("redis store: maxmemory-policy can evict Leash keys (rules, counters, leases); use noeviction or volatile-*",
				"node", c.Options().Addr, "maxmemory-policy", p)
		}
		return nil
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		_ = c.ForEachMaster(ctx, check)
	case *redis.Client:
		_ = check(ctx, c)
	}
}

// loadScripts loads every script up front (on every master in a cluster) so the first
// calls are EVALSHAs; a failure here is harmless (a decision's script is loaded when Redis
// answers NOSCRIPT, the others fall back to EVAL).
func (s *conn) loadScripts(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 2*s.opTimeout)
	defer cancel()
	for _, lua := range s.scripts.All() {
		if err := lua.Load(lctx, s.client).Err(); err != nil {
			s.log.Debug("redis store: loading a script failed; it will load on first use", "err", err)
			return
		}
	}
}

// rulesVersion reads the rules version (0 before any rule write) within ReadTimeout.
func (s *conn) rulesVersion(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opTimeout)
	defer cancel()
	v, err := s.client.Get(ctx, s.keys.RulesVersion()).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// opCtx bounds one store operation by ReadTimeout: the caller's context when its
// deadline is sooner, else a shared one (respipe.SharedDeadline: no timer per call).
func (s *conn) opCtx(ctx context.Context) context.Context {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.opTimeout {
		return ctx
	}
	return s.opDeadline.Context()
}

// nowArg is the scripts' time argument: "t" (Redis TIME) or the test clock's Unix ms.
func (s *conn) nowArg() string {
	if s.clock == nil {
		return "t"
	}
	return strconv.FormatInt(s.clock.Now().UnixMilli(), 10)
}

// NowMS returns Redis's clock (TIME) in Unix milliseconds, or the test clock's.
func (s *Decider) NowMS(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	if s.clock != nil {
		return s.clock.Now().UnixMilli(), nil
	}
	ctx = s.opCtx(ctx)
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	return t.UnixMilli(), nil
}

// Ping reports whether Redis answers (every master, in a cluster) within ReadTimeout.
func (s *Pinger) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return errClosed
	}
	ctx = s.opCtx(ctx)
	err := s.ping(ctx)
	s.noteOutcome(err)
	return err
}

// noteOutcome records how a call to Redis ended: a success, or a failure that says Redis
// is not answering (the connection down, a timeout). A script's error reply is neither.
func (s *conn) noteOutcome(err error) {
	var reply respipe.ReplyError
	switch {
	case err == nil:
		// Written only when a failure came after the last success: every decision call
		// ends here, and a write per call would have every core write one shared word.
		if s.lastOK.Load() < s.lastDown.Load() {
			s.lastOK.Store(time.Now().UnixNano())
		}
	case errors.As(err, &reply), errors.Is(err, context.Canceled):
	default:
		s.lastDown.Store(time.Now().UnixNano())
	}
}

// answering reports whether Redis answered the last call made to it.
func (s *conn) answering() bool { return s.lastOK.Load() >= s.lastDown.Load() }

func (s *conn) ping(ctx context.Context) error {
	if s.cluster != nil {
		return s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.Ping(ctx).Err()
		})
	}
	return s.client.Ping(ctx).Err()
}

// Close stops the rule-cache poller and closes the connections. It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.stop != nil {
			s.stop()
		}
		s.pipes.Close()
		s.wg.Wait()
		s.closeErr = s.client.Close()
		s.opDeadline.Stop()
	})
	return s.closeErr
}

// run executes lua through go-redis with EVALSHA (EVAL on NOSCRIPT) within ReadTimeout and
// returns its integer array reply: for the scripts that are not decisions.
func (s *conn) run(ctx context.Context, lua *script, keys []string, args ...any) ([]int64, error) {
	ctx = s.opCtx(ctx)
	return s.evalInts(ctx, lua, keys, args...)
}

// PoolStats is the state of the connection pools (all nodes of a cluster together).
type PoolStats struct {
	// Conns is the number of open connections, Idle of them unused right now.
	Conns, Idle uint32
	// Timeouts counts waits for a free connection that timed out (PoolTimeout).
	Timeouts uint32
}

// PoolStats returns the connection pools' state, for metrics: Conns never exceeds, per
// node, the pool size plus go-redis's pipeline pool plus the decisions' one connection.
func (s *Store) PoolStats() PoolStats {
	st := s.client.PoolStats()
	out := PoolStats{Conns: st.TotalConns + uint32(s.pipes.Conns()), Idle: st.IdleConns, Timeouts: st.Timeouts}
	if p := st.PipelineStats; p != nil {
		out.Conns += p.TotalConns
		out.Idle += p.IdleConns
		out.Timeouts += p.Timeouts
	}
	return out
}
