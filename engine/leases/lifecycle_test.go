package leases_test

import (
	"context"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/leases"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/testkit/enginekit"
)

func TestLeaseLifecycleAndIsolation(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	acme, other := f.Accts["acme"], f.Accts["other"]
	req := leases.AcquireRequest{Namespace: "jobs", Key: "k", Limit: testkit.Ptr(int64(2)), WindowMS: testkit.Ptr(int64(5000))}
	d1, err := f.Eng.Leases.Acquire(ctx, acme, &req)
	if err != nil || !d1.Allowed || d1.Active != 1 || d1.ResetMS != 5000 || d1.LeaseID == "" {
		t.Fatalf("first acquire = %+v, %v", d1, err)
	}
	if _, err := f.Eng.Leases.Acquire(ctx, acme, &req); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(time.Second)
	d3, err := f.Eng.Leases.Acquire(ctx, acme, &req)
	if err != nil || d3.Allowed || d3.LeaseID != "" || d3.Active != 2 || d3.ResetMS != 4000 {
		t.Fatalf("third acquire = %+v, %v; want denied, active 2, reset 4000", d3, err)
	}
	// other holds one lease on the same namespace and key; releasing acme's id as other
	// frees nothing and reports other's own count.
	if _, err := f.Eng.Leases.Acquire(ctx, other, &req); err != nil {
		t.Fatal(err)
	}
	rel, err := f.Eng.Leases.Release(ctx, other, d1.LeaseID)
	if err != nil || rel.Released || rel.Active != 1 {
		t.Fatalf("cross-account release = %+v, %v; want released false, active 1", rel, err)
	}
	ren, err := f.Eng.Leases.Renew(ctx, other, d1.LeaseID, nil)
	if err != nil || ren.Renewed {
		t.Fatalf("cross-account renew = %+v, %v", ren, err)
	}
	ren, err = f.Eng.Leases.Renew(ctx, acme, d1.LeaseID, nil)
	if err != nil || !ren.Renewed || ren.ResetMS != 5000 || ren.Active != 2 {
		t.Fatalf("renew = %+v, %v", ren, err)
	}
	rel, err = f.Eng.Leases.Release(ctx, acme, d1.LeaseID)
	if err != nil || !rel.Released || rel.Active != 1 {
		t.Fatalf("release = %+v, %v", rel, err)
	}
	rel, err = f.Eng.Leases.Release(ctx, acme, d1.LeaseID)
	if err != nil || rel.Released || rel.Active != 1 {
		t.Fatalf("second release = %+v, %v", rel, err)
	}
	for _, bad := range []string{"", "x", "l1.bad", d1.LeaseID + "x", d1.LeaseID[:len(d1.LeaseID)-1]} {
		_, err := f.Eng.Leases.Release(ctx, acme, bad)
		enginekit.WantCode(t, err, engine.CodeInvalidLeaseID)
	}
}

func TestLeaseRuleFallback(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
	_, err := f.Eng.Leases.Acquire(ctx, acme, &leases.AcquireRequest{Namespace: "jobs", Key: "k"})
	enginekit.WantCode(t, err, engine.CodeMissingLimit)
	if _, _, err := f.Eng.Rules.Put(ctx, acme, "jobs", &rules.RuleRequest{Algorithm: testkit.Ptr("concurrent_limit"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(3000))}); err != nil {
		t.Fatal(err)
	}
	d, err := f.Eng.Leases.Acquire(ctx, acme, &leases.AcquireRequest{Namespace: "jobs", Key: "k", WindowMS: testkit.Ptr(int64(100))})
	if err != nil || !d.Allowed || d.Limit != 1 || d.ResetMS != 100 {
		t.Fatalf("acquire with rule limit and inline window = %+v, %v", d, err)
	}
}
