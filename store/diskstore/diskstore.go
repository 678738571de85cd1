// Package diskstore is Leash's durable single-node Store (spec §11.5): the memory store's
// state machine, with every change of its durable state written to a Pebble database in
// one directory before the answer returns, and loaded again at Open.
//
// Every write goes to Pebble's write-ahead log before the method returns, so a process
// crash (kill -9) loses no answered decision; the log is synced to stable storage every
// SyncInterval (0: on every write), which bounds what a power loss can take.
package diskstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore"
)

// DefaultSyncInterval is the sync interval of store.disk.sync_interval's default.
const DefaultSyncInterval = time.Second

// ErrLocked is returned by Open when another process (or another Store of this one) holds
// the directory.
var ErrLocked = errors.New("diskstore: directory is in use by another process")

// ErrClosed is returned by Backup after Close.
var ErrClosed = errors.New("diskstore: store is closed")

// Options configures a Store.
type Options struct {
	// Path is the data directory; Open creates it when it is missing.
	Path string
	// SyncInterval is how often the write-ahead log is synced to stable storage; 0 syncs
	// on every write. Configuration defaults it to DefaultSyncInterval.
	SyncInterval time.Duration
	// MaxEntries bounds the rate counters and leases held, as memstore's; default
	// memstore.DefaultMaxEntries.
	MaxEntries int
	// Clock is the store's clock; default engine.SystemClock{}.
	Clock engine.Clock
	// Logger receives the store's events; default slog.Default().
	Logger *slog.Logger
}

// Store is the disk store: a memstore.Store whose durable state is kept in Pebble. It is
// safe for concurrent use.
type Store struct {
	*memstore.Store
	path      string
	db        *pebble.DB
	lock      *os.File
	log       *slog.Logger
	closeOnce sync.Once
	closeErr  error
}

var (
	_ engine.Store        = (*Store)(nil)
	_ engine.AccountStore = (*Store)(nil)
	_ engine.AuditStore   = (*Store)(nil)
)

// Open opens (or creates) the store in opts.Path and loads its state. A directory another
// process holds is an error wrapping ErrLocked.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Path == "" {
		return nil, fmt.Errorf("diskstore: open: %w: empty path", engine.ErrInvalidArgument)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(opts.Path, 0o700); err != nil {
		return nil, fmt.Errorf("diskstore: create %s: %w", opts.Path, err)
	}
	lock, err := lockDir(opts.Path)
	if err != nil {
		return nil, err
	}
	db, err := pebble.Open(opts.Path, &pebble.Options{Logger: pebbleLogger{opts.Logger}})
	if err != nil {
		_ = unlockDir(lock)
		return nil, fmt.Errorf("diskstore: open %s: %w", opts.Path, err)
	}
	m := memstore.New(memstore.Options{Clock: opts.Clock, MaxEntries: opts.MaxEntries})
	return &Store{Store: m, path: opts.Path, db: db, lock: lock, log: opts.Logger}, nil
}

// Backup writes a consistent copy of the store, taken while it serves, into dir, which
// must not exist. Opening dir restores it.
func (s *Store) Backup(ctx context.Context, dir string) error {
	if err := s.Ping(ctx); err != nil {
		return ErrClosed
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("diskstore: backup %s into %s: %w", s.path, dir, err)
	}
	return nil
}

// Close stops the store's background work, syncs and closes the database.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.Store.Close(), s.closeDB())
	})
	return s.closeErr
}

// closeDB syncs and closes the database, then releases the directory.
func (s *Store) closeDB() error {
	var errs []error
	if err := s.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("diskstore: close %s: %w", s.path, err))
	}
	if err := unlockDir(s.lock); err != nil {
		errs = append(errs, fmt.Errorf("diskstore: unlock %s: %w", s.path, err))
	}
	return errors.Join(errs...)
}
