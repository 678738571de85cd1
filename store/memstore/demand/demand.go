// Package demand is the memory store's RLQS demand table (spec §14.4): per bucket, what
// each stream recently reported. It is not journaled: every stream reports again within
// seconds.
package demand

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/leashd/leash/engine"
)

// Store holds the demand entries, per bucket and stream; it implements
// engine.DemandStore. Sweep drops expired entries and empty buckets.
type Store struct {
	now     func(context.Context) (int64, error)
	mu      sync.Mutex
	buckets map[engine.DemandBucket]map[string]entry
}

type entry struct {
	milliRPS, expiresMS int64
}

var _ engine.DemandStore = (*Store)(nil)

// New returns an empty demand table. now reads the owning store's clock in Unix
// milliseconds, or returns its error once that store is closed.
func New(now func(context.Context) (int64, error)) *Store {
	return &Store{now: now, buckets: make(map[engine.DemandBucket]map[string]entry)}
}

// ReportDemand records a stream's demand on a bucket and returns the bucket's entries.
func (ds *Store) ReportDemand(ctx context.Context, d engine.DemandReport) ([]engine.StreamDemand, error) {
	now, err := ds.now(ctx)
	if err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	b := ds.buckets[d.Bucket]
	if b == nil {
		b = make(map[string]entry)
		ds.buckets[d.Bucket] = b
	}
	for id, e := range b {
		if e.expiresMS <= now {
			delete(b, id)
		}
	}
	if _, ok := b[d.Stream]; ok || len(b) < engine.MaxDemandStreams {
		b[d.Stream] = entry{milliRPS: d.MilliRPS, expiresMS: now + d.TTLMS}
	}
	out := make([]engine.StreamDemand, 0, len(b))
	for id, e := range b {
		out = append(out, engine.StreamDemand{Stream: id, MilliRPS: e.milliRPS, ExpiresMS: e.expiresMS})
	}
	slices.SortFunc(out, func(a, b engine.StreamDemand) int { return strings.Compare(a.Stream, b.Stream) })
	return out, nil
}

// DropDemand removes a stream's entry of a bucket.
func (ds *Store) DropDemand(ctx context.Context, b engine.DemandBucket, stream string) error {
	if _, err := ds.now(ctx); err != nil {
		return err
	}
	if err := engine.ValidateDemandBucket(b, stream); err != nil {
		return err
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if m := ds.buckets[b]; m != nil {
		delete(m, stream)
		if len(m) == 0 {
			delete(ds.buckets, b)
		}
	}
	return nil
}

// Sweep drops the entries expired at now (Unix ms) and the buckets left empty.
func (ds *Store) Sweep(now int64) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for k, m := range ds.buckets {
		for id, e := range m {
			if e.expiresMS <= now {
				delete(m, id)
			}
		}
		if len(m) == 0 {
			delete(ds.buckets, k)
		}
	}
}
