package diskstore

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/leashd/leash/store/memstore"
)

// journal is the memory store's memstore.Journal on Pebble: each change is committed
// with pebble.Sync, so it was written to the write-ahead log before the store answers;
// with a sync interval the log's file system defers the sync itself (see lazySyncFS).
type journal struct {
	db   *pebble.DB
	lazy *lazySyncFS // nil: every commit syncs
	log  *slog.Logger
	// dirty is set by a write the syncer has not synced yet.
	dirty atomic.Bool
	// deletes counts records deleted since the last compaction.
	deletes atomic.Int64

	// Group commit: Set and Delete add their record to the open group, and wait until a
	// commit of the group returns; one caller at a time commits (the leader), and the
	// records that arrive meanwhile are committed together by the next.
	mu         sync.Mutex
	open       *group // the group records are added to; nil: none yet
	committing bool   // a leader is committing a group
}

// group is records committed together in one Pebble batch.
type group struct {
	b *pebble.Batch
	// lead hands the next commit to one of the group's waiters (capacity 1).
	lead chan struct{}
	// done is closed once the group is committed, err its outcome.
	done chan struct{}
	err  error
}

var _ memstore.Journal = (*journal)(nil)

// closedWrite turns Pebble's panic on a closed database into ErrClosed: a call that
// passed the memory store's closed check can still reach the journal after Close.
func closedWrite(err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(error); ok && errors.Is(e, pebble.ErrClosed) {
			*err = ErrClosed
			return
		}
		panic(r)
	}
}

// wrote marks the log dirty for the syncer and reports a failure.
func (j *journal) wrote(op string, err error) error {
	if err != nil {
		j.log.Error("diskstore: write failed", "op", op, "err", err)
		return fmt.Errorf("diskstore: %s: %w", op, err)
	}
	if j.lazy != nil && !j.dirty.Load() {
		j.dirty.Store(true)
	}
	return nil
}

// Set writes a record.
func (j *journal) Set(key, value []byte) error {
	return j.wrote("set", j.add(func(b *pebble.Batch) { _ = b.Set(key, value, nil) }))
}

// Delete removes a record.
func (j *journal) Delete(key []byte) error {
	j.deletes.Add(1)
	return j.wrote("delete", j.add(func(b *pebble.Batch) { _ = b.Delete(key, nil) }))
}

// add puts a record into the open group (the batch copies it) and returns once the group
// is committed: in the write-ahead log, as a commit with pebble.Sync. Records of one key
// are added in the order the memory store's locks give them, and a caller waits for its
// group before it releases its lock, so Pebble sees them in that order.
func (j *journal) add(put func(*pebble.Batch)) error {
	j.mu.Lock()
	if j.open == nil {
		j.open = &group{b: j.db.NewBatch(), lead: make(chan struct{}, 1), done: make(chan struct{})}
	}
	g := j.open
	put(g.b)
	if !j.committing {
		j.committing = true
		j.mu.Unlock()
		j.lead()
	} else {
		j.mu.Unlock()
	}
	select {
	case <-g.done:
	case <-g.lead:
		j.lead()
	}
	<-g.done
	return g.err
}

// lead commits the open group; then it hands the next commit to a waiter of the group
// opened meanwhile, or ends the commits when none was. The caller is the leader.
func (j *journal) lead() {
	j.mu.Lock()
	g := j.open
	j.open = nil
	j.mu.Unlock()
	g.err = j.commit(g.b)
	close(g.done)
	j.mu.Lock()
	if j.open != nil {
		j.open.lead <- struct{}{}
	} else {
		j.committing = false
	}
	j.mu.Unlock()
}

// commit commits a group's batch with pebble.Sync and releases it.
func (j *journal) commit(b *pebble.Batch) (err error) {
	defer closedWrite(&err)
	defer func() { _ = b.Close() }()
	return b.Commit(pebble.Sync)
}

// Batch starts a batch of records.
func (j *journal) Batch() memstore.JournalBatch {
	return &batch{j: j, b: j.db.NewBatch()}
}

// batch is a Pebble batch, committed as one write.
type batch struct {
	j *journal
	b *pebble.Batch
}

// Set adds a record to the batch.
func (b *batch) Set(key, value []byte) { _ = b.b.Set(key, value, nil) }

// Delete adds a record's removal to the batch.
func (b *batch) Delete(key []byte) {
	b.j.deletes.Add(1)
	_ = b.b.Delete(key, nil)
}

// Commit applies the batch and releases it.
func (b *batch) Commit() (err error) {
	defer closedWrite(&err)
	if b.b.Empty() {
		return b.b.Close()
	}
	err = b.b.Commit(pebble.Sync)
	_ = b.b.Close()
	return b.j.wrote("commit", err)
}

// sync syncs the write-ahead log if anything was written since the last sync.
func (j *journal) sync() error {
	if !j.dirty.Swap(false) {
		return nil
	}
	if j.lazy == nil {
		return nil
	}
	if err := j.lazy.syncAll(); err != nil {
		j.dirty.Store(true)
		return fmt.Errorf("diskstore: sync: %w", err)
	}
	return nil
}
