package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/adapter/rlqs"
	"github.com/leashd/leash/adapter/rls"
	"github.com/leashd/leash/adapter/xds"
	"github.com/leashd/leash/cmd/leash/setup"
	"github.com/leashd/leash/config"
	"github.com/leashd/leash/engine/wiring"
)

// envoyReloader applies reloads of the main config and of the descriptor files to the
// engine and the Envoy service together, so accounts, routing and descriptors are always
// checked against each other (spec §9.11, §10.4); an invalid change keeps all three.
// Descriptors come from the files and from xDS (spec §9.14); the service runs on both
// together, and a domain may come from only one of them.
type envoyReloader struct {
	ctx   context.Context // ends the descriptor watcher
	eng   *wiring.Engine
	svc   *rls.Service
	log   *slog.Logger
	mu    sync.Mutex
	cfg   *domains.Config
	files *descriptors.Config // the descriptor files' domains in force
	xds   *descriptors.Config // the xDS domains in force; nil before any update
	paths []string            // envoy.config_paths being watched

	stopWatch context.CancelFunc
	wg        sync.WaitGroup
	// applying counts the descriptor watchers' applies begun, each about to take mu: a
	// test waits on it for a watcher to be waiting for the lock.
	applying atomic.Int64
}

func newEnvoyReloader(ctx context.Context, eng *wiring.Engine, svc *rls.Service, cfg *domains.Config, paths []string, log *slog.Logger) *envoyReloader {
	r := &envoyReloader{ctx: ctx, eng: eng, svc: svc, cfg: cfg, files: cfg.Descriptors, log: log}
	r.watch(paths)
	return r
}

// watch (re)starts the descriptor-file watcher on paths, from the files in force (loaded
// from paths), so an edit made since they were loaded is applied; call with mu held or
// before use. The watcher it replaces is cancelled, not waited for: that one may be
// waiting for mu to apply an edit, and once cancelled it applies nothing (wait waits for
// every watcher).
func (r *envoyReloader) watch(paths []string) {
	if r.stopWatch != nil {
		r.stopWatch()
		r.stopWatch = nil
	}
	r.paths = slices.Clone(paths)
	if len(paths) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(r.ctx)
	r.stopWatch = cancel
	r.wg.Add(1)
	loaded := r.files
	apply := func(files *descriptors.Config) error { return r.applyDescriptors(ctx, files) }
	go func() {
		defer r.wg.Done()
		descriptors.Watch(ctx, paths, loaded, 0, apply, r.log)
	}()
}

// applyDescriptors is the callback of the descriptor watcher whose context is ctx; the
// watcher logs the reload. A watcher replaced or stopped meanwhile applies nothing.
func (r *envoyReloader) applyDescriptors(ctx context.Context, files *descriptors.Config) error {
	r.applying.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("descriptor watcher stopped: %w", err)
	}
	next, err := domains.Compose(files, r.xds, r.cfg.Routing, r.eng.Accounts.Directory())
	if err != nil {
		return err
	}
	r.cfg, r.files = next, files
	r.svc.SetConfig(next)
	return nil
}

// applyXDS is the xDS client's Apply: the management server's domains replace the
// previous xDS domains (spec §9.14); an error is the NACK's text.
func (r *envoyReloader) applyXDS(fromXDS *descriptors.Config) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next, err := domains.Compose(r.files, fromXDS, r.cfg.Routing, r.eng.Accounts.Directory())
	if err != nil {
		return err
	}
	r.cfg, r.xds = next, fromXDS
	r.svc.SetConfig(next)
	return nil
}

// applyConfig is the main config watcher's callback: accounts, plans and envoy settings.
func (r *envoyReloader) applyConfig(cfg *config.Config) {
	dir, err := cfg.Directory()
	if err == nil && cfg.HasAccounts() {
		err = r.eng.Accounts.CheckDirectory(dir)
	}
	if err != nil || !cfg.HasAccounts() {
		r.log.Error("config reload: accounts rejected; keeping the running config", "err", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	files := r.files
	paths := cfg.Envoy.ConfigPaths
	pathsChanged := !slices.Equal(paths, r.paths)
	if pathsChanged {
		files = nil
		if len(paths) > 0 {
			if files, err = descriptors.Load(paths...); err != nil {
				r.log.Error("config reload: envoy descriptors rejected; keeping the running config", "err", err)
				return
			}
		}
	}
	next, err := domains.Compose(files, r.xds, setup.Routing(cfg), dir)
	if err != nil {
		r.log.Error("config reload: envoy config rejected; keeping the running config", "err", err)
		return
	}
	r.eng.Accounts.SetDirectory(dir)
	r.cfg, r.files = next, files
	r.svc.SetConfig(next)
	if pathsChanged {
		r.watch(paths)
	}
	r.log.Info("config reloaded", "accounts", len(dir.Accounts()))
}

// wait stops the descriptor watcher (its context has ended) and waits for it and for any
// watcher it replaced, without holding mu, which they may be waiting for.
func (r *envoyReloader) wait() {
	r.mu.Lock()
	if r.stopWatch != nil {
		r.stopWatch()
		r.stopWatch = nil
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// grpcTLS builds the gRPC listener's TLS config: the certificate is re-read when its
// files change; with a client CA, clients must present a certificate it signed (mTLS).
func grpcTLS(t config.GRPCTLS) (*tls.Config, error) {
	if t.CertFile == "" && t.KeyFile == "" {
		if t.ClientCAFile != "" {
			return nil, fmt.Errorf("grpc.tls.client_ca_file needs grpc.tls.cert_file and key_file")
		}
		return nil, nil
	}
	certs, err := newCertReloader(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, err
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get, NextProtos: []string{"h2"}}
	if t.ClientCAFile != "" {
		pem, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("grpc.tls.client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("grpc.tls.client_ca_file: no PEM certificate in %s", t.ClientCAFile)
		}
		tlsConfig.ClientCAs, tlsConfig.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tlsConfig, nil
}

// rlsOptions translates envoy.* into the RLS service's options (spec §9.7).
func (s *server) rlsOptions() rls.Options {
	envoy := s.cfg.Envoy
	names := envoy.HeaderNames
	return rls.Options{
		Engine: s.engine, Accounts: s.engine.Accounts.Account, Logger: s.log,
		ResponseHeaders: envoy.ResponseHeaders,
		HeaderNames:     rls.HeaderNames{Limit: names.Limit, Remaining: names.Remaining, Reset: names.Reset},
		ShadowMode:      envoy.ShadowMode, QuotaMode: envoy.QuotaMode, DynamicMetadata: envoy.ResponseDynamicMetadata,
		Rules: s.metrics.Rules(),
		Counters: rls.Counters{Decision: s.metrics.Decisions("envoy").Inc,
			ShadowDenial: s.metrics.ShadowDenial, GlobalShadow: s.metrics.GlobalShadow},
		Trace: s.tracing != nil,
	}
}

// rlqsOptions translates envoy.rlqs.* into the RLQS service's options (spec §14.5, §14.6);
// it runs on the RLS service's config, reloads included.
func (s *server) rlqsOptions() rlqs.Options {
	quota := s.cfg.Envoy.RLQS
	counters := s.metrics.RLQS()
	return rlqs.Options{
		Engine: s.engine, Demand: s.measured, Accounts: s.engine.Accounts.Account, Config: s.rls.Config, Logger: s.log,
		ReportingInterval: quota.ReportingInterval, TTLIntervals: quota.TTLIntervals,
		MaxBucketsPerStream: quota.MaxBucketsPerStream, MaxBucketsPerAccount: quota.MaxBucketsPerAccount,
		Counters: rlqs.Counters{Streams: counters.Streams, Buckets: counters.Buckets, Sent: counters.Sent,
			Reported: counters.Reported, Rejected: counters.Rejected},
	}
}

// xdsTLS is the xDS client's TLS from envoy.xds.tls (spec §9.14): nil, plaintext, when
// xDS is off or none of its keys is set.
func xdsTLS(xdsCfg config.XDS) (*tls.Config, error) {
	t := xdsCfg.TLS
	if xdsCfg.Address == "" || (t.CAFile == "" && t.CertFile == "" && t.KeyFile == "" && t.ServerName == "") {
		return nil, nil
	}
	return xds.TLSConfig(t.CAFile, t.CertFile, t.KeyFile, t.ServerName)
}
