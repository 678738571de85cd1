package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/leashd/leash/cmd/leash/setup"
	"github.com/leashd/leash/config"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/httpapi"
	"github.com/leashd/leash/internal/devkeys"
	"github.com/leashd/leash/tracing"
	"go.opentelemetry.io/otel"
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := newServer(ctx, cfg, paths, environ, stdout, log)
	if err != nil {
		logStartError(log, err)
		return 1
	}
	code := srv.Run(ctx)
	stop() // from here a second signal ends the process at once
	return srv.shutdown(code)
}

// startError is a start-up step that failed: msg and attrs are its log record, err the
// cause.
type startError struct {
	msg   string
	attrs []any
	err   error
}

func (e *startError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// logStartError logs why start-up failed, with the failed step's own message.
func logStartError(log *slog.Logger, err error) {
	var se *startError
	if !errors.As(err, &se) {
		log.Error("cannot start", "err", err)
		return
	}
	log.Error(se.msg, append(slices.Clone(se.attrs), "err", se.err)...)
}

// warnTestOnly logs one warning for each setting that spec §10.2 documents as for tests
// only and cfg turns on; serve calls it once, at start-up.
func warnTestOnly(cfg *config.Config, log *slog.Logger) {
	settings := []struct {
		key string
		on  bool
	}{
		{"webhooks.allow_http", cfg.Webhooks.AllowHTTP},
		{"webhooks.allow_private_targets", cfg.Webhooks.AllowPrivateTargets},
	}
	for _, setting := range settings {
		if setting.on {
			log.Warn("a setting meant for tests only is on; never in production", "setting", setting.key)
		}
	}
}

// newTracing sets up OpenTelemetry traces from tracing.* (spec §12.8); nil when
// tracing.exporter is none. Export failures are logged as warnings.
func newTracing(ctx context.Context, tracingCfg config.Tracing, log *slog.Logger) (*tracing.Tracing, error) {
	tr, err := tracing.New(ctx, tracing.Options{Exporter: tracingCfg.Exporter, Endpoint: tracingCfg.Endpoint, Insecure: tracingCfg.Insecure,
		SamplingRatio: tracingCfg.SamplingRatio, ServiceName: tracingCfg.ServiceName, ServiceVersion: buildVersion()})
	if err != nil || tr == nil {
		return nil, err
	}
	// The SDK reports export failures through its process-wide handler; route them to
	// the log.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	log.Info("tracing on", "exporter", tracingCfg.Exporter, "endpoint", tracingCfg.Endpoint, "sampling_ratio", tracingCfg.SamplingRatio)
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
// scale whose key is $LEASH_DEV_API_KEY, the one kept in the disk store's directory, or
// generated; and the operators: the config's, or with neither accounts nor operators
// configured the dev operator whose key is $LEASH_DEV_OPERATOR_KEY, kept, or generated
// (spec §2.4, §15.1). kept are the digests a first start on the disk store saved (zero
// elsewhere). The keys it generated are printed by newServer once every listener is
// bound, so a failed start prints no key.
func directory(cfg *config.Config, environ []string, kept devkeys.Digests, log *slog.Logger) (*engine.Directory, devKeys, error) {
	var devKey [32]byte
	var keys devKeys
	if !cfg.HasAccounts() {
		key := lookupEnv(environ, config.DevAPIKeyEnv)
		switch {
		case key != "":
			log.Info("dev account uses the API key from " + config.DevAPIKeyEnv)
			devKey = engine.HashKey(key)
		case kept.API != [32]byte{}:
			devKey, keys.keptAPI = kept.API, true
		default:
			keys.api = newAPIKey()
			devKey = engine.HashKey(keys.api)
		}
		keys.digests.API = devKey
	}
	var devOps []engine.OperatorSpec
	if !cfg.HasAccounts() && len(cfg.Operators) == 0 {
		var sum [32]byte
		key := lookupEnv(environ, config.DevOperatorKeyEnv)
		switch {
		case key != "":
			log.Info("dev operator uses the key from " + config.DevOperatorKeyEnv)
			sum = engine.HashKey(key)
		case kept.Operator != [32]byte{}:
			sum, keys.keptOperator = kept.Operator, true
		default:
			keys.operator = newAPIKey()
			sum = engine.HashKey(keys.operator)
		}
		keys.digests.Operator = sum
		devOps = []engine.OperatorSpec{{ID: config.DevOperatorID, KeyHashes: [][32]byte{sum}}}
	}
	var dir *engine.Directory
	var err error
	if cfg.HasAccounts() {
		dir, err = cfg.Directory(devOps...)
	} else {
		dir, err = setup.DirectoryWith(cfg, devOps, devKey)
	}
	return dir, keys, err
}

// devKeys are the dev keys serve generated ("" for one from the environment, one kept,
// or none), whether each was kept from an earlier start, and the digests of those in use.
type devKeys struct {
	api, operator         string
	keptAPI, keptOperator bool
	digests               devkeys.Digests
}

// generated reports whether serve generated a key this start.
func (k devKeys) generated() bool { return k.api != "" || k.operator != "" }

// print shows the generated keys once, with a check on the /v1 listener's port and an
// admin command; on the disk store (dataDir set) it says that the keys stay, or that the
// ones printed at the first start still work.
func (k devKeys) print(w io.Writer, httpPort, backend, dataDir string) {
	if k.keptAPI {
		fmt.Fprintf(w, "No accounts configured: account \"dev\" (plan scale) uses the API key printed when %s was\n"+
			"first served; its SHA-256 digest is kept in %s.\n\n", dataDir, filepath.Join(dataDir, devkeys.FileName))
	}
	if k.keptOperator {
		fmt.Fprintf(w, "No operators configured: operator \"dev\" uses the key printed when %s was first served.\n\n", dataDir)
	}
	if k.api != "" {
		fmt.Fprintf(w, "No accounts configured: account \"dev\" (plan scale) uses API key\n\n    %s\n\n"+
			"  curl -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \\\n"+
			"       -d '{\"namespace\":\"demo\",\"key\":\"user-1\",\"limit\":5,\"window_ms\":60000}' http://localhost%s/v1/limit\n\n",
			k.api, k.api, httpPort)
	}
	if k.operator != "" {
		lasts := "They are kept in Redis.\n\nA dev key generated here is this instance's own: another instance on the same Redis\n" +
			"refuses them. Give every instance the same LEASH_DEV_OPERATOR_KEY and LEASH_DEV_API_KEY\n" +
			"(leash keys new prints one), or configure operators and accounts (docs/redis.md)."
		switch backend {
		case "memory":
			lasts = "On the memory store they last as long as this process."
		case "disk":
			lasts = "On the disk store they are kept in " + dataDir + ", and so are these dev keys\n" +
				"(as SHA-256 digests): a restart on the same directory accepts them."
		}
		fmt.Fprintf(w, "No operators configured: operator \"dev\" uses key\n\n    %s\n\n"+
			"  LEASH_OPERATOR_KEY=%s leash admin accounts create acme --plan pro\n\n"+
			"Accounts and keys created through the admin API are served at once. %s\n\n",
			k.operator, k.operator, lasts)
	}
}

// listen binds addr, with TLS when both files are set; the certificate is re-read when
// its files change.
func listen(addr, certFile, keyFile string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || certFile == "" {
		return ln, err
	}
	certs, err := newCertReloader(certFile, keyFile)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get, NextProtos: []string{"h2", "http/1.1"}}), nil
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
