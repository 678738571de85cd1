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
	"runtime/debug"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

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
	// FS is the file system the database is kept on; nil is the operating system's.
	// Tests give one that counts syncs.
	FS vfs.FS
}

// Store is the disk store: a memstore.Store whose durable state is kept in Pebble. It is
// safe for concurrent use.
type Store struct {
	*memstore.Store
	path      string
	db        *pebble.DB
	lock      *os.File
	log       *slog.Logger
	j         *journal
	every     time.Duration // SyncInterval
	stop      chan struct{}
	done      chan struct{}
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
	start := time.Now()
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	j := &journal{log: opts.Logger}
	fs := opts.FS
	if opts.SyncInterval > 0 {
		j.lazy = newLazySyncFS(opts.FS)
		fs = j.lazy
	}
	db, err := pebble.Open(opts.Path, &pebble.Options{
		FS:     fs,
		Logger: pebbleLogger{opts.Logger},
	})
	if err != nil {
		_ = unlockDir(lock)
		return nil, fmt.Errorf("diskstore: open %s: %w", opts.Path, err)
	}
	j.db = db
	s := &Store{
		Store: memstore.New(memstore.Options{Clock: opts.Clock, MaxEntries: opts.MaxEntries, Journal: j}),
		path:  opts.Path, db: db, lock: lock, log: opts.Logger, j: j, every: opts.SyncInterval,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	loaded, dropped, err := s.load(ctx)
	if err != nil {
		_ = s.Store.Close()
		close(s.done)
		_ = s.closeDB()
		return nil, err
	}
	go s.syncer()
	opts.Logger.Info("diskstore: opened", "path", opts.Path, "records", loaded, "dropped_records", dropped,
		"sync_interval_ms", opts.SyncInterval.Milliseconds(), "open_ms", time.Since(start).Milliseconds())
	return s, nil
}

// load reads every record into the memory store, and deletes those that are dead.
func (s *Store) load(ctx context.Context) (loaded, dropped int, err error) {
	defer loadingGC()()
	s.ExpectCounters(s.countersOnDisk())
	it, err := s.db.NewIterWithContext(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("diskstore: load %s: %w", s.path, err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return 0, 0, fmt.Errorf("diskstore: load %s: %w", s.path, err)
		}
		keep, err := s.Restore(it.Key(), v)
		if err != nil {
			_ = it.Close()
			return 0, 0, fmt.Errorf("diskstore: load %s: record of kind %q: %w", s.path, it.Key()[0], err)
		}
		if keep {
			loaded++
		} else {
			dropped++
			_ = b.Delete(it.Key(), nil)
		}
	}
	if err := it.Close(); err != nil {
		return 0, 0, fmt.Errorf("diskstore: load %s: %w", s.path, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, 0, fmt.Errorf("diskstore: load %s: drop dead records: %w", s.path, err)
	}
	return loaded, dropped, nil
}

// countersOnDisk estimates the counter records in the database's tables (not those in
// its memtable), from the tables' properties: a hint to size the memory store for them.
func (s *Store) countersOnDisk() int {
	levels, err := s.db.SSTables(pebble.WithProperties(), pebble.WithKeyRangeFilter([]byte{recCounter}, []byte{recCounter + 1}))
	if err != nil {
		s.log.Debug("diskstore: no table properties to size the load", "path", s.path, "err", err)
		return 0
	}
	var n int
	for _, tables := range levels {
		for _, t := range tables {
			if t.Properties == nil || len(t.Smallest.UserKey) == 0 || len(t.Largest.UserKey) == 0 {
				continue
			}
			if t.Smallest.UserKey[0] != recCounter || t.Largest.UserKey[0] != recCounter {
				continue // a table of other records too: its share of counters is unknown
			}
			n += int(t.Properties.NumEntries) - int(t.Properties.NumDeletions)
		}
	}
	return max(n, 0)
}

// recCounter is the first byte of a counter record's key (memstore's journal).
const recCounter = 'c'

// loadGC counts the loads under way, which run with the garbage collector relaxed.
var loadGC struct {
	sync.Mutex
	n    int
	prev int
}

// loadingGC relaxes the garbage collector while a load builds the memory store (most of
// what it allocates stays), and returns the function that restores it once the last
// concurrent load ends.
func loadingGC() (restore func()) {
	loadGC.Lock()
	if loadGC.n == 0 {
		loadGC.prev = debug.SetGCPercent(400)
		if loadGC.prev < 0 || loadGC.prev > 400 { // off, or already more relaxed
			debug.SetGCPercent(loadGC.prev)
		}
	}
	loadGC.n++
	loadGC.Unlock()
	return func() {
		loadGC.Lock()
		loadGC.n--
		if loadGC.n == 0 {
			debug.SetGCPercent(loadGC.prev)
		}
		loadGC.Unlock()
	}
}

// compactAfterDeletes is how many deleted records make the syncer compact the database,
// so the space of expired and swept state is given back (spec §7.7).
const compactAfterDeletes = 100_000

// syncer syncs the write-ahead log every SyncInterval until Close (with SyncInterval 0
// every write syncs itself), and compacts the database once enough records were deleted,
// checked every SyncInterval or second.
func (s *Store) syncer() {
	defer close(s.done)
	every := s.every
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if err := s.j.sync(); err != nil {
				s.log.Error("diskstore: sync failed", "path", s.path, "err", err)
			}
			if n := s.j.deletes.Load(); n >= compactAfterDeletes {
				s.j.deletes.Add(-n)
				s.compact(n)
			}
		}
	}
}

// compact compacts the whole database, dropping deleted records and their tombstones.
func (s *Store) compact(deletes int64) {
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // Close cancels a compaction under way
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := s.db.Compact(ctx, []byte{0}, []byte{0xff}, false); err != nil && ctx.Err() == nil {
		s.log.Error("diskstore: compaction failed", "path", s.path, "err", err)
		return
	}
	s.log.Debug("diskstore: compacted", "path", s.path, "deleted_records", deletes, "compaction_ms", time.Since(start).Milliseconds())
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
		close(s.stop)
		<-s.done
		err := s.Store.Close()
		if serr := s.j.sync(); serr != nil {
			err = errors.Join(err, serr)
		}
		s.closeErr = errors.Join(err, s.closeDB())
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
