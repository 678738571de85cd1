package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/adapter/rls"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
)

// TestReloaderRestartWhileApplying: a config reload that moves envoy.config_paths (or a
// shutdown) while the descriptor watcher waits to apply an edit must not wait for that
// watcher under the lock the watcher waits for: both would wait for ever.
func TestReloaderRestartWhileApplying(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	testkit.ReplaceFile(t, file, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	files, err := descriptors.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	accounts, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: engine.BuiltinPlans()["pro"]}})
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = store.Close() })
	eng := wiring.New(engine.RolesOf(store), accounts, wiring.Options{})
	cfg, err := domains.Compose(files, nil, domains.Routing{Domains: map[string]string{"edge": "acme"}}, accounts)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := rls.NewService(cfg, rls.Options{Engine: eng, Accounts: eng.Accounts.Account, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newEnvoyReloader(ctx, eng, svc, cfg, []string{dir}, log)

	// Hold the lock as applyConfig does, edit a file so the watcher comes to apply it and
	// waits for the lock, then restart the watcher on other paths under the lock.
	r.mu.Lock()
	from := r.applying.Load()
	testkit.ReplaceFile(t, file, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 3}\n")
	testkit.Eventually(t, "the watcher applying the edit", 10*time.Second, func() bool { return r.applying.Load() > from })
	restarted := make(chan struct{})
	go func() {
		r.watch([]string{t.TempDir()})
		close(restarted)
	}()
	select {
	case <-restarted:
	case <-time.After(5 * time.Second):
		t.Fatal("restarting the descriptor watcher under the lock waits for a watcher that waits for the lock")
	}
	r.mu.Unlock()

	stopped := make(chan struct{})
	go func() { r.wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return")
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
}
