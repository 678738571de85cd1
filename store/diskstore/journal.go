package diskstore

import (
	"errors"
	"fmt"
	"log/slog"
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
func (j *journal) Set(key, value []byte) (err error) {
	defer closedWrite(&err)
	return j.wrote("set", j.db.Set(key, value, pebble.Sync))
}

// Delete removes a record.
func (j *journal) Delete(key []byte) (err error) {
	defer closedWrite(&err)
	j.deletes.Add(1)
	return j.wrote("delete", j.db.Delete(key, pebble.Sync))
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
