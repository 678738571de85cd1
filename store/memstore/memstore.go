// Package memstore is Leash's embedded memory Store: the default backend, for one
// instance (counts are per process and are lost on restart, spec §11.1). With a Journal
// (Options.Journal) it is also the state machine of the disk store (spec §11.5): every
// change of its durable state is handed to the journal before it answers, and Restore
// loads the journal's records at start.
//
// Counters and lease sets live in shards chosen by a hash of their key, each behind its
// own mutex, so there is no global lock on the hot path; a spend on an existing counter
// allocates nothing. The rate-limit arithmetic is package algo's. State expires: expired
// state reads as no state, and a background sweeper reclaims it incrementally, shard by
// shard.
//
// The store holds at most MaxEntries entries (spec §11.1): a rate counter is one
// entry, and so is every lease held, so a lease set takes as many entries as it holds
// leases (one set with a huge limit cannot grow the store past the bound). The bound is
// enforced per shard: each shard holds MaxEntries/shards of them (the remainder spread
// over the first shards), so eviction can begin a little before MaxEntries in total when
// keys hash unevenly. A shard that is full first reclaims its expired state,
// then evicts a rate counter not used recently, chosen by CLOCK, an approximation of
// least-recently-used that keeps no list: each counter has a reference bit set when it is
// used, and a hand sweeping the shard evicts the first counter whose bit is clear,
// clearing the bits it passes. A new counter starts with its bit clear, so keys seen once
// go before keys seen again. An evicted key starts fresh; see Evictions. Live leases are
// never evicted: when a shard holds only live leases, a new lease (in a new or an existing
// set) or a new counter gets an error wrapping engine.ErrNoRoom; renewing a held lease
// needs no room.
//
// Rules and usage are not bounded by MaxEntries: rules persist, daily usage is kept 40
// days and monthly totals 14 months by the store's clock, and applied usage batch ids are
// remembered for 2 hours.
package memstore

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore/demand"
)

// Defaults of Options.
const (
	DefaultMaxEntries    = 1_000_000
	DefaultSweepInterval = time.Second
	DefaultShards        = 256
)

// minPerShard is the smallest per-shard capacity New accepts before it uses fewer shards,
// so a small MaxEntries is not split into shards of a few entries each.
const minPerShard = 1024

// ErrClosed is returned by every method of a Store after Close.
var ErrClosed = errors.New("memstore: store is closed")

// Options configures a Store.
type Options struct {
	// Clock is the store's clock; default engine.SystemClock{}.
	Clock engine.Clock
	// MaxEntries bounds the rate counters and leases held (store.memory.max_entries);
	// default DefaultMaxEntries.
	MaxEntries int
	// SweepInterval is how often the sweeper reclaims expired state; default
	// DefaultSweepInterval.
	SweepInterval time.Duration
	// Shards is the number of shards, rounded down to a power of two; default
	// DefaultShards. New uses fewer when MaxEntries would give a shard fewer than 1024
	// entries.
	Shards int
	// Journal, when set, receives every change of the durable state (see Journal); the
	// store then answers only after the journal took the change.
	Journal Journal
}

// Store is the memory Store. It is safe for concurrent use. Its methods are grouped by
// role in the types it embeds, which share one core.
type Store struct {
	*core
	decisions // counters and leases (counters.go, leases.go)
	tables    // rules and usage (rules.go, usage.go)
	*demands  // RLQS demand (package demand)
	outbox    // webhooks and the outbox (webhooks.go)
	admin     // accounts, keys and the audit log (accounts.go, audit.go)
	restorer  // loading a journal's records (restore.go)
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// demands is the RLQS demand table, embedded under an unexported name.
type demands = demand.Store

// The roles of a Store: each sees the shared core.
type (
	decisions struct{ *core }
	tables    struct{ *core }
	outbox    struct{ *core }
	admin     struct{ *core }
	restorer  struct{ *core }
)

// core is the state every role of a Store shares.
type core struct {
	clock     engine.Clock
	seed      maphash.Seed
	shards    []shard
	mask      uint64
	usage     usageStore
	hooks     hookStore    // webhooks and the outbox (webhooks.go)
	accts     accountStore // accounts and keys of the admin API (accounts.go)
	audit     auditStore   // the audit log (audit.go)
	j         Journal      // nil: none
	evictions atomic.Uint64
	closed    atomic.Bool
}

var _ engine.Store = (*Store)(nil)

// New returns a memory store and starts its sweeper; Close stops it.
func New(opts Options) *Store {
	if opts.Clock == nil {
		opts.Clock = engine.SystemClock{}
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.Shards <= 0 {
		opts.Shards = DefaultShards
	}
	n := 1
	for n*2 <= opts.Shards && n < 1<<16 {
		n *= 2
	}
	for n > 1 && opts.MaxEntries/n < minPerShard {
		n /= 2
	}
	c := &core{
		clock:  opts.Clock,
		seed:   maphash.MakeSeed(),
		shards: make([]shard, n),
		mask:   uint64(n - 1),
		j:      opts.Journal,
	}
	s := &Store{
		core: c, decisions: decisions{c}, tables: tables{c}, outbox: outbox{c}, admin: admin{c}, restorer: restorer{c},
		demands: demand.New(c.NowMS),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	per, extra := opts.MaxEntries/n, opts.MaxEntries%n
	for i := range s.shards {
		c := per
		if i < extra {
			c++
		}
		s.shards[i].init(s.seed, c, opts.Journal)
	}
	s.usage.init()
	go s.sweeper(opts.SweepInterval)
	return s
}

// nowMS reads the store's clock.
func (s *core) nowMS() int64 { return s.clock.Now().UnixMilli() }

// shardOf returns the hash of the encoded key k and the shard that holds it.
func (s *core) shardOf(k []byte) (*shard, uint64) {
	h := maphash.Bytes(s.seed, k)
	return &s.shards[h&s.mask], h
}

// NowMS returns the store's clock in Unix milliseconds.
func (s *core) NowMS(context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	return s.nowMS(), nil
}

// Ping reports whether the store answers: nil until Close.
func (s *core) Ping(context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Close stops the sweeper and waits for it to exit; it is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		<-s.done
	})
	return nil
}

// Evictions returns how many live rate counters were evicted to make room.
func (s *Store) Evictions() uint64 { return s.evictions.Load() }

// Len returns the number of entries held, rate counters and leases, including expired
// ones not yet reclaimed; it never exceeds MaxEntries.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.live()
		sh.mu.Unlock()
	}
	return n
}

// sweepBudget is how many counter slots the sweeper examines per shard and pass.
const sweepBudget = 2048

// Sweep runs one sweeping pass now: each shard reclaims expired state from up to a fixed
// number of its counters and all of its lease sets, and old usage is pruned.
func (s *Store) Sweep() {
	now := s.nowMS()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.sweep(now, sweepBudget)
		sh.mu.Unlock()
	}
	s.usage.prune(now, s.j)
	s.demands.Sweep(now)
}

func (s *Store) sweeper(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}
