package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/adapter/rlqs"
	"github.com/leashd/leash/adapter/rls"
	"github.com/leashd/leash/adapter/xds"
	"github.com/leashd/leash/admin"
	"github.com/leashd/leash/cmd/leash/setup"
	"github.com/leashd/leash/config"
	"github.com/leashd/leash/console"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/accounts"
	"github.com/leashd/leash/engine/hotpath"
	"github.com/leashd/leash/engine/webhooks"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/httpapi"
	"github.com/leashd/leash/internal/devkeys"
	"github.com/leashd/leash/metrics"
	"github.com/leashd/leash/store/diskstore"
	"github.com/leashd/leash/tracing"
	"github.com/leashd/leash/webhook"
	"github.com/leashd/leash/webhook/ssrf"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
)

// server is `leash serve`: newServer opens its parts one step each (nothing runs yet),
// Run starts every goroutine and serves, and shutdown stops it all in the order of spec
// §12.3.
type server struct {
	cfg     *config.Config
	log     *slog.Logger
	paths   []string // the config files, watched for reloads
	environ []string // the environment the config files are layered with

	metrics     *metrics.Metrics
	tracing     *tracing.Tracing           // nil when tracing.exporter is none
	store       engine.Store               // the store as opened; closed last
	dataDir     string                     // the disk store's directory, absolute; "" on another store
	hot         *hotpath.Reservations      // the hot path above a Redis store (spec §4.13); nil when off
	measured    *metrics.InstrumentedStore // the store timed (and traced): what everything uses
	engine      *wiring.Engine
	guard       *engine.AuthGuard // failed authentication per client address (spec §15.7)
	envoyConfig *domains.Config   // the Envoy config at start; the reloader holds the current one
	rls         *rls.Service
	quota       *rlqs.Service
	xdsTLS      *tls.Config // nil: plaintext to the xDS server
	admin       *admin.Handler

	listeners // bound by newServer, served by Run, drained by shutdown

	deliverer *webhook.Deliverer
	wake      chan struct{} // an event was queued here: deliver without waiting for the poll

	// Started by Run, stopped by shutdown, each at its own step.
	flush     *group // the usage flush loop; flushErr is its result
	flushErr  error
	webhooks  *group // the webhook worker
	xdsClient *group
	watchers  *group // config watcher, gRPC health watcher, the reloader's descriptor watcher
	accounts  *group // the poll of the admin API's accounts (spec §15.2)
	reloader  *envoyReloader

	undo cleanups // what newServer's steps opened, closed again if a later step fails
}

// newServer opens, in order: the accounts, tracing, the store, the engine, the Envoy
// services, the listeners with their servers, and the webhook worker. Nothing is served
// yet. When a step fails, what the steps before it opened is closed again and the error
// is a *startError naming the step.
func newServer(ctx context.Context, cfg *config.Config, paths, environ []string, stdout io.Writer, log *slog.Logger) (_ *server, err error) {
	s := &server{cfg: cfg, log: log, paths: paths, environ: environ, metrics: metrics.New(), wake: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			s.undo.run()
		}
	}()
	warnTestOnly(cfg, log)
	if err = s.openTracing(ctx); err != nil {
		return nil, err
	}
	if err = s.openStore(ctx); err != nil {
		return nil, err
	}
	dir, fresh, err := s.directory()
	if err != nil {
		return nil, err
	}
	s.newEngine(dir)
	if err = s.loadAccounts(ctx); err != nil {
		return nil, err
	}
	if err = s.newEnvoy(dir); err != nil {
		return nil, err
	}
	// Bind every listener before serving, so a taken port is a start-up error.
	for _, bind := range []func() error{s.bindHTTP, s.bindAdmin, s.bindGRPC, s.bindJSON} {
		if err = bind(); err != nil {
			return nil, err
		}
	}
	s.newDeliverer()
	fresh.print(stdout, portOf(s.httpLn.Addr().String()), cfg.Store.Backend, s.dataDir)
	if !cfg.HasAccounts() && cfg.Console.Enabled {
		scheme := "http"
		if cfg.HTTP.TLS.CertFile != "" {
			scheme = "https"
		}
		fmt.Fprintf(stdout, "The web console is at %s://localhost%s/console/: sign in with either key.\n\n",
			scheme, portOf(s.httpLn.Addr().String()))
	}
	return s, nil
}

// openTracing sets up tracing (spec §12.8).
func (s *server) openTracing(ctx context.Context) error {
	tr, err := newTracing(ctx, s.cfg.Tracing, s.log)
	if err != nil {
		return &startError{msg: "cannot set up tracing", err: err}
	}
	s.tracing = tr
	s.undo.push(func() { shutdownTracing(context.Background(), tr, s.log) })
	return nil
}

// openStore opens store.backend; every use goes through s.measured, which times each
// operation and traces it when tracing is on.
func (s *server) openStore(ctx context.Context) error {
	store, err := openStore(ctx, s.cfg, s.metrics, s.log)
	if err != nil {
		return &startError{msg: "cannot open the store", attrs: []any{"backend", s.cfg.Store.Backend}, err: err}
	}
	s.store = store
	s.undo.push(func() { _ = store.Close() })
	if s.cfg.Store.Backend == "disk" {
		s.dataDir, _ = filepath.Abs(s.cfg.Store.Disk.Path) // openStore resolved it already
	}
	var decided engine.Store = store
	if s.hot = reserving(s.cfg, store, s.metrics, s.log); s.hot != nil {
		s.undo.push(func() { s.closeHotPath() })
		decided = hotpath.Over(store, s.hot)
	}
	var tracer trace.Tracer
	if s.tracing != nil {
		tracer = s.tracing.Tracer()
	}
	s.measured = s.metrics.InstrumentTraced(decided, tracer)
	return nil
}

// directory builds the accounts and operators (see directory); on the disk store the dev
// keys it generates are kept (as digests) in the store's directory and those kept are
// used again.
func (s *server) directory() (*engine.Directory, devKeys, error) {
	var kept devkeys.Digests
	if s.dataDir != "" {
		var err error
		if kept, err = devkeys.Load(s.dataDir); err != nil {
			return nil, devKeys{}, &startError{msg: "cannot read the dev keys", attrs: []any{"path", s.dataDir}, err: err}
		}
	}
	dir, keys, err := directory(s.cfg, s.environ, kept, s.log)
	if err != nil {
		return nil, devKeys{}, &startError{msg: "invalid accounts", err: err}
	}
	if s.dataDir != "" && keys.generated() {
		if err := devkeys.Save(s.dataDir, keys.digests); err != nil {
			return nil, devKeys{}, &startError{msg: "cannot keep the dev keys", attrs: []any{"path", s.dataDir}, err: err}
		}
	}
	return dir, keys, nil
}

// closeHotPath gives every slice the hot path holds back to Redis, before the store
// closes.
func (s *server) closeHotPath() {
	if s.hot == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.hot.Close(ctx)
}

// newEngine builds the engine on the store; a queued webhook event wakes the deliverer.
// The admin API's accounts are kept in the store's AccountStore, timed like the other
// roles; every change made through it is counted.
func (s *server) newEngine(dir *engine.Directory) {
	cfg := s.cfg
	var accountStore engine.AccountStore
	if as, ok := s.store.(engine.AccountStore); ok {
		var tracer trace.Tracer
		if s.tracing != nil {
			tracer = s.tracing.Tracer()
		}
		accountStore = s.metrics.InstrumentAccounts(as, tracer)
	}
	audit, _ := s.store.(engine.AuditStore) // the audit log (spec §15.10): both stores keep it
	changes := s.metrics.AdminChanges()
	s.engine = wiring.New(engine.RolesOf(s.measured), dir, wiring.Options{Logger: s.log, LocalCacheMaxEntries: cfg.Envoy.LocalCache.MaxEntries,
		Accounts: accountStore, Audit: audit, OnAdminChange: func(a accounts.AdminAction) { changes(string(a)) },
		Observer: s.metrics.Observer(cfg.Metrics.Namespaces, cfg.Metrics.NearLimitRatio), Webhooks: webhooks.Options{
			Screen:   webhook.Screen(webhookPolicy(cfg.Webhooks), nil),
			Enqueued: s.wakeDeliverer,
		}})
	s.metrics.LocalCache(s.engine.Limits.LocalCacheHits)
}

// loadAccounts reads the admin API's accounts before serving; a store that does not answer
// in 10 s, or an API account whose id the configuration also defines, stops start-up
// (spec §15.2).
func (s *server) loadAccounts(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.engine.Accounts.LoadAccounts(ctx); err != nil {
		return &startError{msg: "invalid accounts", err: err}
	}
	return nil
}

// wakeDeliverer tells the webhook worker an event was queued, without blocking.
func (s *server) wakeDeliverer() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// webhookPolicy is the address screening of webhook URLs and deliveries (spec §8.2).
func webhookPolicy(hooks config.Webhooks) ssrf.Policy {
	return ssrf.Policy{AllowHTTP: hooks.AllowHTTP, AllowPrivateTargets: hooks.AllowPrivateTargets}
}

// newEnvoy checks the Envoy config (descriptors, routing) against the accounts and builds
// the RLS and RLQS services (spec §9, §14).
func (s *server) newEnvoy(dir *engine.Directory) error {
	envoyCfg, err := setup.Envoy(s.cfg)
	if err == nil {
		err = envoyCfg.Validate(dir)
	}
	if err != nil {
		return &startError{msg: "invalid envoy config", err: err}
	}
	if s.xdsTLS, err = xdsTLS(s.cfg.Envoy.XDS); err != nil {
		return &startError{msg: "invalid envoy.xds.tls", err: err}
	}
	s.envoyConfig = envoyCfg
	s.rls = rls.NewService(envoyCfg, s.rlsOptions())
	s.quota = rlqs.NewService(s.rlqsOptions())
	return nil
}

// bound records a listener that start-up must close again if a later step fails, or the
// error of binding it, naming the setting (and variable) that moves the listener.
func (s *server) bound(name, setting, addr string, ln net.Listener, err error) (net.Listener, error) {
	if err != nil {
		attrs := []any{"listener", name, "addr", addr, "setting", setting}
		if errors.Is(err, syscall.EADDRINUSE) {
			attrs = append(attrs, "hint", fmt.Sprintf("another process is listening on %s: stop it, or set %s (%s) to a free address",
				addr, setting, "LEASH_"+strings.ToUpper(strings.ReplaceAll(setting, ".", "_"))))
		}
		return nil, &startError{msg: "cannot listen", attrs: attrs, err: err}
	}
	s.undo.push(func() { _ = ln.Close() })
	return ln, nil
}

// bindHTTP binds the /v1 listener (HTTPS with http.tls) and builds its server.
func (s *server) bindHTTP() (err error) {
	httpCfg := s.cfg.HTTP
	ln, err := listen(httpCfg.Addr, httpCfg.TLS.CertFile, httpCfg.TLS.KeyFile)
	if s.httpLn, err = s.bound("http", "http.addr", httpCfg.Addr, ln, err); err != nil {
		return err
	}
	s.guard = engine.NewAuthGuard(engine.AuthGuardOptions{})
	s.metrics.AuthGuard(s.guard.Failures, s.guard.Refused)
	api := httpapi.New(httpapi.Options{Engine: s.engine, Metrics: s.metrics, Logger: s.log, Tracing: s.tracing, AuthGuard: s.guard,
		TrustedProxies: httpCfg.Proxies(), Backup: s.backup()})
	var h http.Handler = api
	if s.cfg.Console.Enabled {
		h = httpapi.Front(api, console.Mount(api)) // spec §16; 431 answered by the API, spec §3.10
	}
	s.httpSrv = httpapi.NewServerWith(httpCfg.Addr, h, httpTimeouts(httpCfg))
	s.httpSrv.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	return nil
}

// backup is the disk store's backup for POST /v1/admin/backup (spec §15.11): a
// checkpoint of the store and the dev keys' digests; nil on another store.
func (s *server) backup() func(ctx context.Context, dir string) error {
	ds, ok := s.store.(*diskstore.Store)
	if !ok {
		return nil
	}
	return func(ctx context.Context, dir string) error {
		start := time.Now()
		if err := ds.Backup(ctx, dir); err != nil {
			return err
		}
		if err := devkeys.Copy(s.dataDir, dir); err != nil {
			return err
		}
		s.log.Info("backup taken", "duration_ms", time.Since(start).Milliseconds())
		return nil
	}
}

// bindAdmin binds the admin listener and builds its handler (spec §12.1); /readyz pings
// the store.
func (s *server) bindAdmin() (err error) {
	addr := s.cfg.Admin.Addr
	ln, err := net.Listen("tcp", addr)
	if s.adminLn, err = s.bound("admin", "admin.addr", addr, ln, err); err != nil {
		return err
	}
	s.admin = admin.New(admin.Options{Ping: s.engine.Ping, Gatherer: s.metrics.Registry, Pprof: s.cfg.Admin.Pprof})
	s.metrics.Readiness(func() bool { return s.admin.Ready(context.Background()) })
	s.adminSrv = httpapi.NewServer(addr, s.admin)
	return nil
}

// bindGRPC binds the Envoy gRPC listener, off when grpc.addr is "", and builds its
// server: RLS, RLQS and gRPC health (spec §9, §14).
func (s *server) bindGRPC() (err error) {
	grpcCfg := s.cfg.GRPC
	if grpcCfg.Addr == "" {
		return nil
	}
	var ln net.Listener
	tlsConfig, err := grpcTLS(grpcCfg.TLS)
	if err == nil {
		ln, err = net.Listen("tcp", grpcCfg.Addr)
	}
	if s.grpcLn, err = s.bound("grpc", "grpc.addr", grpcCfg.Addr, ln, err); err != nil {
		return err
	}
	opts := append(s.metrics.GRPC().ServerOptions(), s.tracing.ServerOptions()...)
	opts = append(opts, s.quota.ServerOptions()...) // counts RLQS streams and actions sent
	s.grpcSrv, s.grpcHealth = rls.NewServerWith(s.rls, tlsConfig, rls.DefaultLimits(), opts...)
	rls.RegisterQuota(s.grpcSrv, s.grpcHealth, s.quota)
	s.undo.push(s.grpcSrv.Stop)
	return nil
}

// bindJSON binds the peer's /json and /healthcheck listener, off when envoy.json_addr is
// "" (spec §9.15); /healthcheck answers as /readyz does, so it fails while draining.
func (s *server) bindJSON() (err error) {
	addr := s.cfg.Envoy.JSONAddr
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if s.jsonLn, err = s.bound("json", "envoy.json_addr", addr, ln, err); err != nil {
		return err
	}
	handler := rls.NewJSONHandler(s.rls, rls.JSONOptions{Logger: s.log, Healthy: s.healthy})
	s.jsonSrv = httpapi.NewServerWith(addr, handler, httpTimeouts(s.cfg.HTTP))
	s.jsonSrv.ErrorLog = s.httpSrv.ErrorLog
	return nil
}

// healthy is the peer's /healthcheck: an error while /readyz would answer 503.
func (s *server) healthy(ctx context.Context) error {
	if !s.admin.Ready(ctx) {
		return errNotReady
	}
	return nil
}

// newDeliverer builds the webhook worker (spec §8.5); Run starts it.
func (s *server) newDeliverer() {
	for _, o := range webhook.Outcomes() {
		s.metrics.InitWebhookOutcome(string(o))
	}
	hooks := s.cfg.Webhooks
	s.deliverer = webhook.New(webhook.Options{
		Store: s.measured, Account: s.engine.Accounts.Account, Policy: webhookPolicy(hooks),
		Timeout: hooks.Timeout, MaxAttempts: hooks.MaxAttempts,
		BackoffBase: hooks.BackoffBase, BackoffMax: hooks.BackoffMax,
		Wake: s.wake, ShutdownGrace: s.cfg.Shutdown.Timeout / 4,
		Observe:   func(o webhook.Outcome) { s.metrics.WebhookDelivery(string(o)) },
		Depth:     s.metrics.WebhookOutboxDepth,
		UserAgent: "Leash-Webhook/" + buildVersion(), Logger: s.log,
	})
}

// Run starts every goroutine and serves until ctx ends (SIGTERM or SIGINT) or a listener
// fails; it returns the exit status so far: 0, or 1 after a failed listener. Call
// shutdown next, with that status.
func (s *server) Run(ctx context.Context) int {
	s.startWatchers() // first: an edit made since the start-up load is applied at once
	s.startBackground()
	s.startXDS()
	s.serve()
	s.log.Info("leash serving", "version", buildVersion(), "http", s.httpLn.Addr().String(), "grpc", addrOf(s.grpcLn),
		"json", addrOf(s.jsonLn), "admin", s.adminLn.Addr().String(), "store", s.cfg.Store.Backend)
	select {
	case <-ctx.Done():
		s.log.Info("shutting down", "drain_delay_ms", s.cfg.Shutdown.DrainDelay.Milliseconds())
		return 0
	case err := <-s.serveErr:
		s.log.Error("listener failed", "err", err)
		return 1
	}
}

// addrOf is a listener's address, "" for a listener that is off.
func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// startBackground starts the capabilities' background work, each in its own group that
// shutdown stops: the poll of the admin API's accounts, the usage flush loop (spec §7.3;
// stopping it flushes once more), and the webhook worker.
func (s *server) startBackground() {
	s.accounts = newGroup()
	s.accounts.Go(s.engine.Accounts.WatchAccounts)
	s.flush = newGroup()
	s.flush.Go(func(ctx context.Context) { s.flushErr = s.engine.Usage.Run(ctx, s.cfg.Shutdown.Timeout/2) })
	s.webhooks = newGroup()
	s.webhooks.Go(s.deliverer.Run)
}

// startWatchers starts the live reloads (spec §10.4): the config files' watcher and,
// through the reloader, the descriptor files' (spec §9.11); and the gRPC health watcher,
// which turns health NOT_SERVING while the store is down.
func (s *server) startWatchers() {
	s.watchers = newGroup()
	s.reloader = newEnvoyReloader(s.watchers.ctx, s.engine, s.rls, s.envoyConfig, s.cfg.Envoy.ConfigPaths, s.log)
	if len(s.paths) > 0 {
		s.watchers.Go(func(ctx context.Context) { config.Watch(ctx, s.paths, s.environ, s.cfg, s.reloader.applyConfig, s.log) })
	}
	if s.grpcSrv != nil {
		s.watchers.Go(func(ctx context.Context) {
			rls.WatchHealth(ctx, s.grpcHealth, s.engine.Ping, time.Second, s.cfg.Store.Redis.ReadTimeout, s.log)
		})
	}
}

// stopWatchers stops the watchers, then the reloader's descriptor watcher (which the
// config watcher may restart until it has stopped).
func (s *server) stopWatchers() {
	s.watchers.stop()
	s.reloader.wait()
}

// startXDS starts the xDS client of descriptor configs, when envoy.xds.address is set
// (spec §9.14).
func (s *server) startXDS() {
	s.xdsClient = newGroup()
	xdsCfg := s.cfg.Envoy.XDS
	if xdsCfg.Address == "" {
		return
	}
	updated, connected := s.metrics.XDS()
	s.xdsClient.Go(func(ctx context.Context) {
		xds.Run(ctx, xds.Options{Address: xdsCfg.Address, NodeID: xdsCfg.NodeID, TLS: s.xdsTLS, Apply: s.reloader.applyXDS, Logger: s.log,
			Updated: updated, Connected: connected,
		})
	})
}

// shutdown stops the service in the order of spec §12.3, within shutdown.timeout, and
// returns the exit status: code, or 1 when requests could not complete in time or the
// final usage flush failed.
func (s *server) shutdown(code int) int {
	budget := s.cfg.Shutdown.Timeout
	deadline := time.Now().Add(budget)
	// 1. /readyz turns 503 so load balancers stop routing here; keep serving meanwhile.
	s.admin.Drain()
	time.Sleep(min(s.cfg.Shutdown.DrainDelay, time.Until(deadline)/2))
	// 2. Webhook deliveries stop claiming; those in flight get a grace period (the
	// outbox keeps the rest).
	s.webhooks.cancel()
	// 3. Close the listeners and let every request already received complete; the xDS
	// client stops.
	if !s.drain(deadline.Add(-budget/4), s.quota.Shutdown, s.log) {
		code = 1
	}
	s.webhooks.wait()
	s.xdsClient.stop()
	// 4. Flush usage (the flush loop does a final flush when stopped).
	s.flush.stop()
	if s.flushErr != nil {
		s.log.Error("final usage flush failed", "err", s.flushErr)
		code = 1
	}
	// 5. Flush the spans not yet exported (spec §12.8), close the admin listener, stop
	// the reloads and close the store.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	shutdownTracing(ctx, s.tracing, s.log)
	_ = s.adminSrv.Shutdown(ctx)
	cancel()
	s.serving.Wait()
	s.stopWatchers()
	s.accounts.stop()
	s.closeHotPath()
	if err := s.store.Close(); err != nil {
		s.log.Error("store close", "err", err)
	}
	s.log.Info("stopped", "exit_code", code)
	return code
}

// listeners are the service's listeners and the servers on them. grpcLn, jsonLn and their
// servers are nil when off.
type listeners struct {
	httpLn, adminLn, grpcLn, jsonLn net.Listener
	httpSrv, adminSrv, jsonSrv      *http.Server
	grpcSrv                         *grpc.Server
	grpcHealth                      *health.Server

	serving  sync.WaitGroup // the Serve loops
	serveErr chan error     // each Serve loop's end; the first ends Run
}

// serve serves every listener bound, each in its own goroutine that drain (or a failed
// listener) ends.
func (l *listeners) serve() {
	l.serveErr = make(chan error, 4)
	serve := func(serveOn func() error) { l.serving.Go(func() { l.serveErr <- serveOn() }) }
	serve(func() error { return l.httpSrv.Serve(l.httpLn) })
	serve(func() error { return l.adminSrv.Serve(l.adminLn) })
	if l.jsonSrv != nil {
		serve(func() error { return l.jsonSrv.Serve(l.jsonLn) })
	}
	if l.grpcSrv != nil {
		serve(func() error { return l.grpcSrv.Serve(l.grpcLn) })
	}
}

// drain closes the /v1, gRPC and /json listeners and waits for the requests already
// received until deadline, when gRPC is stopped hard; endStreams ends the long-lived gRPC
// streams (RLQS) first. It returns false when some requests did not complete.
func (l *listeners) drain(deadline time.Time, endStreams func(), log *slog.Logger) bool {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	var graceful, hard sync.WaitGroup
	if l.grpcSrv != nil {
		hard.Go(func() { <-ctx.Done(); l.grpcSrv.Stop() }) // bound the graceful stop
		endStreams()                                       // RLQS streams end, so proxies reconnect elsewhere (spec §14.1)
		graceful.Go(l.grpcSrv.GracefulStop)
	}
	ok := true
	if err := l.httpSrv.Shutdown(ctx); err != nil {
		log.Error("http drain incomplete", "err", err)
		ok = false
	}
	if l.jsonSrv != nil {
		if err := l.jsonSrv.Shutdown(ctx); err != nil {
			log.Error("json drain incomplete", "err", err)
			ok = false
		}
	}
	graceful.Wait()
	cancel()
	hard.Wait()
	return ok
}
