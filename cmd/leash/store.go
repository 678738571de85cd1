package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/leashd/leash/cmd/leash/setup"
	"github.com/leashd/leash/config"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/hotpath"
	"github.com/leashd/leash/metrics"
	"github.com/leashd/leash/store/diskstore"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/store/redisstore"
	"github.com/prometheus/client_golang/prometheus"
)

// openStore opens store.backend (spec §11) and registers its gauges and counters.
func openStore(ctx context.Context, cfg *config.Config, registry *metrics.Metrics, log *slog.Logger) (engine.Store, error) {
	switch cfg.Store.Backend {
	case "disk":
		store, err := openDiskStore(ctx, cfg.Store.Disk, registry, log)
		if err != nil {
			return nil, err // not a nil *diskstore.Store in the interface
		}
		return store, nil
	case "memory":
		return openMemoryStore(cfg.Store.Memory, registry), nil
	case "redis":
		store, err := openRedisStore(ctx, cfg.Store.Redis, registry, log)
		if err != nil {
			return nil, err // not a nil *redisstore.Store in the interface
		}
		return store, nil
	default:
		return nil, fmt.Errorf("store.backend %q is not supported", cfg.Store.Backend)
	}
}

// openDiskStore opens the disk store in store.disk.path (spec §11.5) and logs the
// directory's absolute path; another process holding it is an error that says so.
func openDiskStore(ctx context.Context, diskCfg config.Disk, registry *metrics.Metrics, log *slog.Logger) (*diskstore.Store, error) {
	abs, err := filepath.Abs(diskCfg.Path)
	if err != nil {
		return nil, fmt.Errorf("store.disk.path %q: %w", diskCfg.Path, err)
	}
	start := time.Now()
	s, err := diskstore.Open(ctx, diskstore.Options{Path: abs, SyncInterval: diskCfg.SyncInterval, MaxEntries: diskCfg.MaxEntries, Logger: log})
	if errors.Is(err, diskstore.ErrLocked) {
		return nil, fmt.Errorf("store.disk.path %s is in use by another leash process: stop it, or set store.disk.path (LEASH_STORE_DISK_PATH) to another directory: %w", abs, err)
	}
	if err != nil {
		return nil, fmt.Errorf("store.disk.path %s: %w", abs, err)
	}
	log.Info("disk store open", "path", abs, "sync_interval_ms", diskCfg.SyncInterval.Milliseconds(),
		"open_ms", time.Since(start).Milliseconds())
	registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "leash_diskstore_evictions_total",
		Help: "Rate counters evicted from the disk store to stay within store.disk.max_entries.",
	}, func() float64 { return float64(s.Evictions()) }))
	registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "leash_diskstore_entries",
		Help: "Entries held by the disk store (one per rate counter and one per lease), expired ones not yet reclaimed included; at most store.disk.max_entries.",
	}, func() float64 { return float64(s.Len()) }))
	return s, nil
}

// openMemoryStore builds the memory store (spec §11.1).
func openMemoryStore(memoryCfg config.Memory, registry *metrics.Metrics) *memstore.Store {
	s := memstore.New(memstore.Options{MaxEntries: memoryCfg.MaxEntries})
	registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "leash_memstore_evictions_total",
		Help: "Rate counters evicted from the memory store to stay within store.memory.max_entries.",
	}, func() float64 { return float64(s.Evictions()) }))
	registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "leash_memstore_entries",
		Help: "Entries held by the memory store (one per rate counter and one per lease), expired ones not yet reclaimed included; at most store.memory.max_entries.",
	}, func() float64 { return float64(s.Len()) }))
	return s
}

// openRedisStore connects to Redis, single node, Cluster or Sentinel (spec §11.2).
func openRedisStore(ctx context.Context, redisCfg config.Redis, registry *metrics.Metrics, log *slog.Logger) (*redisstore.Store, error) {
	tlsCfg, err := setup.RedisTLS(redisCfg.TLS)
	if err != nil {
		return nil, err
	}
	opts := redisstore.Options{
		Prefix: redisCfg.Prefix, Username: redisCfg.Username, Password: redisCfg.Password, WaitReplicas: redisCfg.WaitReplicas,
		DialTimeout: redisCfg.DialTimeout, ReadTimeout: redisCfg.ReadTimeout, WriteTimeout: redisCfg.WriteTimeout,
		PoolSize: redisCfg.PoolSize, Logger: log, TLS: tlsCfg,
	}
	switch redisCfg.Mode() {
	case config.RedisCluster:
		opts.ClusterAddrs = redisCfg.ClusterAddrs
	case config.RedisSentinel:
		opts.Sentinel = redisstore.Sentinel{Master: redisCfg.Sentinel.Master, Addrs: redisCfg.Sentinel.Addrs}
	default:
		opts.URL = redisCfg.URL
	}
	redisstore.RouteDriverLogs(log)
	s, err := redisstore.Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	registry.MustRegister(
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
}

// reserving puts the hot path (spec §4.13) above store when it can reserve (Redis) and
// store.redis.reservations is on, and registers its counters; nil otherwise.
func reserving(cfg *config.Config, store engine.Store, registry *metrics.Metrics, log *slog.Logger) *hotpath.Reservations {
	p, ok := store.(hotpath.Port)
	if !ok || cfg.Store.Backend != "redis" || !cfg.Store.Redis.Reservations {
		return nil
	}
	h := hotpath.New(store, p, hotpath.Options{Logger: log})
	registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leash_redis_reserved_decisions_total",
			Help: "Requests decided from a slice this instance reserved, without a call to Redis (spec §4.13).",
		}, func() float64 { local, _ := h.Stats(); return float64(local) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leash_redis_reserve_calls_total",
			Help: "Calls to Redis that reserved a slice or gave one back (spec §4.13).",
		}, func() float64 { _, calls := h.Stats(); return float64(calls) }),
	)
	return h
}
