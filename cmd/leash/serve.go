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
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leashd/leash/adapter/rlqs"
	"github.com/leashd/leash/adapter/rls"
	"github.com/leashd/leash/adapter/xds"
	"github.com/leashd/leash/admin"
	"github.com/leashd/leash/config"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/memstore"
	"github.com/leashd/leash/engine/redisstore"
	"github.com/leashd/leash/httpapi"
	"github.com/leashd/leash/internal/setup"
	"github.com/leashd/leash/metrics"
	"github.com/leashd/leash/tracing"
	"github.com/leashd/leash/webhook"
	"github.com/leashd/leash/webhook/ssrf"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
)

// errNotReady fails the peer's /healthcheck while /readyz would answer 503.
var errNotReady = errors.New("not ready")

func hashKey(key string) [32]byte { return engine.HashKey(key) }

// serve runs the service until SIGTERM or SIGINT, then shuts down cleanly (spec §12.3):
// /readyz turns 503, listeners close after the drain delay, requests in
// flight complete, usage is flushed, and the process exits 0.
func serve(paths, environ []string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(paths, environ)
	if err != nil {
		fmt.Fprintln(stderr, "leash:", err)
		return 1
	}
	log := newLogger(cfg.Log, stderr)

	dir, err := directory(cfg, environ, stdout, log)
	if err != nil {
		log.Error("invalid accounts", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	m := metrics.New()
	tr, err := newTracing(ctx, cfg.Tracing, log)
	if err != nil {
		log.Error("cannot set up tracing", "err", err)
		return 1
	}
	defer shutdownTracing(context.Background(), tr, log) // early returns; a no-op after the one below
	store, err := openStore(ctx, cfg, m, log)
	if err != nil {
		log.Error("cannot open the store", "backend", cfg.Store.Backend, "err", err)
		return 1
	}
	var tracer trace.Tracer
	if tr != nil {
		tracer = tr.Tracer()
	}
	istore := m.InstrumentTraced(store, tracer)
	policy := ssrf.Policy{AllowHTTP: cfg.Webhooks.AllowHTTP, AllowPrivateTargets: cfg.Webhooks.AllowPrivateTargets}
	wake := make(chan struct{}, 1) // an event was queued here: deliver without waiting for the poll
	eng := engine.New(engine.RolesOf(istore), dir, engine.Options{Logger: log, LocalCacheMaxEntries: cfg.Envoy.LocalCache.MaxEntries,
		Observer: m.Observer(cfg.Metrics.Namespaces, cfg.Metrics.NearLimitRatio), Webhooks: engine.WebhookOptions{
			Screen: webhook.Screen(policy, nil),
			Enqueued: func() {
				select {
				case wake <- struct{}{}:
				default:
				}
			},
		}})
	envoyCfg, err := setup.Envoy(cfg)
	if err == nil {
		err = envoyCfg.Validate(dir)
	}
	if err != nil {
		log.Error("invalid envoy config", "err", err)
		_ = store.Close()
		return 1
	}
	var xdsTLS *tls.Config
	if x := cfg.Envoy.XDS; x.Address != "" && (x.TLS.CAFile != "" || x.TLS.CertFile != "" || x.TLS.KeyFile != "" || x.TLS.ServerName != "") {
		if xdsTLS, err = xds.TLSConfig(x.TLS.CAFile, x.TLS.CertFile, x.TLS.KeyFile, x.TLS.ServerName); err != nil {
			log.Error("invalid envoy.xds.tls", "err", err)
			_ = store.Close()
			return 1
		}
	}
	envoyDecisions := m.Decisions("envoy")
	m.LocalCache(eng.LocalCacheHits)
	e := cfg.Envoy
	svc := rls.NewService(envoyCfg, rls.Options{
		Engine: eng, Accounts: eng.Account, Logger: log,
		ResponseHeaders: e.ResponseHeaders,
		HeaderNames:     rls.HeaderNames{Limit: e.HeaderNames.Limit, Remaining: e.HeaderNames.Remaining, Reset: e.HeaderNames.Reset},
		ShadowMode:      e.ShadowMode, QuotaMode: e.QuotaMode, DynamicMetadata: e.ResponseDynamicMetadata,
		Rules:    m.Rules(),
		Counters: rls.Counters{Decision: envoyDecisions.Inc, ShadowDenial: m.ShadowDenial, GlobalShadow: m.GlobalShadow},
		Trace:    tr != nil,
	})
	rq := m.RLQS()
	quota := rlqs.NewService(rlqs.Options{
		Engine: eng, Demand: istore, Accounts: eng.Account, Config: svc.Config, Logger: log,
		ReportingInterval: e.RLQS.ReportingInterval, TTLIntervals: e.RLQS.TTLIntervals,
		MaxBucketsPerStream: e.RLQS.MaxBucketsPerStream, MaxBucketsPerAccount: e.RLQS.MaxBucketsPerAccount,
		Counters: rlqs.Counters{Streams: rq.Streams, Buckets: rq.Buckets, Sent: rq.Sent, Reported: rq.Reported, Rejected: rq.Rejected},
	})
	adm := admin.New(admin.Options{Ping: eng.Ping, Gatherer: m.Registry, Pprof: cfg.Admin.Pprof})
	m.Readiness(func() bool { return adm.Ready(context.Background()) })
	api := httpapi.New(httpapi.Options{Engine: eng, Metrics: m, Logger: log, Tracing: tr})

	// Bind every listener before serving, so a taken port is a start-up error.
	httpLn, err := listen(cfg.HTTP.Addr, cfg.HTTP.TLS.CertFile, cfg.HTTP.TLS.KeyFile)
	if err != nil {
		log.Error("cannot listen", "listener", "http", "addr", cfg.HTTP.Addr, "err", err)
		_ = store.Close()
		return 1
	}
	adminLn, err := net.Listen("tcp", cfg.Admin.Addr)
	if err != nil {
		log.Error("cannot listen", "listener", "admin", "addr", cfg.Admin.Addr, "err", err)
		_ = httpLn.Close()
		_ = store.Close()
		return 1
	}
	var grpcLn net.Listener
	var grpcTLSConfig *tls.Config
	if cfg.GRPC.Addr != "" {
		if grpcTLSConfig, err = grpcTLS(cfg.GRPC.TLS); err == nil {
			grpcLn, err = net.Listen("tcp", cfg.GRPC.Addr)
		}
		if err != nil {
			log.Error("cannot listen", "listener", "grpc", "addr", cfg.GRPC.Addr, "err", err)
			_ = adminLn.Close()
			_ = httpLn.Close()
			_ = store.Close()
			return 1
		}
	}
	var jsonLn net.Listener
	if cfg.Envoy.JSONAddr != "" {
		if jsonLn, err = net.Listen("tcp", cfg.Envoy.JSONAddr); err != nil {
			log.Error("cannot listen", "listener", "json", "addr", cfg.Envoy.JSONAddr, "err", err)
			if grpcLn != nil {
				_ = grpcLn.Close()
			}
			_ = adminLn.Close()
			_ = httpLn.Close()
			_ = store.Close()
			return 1
		}
	}
	httpSrv := httpapi.NewServerWith(cfg.HTTP.Addr, api, httpTimeouts(cfg.HTTP))
	httpSrv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	adminSrv := httpapi.NewServer(cfg.Admin.Addr, adm)

	flushCtx, stopFlush := context.WithCancel(context.Background())
	flushed := make(chan error, 1)
	go func() { flushed <- eng.Run(flushCtx, cfg.Shutdown.Timeout/2) }()

	for _, o := range webhook.Outcomes() {
		m.InitWebhookOutcome(string(o))
	}
	deliverer := webhook.New(webhook.Options{
		Store: istore, Account: eng.Account, Policy: policy,
		Timeout: cfg.Webhooks.Timeout, MaxAttempts: cfg.Webhooks.MaxAttempts,
		BackoffBase: cfg.Webhooks.BackoffBase, BackoffMax: cfg.Webhooks.BackoffMax,
		Wake: wake, ShutdownGrace: cfg.Shutdown.Timeout / 4,
		Observe:   func(o webhook.Outcome) { m.WebhookDelivery(string(o)) },
		Depth:     m.WebhookOutboxDepth,
		UserAgent: "Leash-Webhook/" + buildVersion(), Logger: log,
	})
	deliverCtx, stopDelivery := context.WithCancel(context.Background())
	delivered := make(chan struct{})
	go func() { deliverer.Run(deliverCtx); close(delivered) }()

	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	reloader := newEnvoyReloader(watchCtx, eng, svc, envoyCfg, cfg.Envoy.ConfigPaths, log)
	defer reloader.wait()
	if len(paths) > 0 {
		go config.Watch(watchCtx, paths, environ, reloader.applyConfig, log)
	}
	// Descriptor configs from the xDS management server (spec §9.14), stopped on shutdown.
	xdsCtx, stopXDS := context.WithCancel(context.Background())
	defer stopXDS()
	xdsDone := make(chan struct{})
	if x := cfg.Envoy.XDS; x.Address != "" {
		updated, connected := m.XDS()
		go func() {
			defer close(xdsDone)
			xds.Run(xdsCtx, xds.Options{Address: x.Address, NodeID: x.NodeID, TLS: xdsTLS, Apply: reloader.applyXDS, Logger: log,
				Updated: updated, Connected: connected,
			})
		}()
	} else {
		close(xdsDone)
	}

	serveErr := make(chan error, 4)
	go func() { serveErr <- httpSrv.Serve(httpLn) }()
	go func() { serveErr <- adminSrv.Serve(adminLn) }()
	// The peer's /json and /healthcheck (spec §9.15); /healthcheck answers as /readyz
	// does, so it fails while draining.
	var jsonSrv *http.Server
	jsonAddr := ""
	if jsonLn != nil {
		jsonSrv = httpapi.NewServerWith(cfg.Envoy.JSONAddr, rls.NewJSONHandler(svc, rls.JSONOptions{
			Logger: log,
			Healthy: func(ctx context.Context) error {
				if !adm.Ready(ctx) {
					return errNotReady
				}
				return nil
			},
		}), httpTimeouts(cfg.HTTP))
		jsonSrv.ErrorLog = httpSrv.ErrorLog
		go func() { serveErr <- jsonSrv.Serve(jsonLn) }()
		jsonAddr = jsonLn.Addr().String()
	}
	grpcAddr := ""
	var grpcSrv *grpc.Server
	if grpcLn != nil {
		var hs *health.Server
		grpcSrv, hs = rls.NewServerWith(svc, grpcTLSConfig, rls.DefaultLimits(), append(m.GRPC().ServerOptions(), tr.ServerOptions()...)...)
		rls.RegisterQuota(grpcSrv, hs, quota)
		go rls.WatchHealth(watchCtx, hs, eng.Ping, time.Second, cfg.Store.Redis.ReadTimeout, log)
		go func() { serveErr <- grpcSrv.Serve(grpcLn) }()
		grpcAddr = grpcLn.Addr().String()
	}
	log.Info("leash serving", "version", buildVersion(), "http", httpLn.Addr().String(), "grpc", grpcAddr, "json", jsonAddr,
		"admin", adminLn.Addr().String(), "store", cfg.Store.Backend)

	code := 0
	select {
	case <-ctx.Done():
		log.Info("shutting down", "drain_delay_ms", cfg.Shutdown.DrainDelay.Milliseconds())
	case err := <-serveErr:
		log.Error("listener failed", "err", err)
		code = 1
	}
	stop()
	deadline := time.Now().Add(cfg.Shutdown.Timeout)

	// 1. /readyz turns 503 so load balancers stop routing here; keep serving meanwhile.
	adm.Drain()
	time.Sleep(min(cfg.Shutdown.DrainDelay, time.Until(deadline)/2))
	// 2. Close the listeners and let every request already received complete; webhook
	// deliveries in flight get a grace period (the outbox keeps the rest).
	stopDelivery()
	sctx, cancel := context.WithDeadline(context.Background(), deadline.Add(-cfg.Shutdown.Timeout/4))
	if grpcSrv != nil {
		go func() { <-sctx.Done(); grpcSrv.Stop() }() // bound the graceful stop
	}
	var drained sync.WaitGroup
	if grpcSrv != nil {
		quota.Shutdown() // RLQS streams end, so proxies reconnect elsewhere (spec §14.1)
		drained.Go(grpcSrv.GracefulStop)
	}
	if err := httpSrv.Shutdown(sctx); err != nil {
		log.Error("http drain incomplete", "err", err)
		code = 1
	}
	if jsonSrv != nil {
		if err := jsonSrv.Shutdown(sctx); err != nil {
			log.Error("json drain incomplete", "err", err)
			code = 1
		}
	}
	drained.Wait()
	<-delivered
	stopXDS()
	<-xdsDone
	cancel()
	// 3. Flush usage (the flush loop does a final flush when stopped).
	stopFlush()
	if err := <-flushed; err != nil {
		log.Error("final usage flush failed", "err", err)
		code = 1
	}
	actx, cancel := context.WithDeadline(context.Background(), deadline)
	// 4. Flush the spans not yet exported (spec §12.8), then close the admin listener.
	shutdownTracing(actx, tr, log)
	_ = adminSrv.Shutdown(actx)
	cancel()
	if err := store.Close(); err != nil {
		log.Error("store close", "err", err)
	}
	log.Info("stopped", "exit_code", code)
	return code
}

// newTracing sets up OpenTelemetry traces from tracing.* (spec §12.8); nil when
// tracing.exporter is none. Export failures are logged as warnings.
func newTracing(ctx context.Context, c config.Tracing, log *slog.Logger) (*tracing.Tracing, error) {
	tr, err := tracing.New(ctx, tracing.Options{Exporter: c.Exporter, Endpoint: c.Endpoint, Insecure: c.Insecure,
		SamplingRatio: c.SamplingRatio, ServiceName: c.ServiceName, ServiceVersion: buildVersion()})
	if err != nil || tr == nil {
		return nil, err
	}
	// The SDK reports export failures through its process-wide handler; route them to
	// the log.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	log.Info("tracing on", "exporter", c.Exporter, "endpoint", c.Endpoint, "sampling_ratio", c.SamplingRatio)
	return tr, nil
}

// shutdownTracing flushes the spans not yet exported (within ctx, and at most 5 s) and
// stops the tracer provider.
func shutdownTracing(ctx context.Context, tr *tracing.Tracing, log *slog.Logger) {
	if tr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		log.Warn("tracing shutdown: spans may be lost", "err", err)
	}
}

// httpTimeouts are the /v1 listener's bounds on slow and idle clients (http.*_timeout).
func httpTimeouts(h config.HTTP) httpapi.Timeouts {
	return httpapi.Timeouts{ReadHeader: h.ReadHeaderTimeout, Read: h.ReadTimeout, Write: h.WriteTimeout, Idle: h.IdleTimeout}
}

// directory builds the accounts: the config's, or with none the dev account on plan
// scale whose key is $LEASH_DEV_API_KEY or generated and printed once.
func directory(cfg *config.Config, environ []string, stdout io.Writer, log *slog.Logger) (*engine.Directory, error) {
	if cfg.HasAccounts() {
		return cfg.Directory()
	}
	key := lookupEnv(environ, config.DevAPIKeyEnv)
	if key == "" {
		key = newAPIKey()
		fmt.Fprintf(stdout, "No accounts configured: account \"dev\" (plan scale) uses API key\n\n    %s\n\n"+
			"  curl -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \\\n"+
			"       -d '{\"namespace\":\"demo\",\"key\":\"user-1\",\"limit\":5,\"window_ms\":60000}' http://localhost%s/v1/limit\n\n",
			key, key, portOf(cfg.HTTP.Addr))
	} else {
		log.Info("dev account uses the API key from " + config.DevAPIKeyEnv)
	}
	return setup.Directory(cfg, engine.HashKey(key))
}

func openStore(ctx context.Context, cfg *config.Config, m *metrics.Metrics, log *slog.Logger) (engine.Store, error) {
	switch cfg.Store.Backend {
	case "memory":
		s := memstore.New(memstore.Options{MaxEntries: cfg.Store.Memory.MaxEntries})
		m.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leash_memstore_evictions_total",
			Help: "Rate counters evicted from the memory store to stay within store.memory.max_entries.",
		}, func() float64 { return float64(s.Evictions()) }))
		m.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leash_memstore_entries",
			Help: "Entries held by the memory store (one per rate counter and one per lease), expired ones not yet reclaimed included; at most store.memory.max_entries.",
		}, func() float64 { return float64(s.Len()) }))
		return s, nil
	case "redis":
		r := cfg.Store.Redis
		tc, err := setup.RedisTLS(r.TLS)
		if err != nil {
			return nil, err
		}
		o := redisstore.Options{
			Prefix: r.Prefix, Username: r.Username, Password: r.Password, WaitReplicas: r.WaitReplicas,
			DialTimeout: r.DialTimeout, ReadTimeout: r.ReadTimeout, WriteTimeout: r.WriteTimeout,
			PoolSize: r.PoolSize, Logger: log, TLS: tc,
		}
		switch r.Mode() {
		case config.RedisCluster:
			o.ClusterAddrs = r.ClusterAddrs
		case config.RedisSentinel:
			o.Sentinel = redisstore.Sentinel{Master: r.Sentinel.Master, Addrs: r.Sentinel.Addrs}
		default:
			o.URL = r.URL
		}
		redisstore.RouteDriverLogs(log)
		s, err := redisstore.Open(ctx, o)
		if err != nil {
			return nil, err
		}
		m.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "leash_redis_pool_connections",
				Help: "Open connections to Redis (all nodes); per node at most store.redis.pool_size, plus 10 for pipelined batches, plus the decisions' one.",
			}, func() float64 { return float64(s.PoolStats().Conns) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "leash_redis_pool_idle_connections",
				Help: "Open connections to Redis not in use right now.",
			}, func() float64 { return float64(s.PoolStats().Idle) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "leash_redis_pool_timeouts_total",
				Help: "Waits for a free Redis connection that timed out.",
			}, func() float64 { return float64(s.PoolStats().Timeouts) }),
		)
		return s, nil
	default:
		return nil, fmt.Errorf("store.backend %q is not supported", cfg.Store.Backend)
	}
}

// listen binds addr, with TLS when both files are set; the certificate is re-read when
// its files change.
func listen(addr, certFile, keyFile string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || certFile == "" {
		return ln, err
	}
	rl, err := newCertReloader(certFile, keyFile)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: rl.get, NextProtos: []string{"h2", "http/1.1"}}), nil
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func lookupEnv(environ []string, name string) string {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

func portOf(addr string) string {
	if i := strings.LastIndex(addr, ":"); i >= 0 {
		return addr[i:]
	}
	return ""
}
