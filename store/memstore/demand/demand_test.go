package demand_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore/demand"
	"github.com/leashd/leash/testkit/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunDemand(t, func(t *testing.T, clock engine.Clock) engine.DemandStore {
		return demand.New(func(context.Context) (int64, error) { return clock.Now().UnixMilli(), nil })
	})
}

// TestClosed: once the owner's clock answers an error, both calls return it.
func TestClosed(t *testing.T) {
	errClosed := errors.New("closed")
	ds := demand.New(func(context.Context) (int64, error) { return 0, errClosed })
	ctx := context.Background()
	if _, err := ds.ReportDemand(ctx, engine.DemandReport{}); !errors.Is(err, errClosed) {
		t.Errorf("ReportDemand = %v, want %v", err, errClosed)
	}
	if err := ds.DropDemand(ctx, engine.DemandBucket{}, "s"); !errors.Is(err, errClosed) {
		t.Errorf("DropDemand = %v, want %v", err, errClosed)
	}
}
