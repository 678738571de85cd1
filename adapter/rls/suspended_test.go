package rls_test

import (
	"context"
	"log/slog"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/adapter/rls"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
)

// A domain of a suspended account (one created through the admin API) is refused with
// PERMISSION_DENIED, not decided (spec §15.6).
func TestSuspendedAccountRefused(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = ms.Close() })
	dir, err := engine.NewDirectoryWith(nil, engine.DirectoryOptions{Operators: []engine.OperatorSpec{{ID: "ops"}}})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	eng := wiring.New(engine.RolesOf(ms), dir, wiring.Options{Accounts: ms, Logger: log})
	ctx := context.Background()
	by := engine.Actor{Operator: &engine.Operator{ID: "ops"}}
	if _, err := eng.Admin.CreateAccount(ctx, by, "tenant", "scale"); err != nil {
		t.Fatal(err)
	}
	svc := rls.NewService(&domains.Config{Routing: domains.Routing{Domains: map[string]string{"edge": "tenant"}}},
		rls.Options{Engine: eng, Accounts: eng.Accounts.Account, Logger: log})
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{desc("k", "v")}}
	if _, err := svc.ShouldRateLimit(ctx, req); err != nil {
		t.Fatalf("active account: %v", err)
	}
	yes := true
	if _, err := eng.Admin.UpdateAccount(ctx, by, "tenant", engine.AccountUpdate{Suspended: &yes}); err != nil {
		t.Fatal(err)
	}
	_, err = svc.ShouldRateLimit(ctx, req)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("suspended account: %v, want PermissionDenied", err)
	}
}
