package memstore

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/leashd/leash/engine"
)

// demandStore holds the RLQS demand entries (spec §14.4): per bucket, per stream. The
// sweeper drops expired entries and empty buckets.
type demandStore struct {
	mu      sync.Mutex
	buckets map[engine.DemandBucket]map[string]demandEntry
}

type demandEntry struct {
	milliRPS, expiresMS int64
}

// ReportDemand records a stream's demand on a bucket and returns the bucket's entries.
func (s *tables) ReportDemand(_ context.Context, d engine.DemandReport) ([]engine.StreamDemand, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	now := s.nowMS()
	ds := &s.demand
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.buckets == nil {
		ds.buckets = make(map[engine.DemandBucket]map[string]demandEntry)
	}
	b := ds.buckets[d.Bucket]
	if b == nil {
		b = make(map[string]demandEntry)
		ds.buckets[d.Bucket] = b
	}
	for id, e := range b {
		if e.expiresMS <= now {
			delete(b, id)
		}
	}
	if _, ok := b[d.Stream]; ok || len(b) < engine.MaxDemandStreams {
		b[d.Stream] = demandEntry{milliRPS: d.MilliRPS, expiresMS: now + d.TTLMS}
	}
	out := make([]engine.StreamDemand, 0, len(b))
	for id, e := range b {
		out = append(out, engine.StreamDemand{Stream: id, MilliRPS: e.milliRPS, ExpiresMS: e.expiresMS})
	}
	slices.SortFunc(out, func(a, b engine.StreamDemand) int { return strings.Compare(a.Stream, b.Stream) })
	return out, nil
}

// DropDemand removes a stream's entry of a bucket.
func (s *tables) DropDemand(_ context.Context, b engine.DemandBucket, stream string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := engine.ValidateDemandBucket(b, stream); err != nil {
		return err
	}
	ds := &s.demand
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

// sweep drops expired entries and empty buckets.
func (ds *demandStore) sweep(now int64) {
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
