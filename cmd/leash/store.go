package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/leashd/leash/config"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/memstore"
	"github.com/leashd/leash/engine/redisstore"
	"github.com/leashd/leash/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// openStore opens store.backend (spec §11) and registers its gauges and counters.
func openStore(ctx context.Context, cfg *config.Config, m *metrics.Metrics, log *slog.Logger) (engine.Store, error) {
	switch cfg.Store.Backend {
	case "memory":
		return openMemoryStore(cfg.Store.Memory, m), nil
	case "redis":
		s, err := openRedisStore(ctx, cfg.Store.Redis, m, log)
		if err != nil {
			return nil, err // not a nil *redisstore.Store in the interface
		}
		return s, nil
	default:
		return nil, fmt.Errorf("store.backend %q is not supported", cfg.Store.Backend)
	}
}

// openMemoryStore builds the memory store (spec §11.1).
func openMemoryStore(c config.Memory, m *metrics.Metrics) *memstore.Store {
	s := memstore.New(memstore.Options{MaxEntries: c.MaxEntries})
	m.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "leash_memstore_evictions_total",
		Help: "Rate counters evicted from the memory store to stay within store.memory.max_entries.",
	}, func() float64 { return float64(s.Evictions()) }))
	m.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "leash_memstore_entries",
		Help: "Entries held by the memory store (one per rate counter and one per lease), expired ones not yet reclaimed included; at most store.memory.max_entries.",
	}, func() float64 { return float64(s.Len()) }))
	return s
}

// openRedisStore connects to Redis, single node, Cluster or Sentinel (spec §11.2).
func openRedisStore(ctx context.Context, r config.Redis, m *metrics.Metrics, log *slog.Logger) (*redisstore.Store, error) {
	o := redisstore.Options{
		Prefix: r.Prefix, Username: r.Username, Password: r.Password, WaitReplicas: r.WaitReplicas,
		DialTimeout: r.DialTimeout, ReadTimeout: r.ReadTimeout, WriteTimeout: r.WriteTimeout,
		PoolSize: r.PoolSize, Logger: log,
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
}
