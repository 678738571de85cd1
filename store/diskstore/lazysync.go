package diskstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// lazySyncFS defers the syncs of Pebble's write-ahead log files to the store's syncer.
//
// Pebble writes a commit to its log file from a background loop, so a commit made with
// pebble.NoSync can return before its bytes reached the operating system, and a kill -9
// would lose it. The store commits with pebble.Sync instead, which waits until the log
// was written and synced, on this file system, whose log files make that sync a no-op:
// an answered commit has been written (it survives the process), and syncAll, run every
// SyncInterval, syncs it to stable storage (it survives power loss). A log file is
// synced for real before it is closed.
type lazySyncFS struct {
	vfs.FS
	mu    sync.Mutex
	files map[*lazyFile]struct{}
}

func newLazySyncFS(fs vfs.FS) *lazySyncFS {
	return &lazySyncFS{FS: fs, files: make(map[*lazyFile]struct{})}
}

// wrap returns a log file's handle with its syncs deferred, and other files as they are.
func (fs *lazySyncFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil || filepath.Ext(name) != ".log" {
		return f, err
	}
	lf := &lazyFile{File: f, fs: fs, name: name}
	fs.mu.Lock()
	fs.files[lf] = struct{}{}
	fs.mu.Unlock()
	return lf, nil
}

// Create creates a file.
func (fs *lazySyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(f, name, err)
}

// ReuseForWrite reuses a recycled file under a new name.
func (fs *lazySyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(f, newname, err)
}

// syncAll syncs every open log file to stable storage.
func (fs *lazySyncFS) syncAll() error {
	fs.mu.Lock()
	files := make([]*lazyFile, 0, len(fs.files))
	for f := range fs.files {
		files = append(files, f)
	}
	fs.mu.Unlock()
	var errs []error
	for _, f := range files {
		if err := f.realSync(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lazyFile is a log file whose syncs wait for the syncer.
type lazyFile struct {
	vfs.File
	fs     *lazySyncFS
	name   string
	mu     sync.Mutex // orders realSync with Close
	closed bool
}

// Sync is deferred to the syncer.
func (f *lazyFile) Sync() error { return nil }

// SyncData is deferred to the syncer.
func (f *lazyFile) SyncData() error { return nil }

// SyncTo is deferred to the syncer; it reports a full sync, so Pebble asks no more.
func (f *lazyFile) SyncTo(int64) (bool, error) { return true, nil }

// realSync syncs the file to stable storage, unless it is closed.
func (f *lazyFile) realSync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	if err := f.File.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", f.name, err)
	}
	return nil
}

// Close syncs the file for real, then closes it.
func (f *lazyFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fs.mu.Lock()
	delete(f.fs.files, f)
	f.fs.mu.Unlock()
	f.closed = true
	return errors.Join(f.File.Sync(), f.File.Close())
}
