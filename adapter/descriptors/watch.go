package descriptors

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/leashd/leash/internal/filewatch"
)

// Watch reloads the descriptor files and folders in paths whenever their contents
// change, until ctx is done. It compares the files' contents every interval (1 s when
// interval is 0 or less) and also reacts to file-system events, so it follows edits in
// place, files added to or removed from a folder, and Kubernetes ConfigMap symlink
// swaps.
//
// loaded is the Config in force, as Load read it from the same paths: the files as Load
// read them are not applied again, and an edit made since that load is applied as Watch
// starts. A nil loaded (no Config in force) or one that did not come from Load of paths
// has the files applied as Watch starts.
//
// A changed set of files that loads is passed to apply. A load error or an apply error
// is logged and the previous configuration stays in force. An apply error is retried at
// each interval while the files stay unchanged, since it may depend on other
// configuration (a plan that does not yet allow an algorithm, say); it is logged again
// only when its text changes. apply is called from Watch's goroutine, one call at a
// time. A nil logger means slog.Default().
func Watch(ctx context.Context, paths []string, loaded *Config, interval time.Duration, apply func(*Config) error, logger *slog.Logger) {
	if interval <= 0 {
		interval = time.Second
	}
	if logger == nil {
		logger = slog.Default()
	}
	w := &watcher{ctx: ctx, paths: slices.Clone(paths), apply: apply, log: logger}
	if loaded != nil {
		w.applied = loaded.fingerprint
	}
	w.check() // an edit made since the load
	filewatch.Run(ctx, paths, interval, w.check, logger)
}

type watcher struct {
	ctx   context.Context // Watch's: an apply refused after it ended is not logged
	paths []string
	apply func(*Config) error
	log   *slog.Logger

	applied  [32]byte // fingerprint of the files in force
	seen     [32]byte // fingerprint of the files last examined
	pending  *Config  // loaded from seen but not yet applied
	applyErr string   // text of the last apply error logged
}

// read lists and reads the files and fingerprints them.
func (w *watcher) read() ([32]byte, []source, error) {
	srcs, err := readSources(w.paths)
	return fingerprint(srcs, err), srcs, err
}

// fingerprint summarises the files read and the error that stopped the reading, if any.
// It is never the zero value.
func fingerprint(srcs []source, err error) [32]byte {
	h := sha256.New()
	if err != nil {
		h.Write([]byte("error\x00" + err.Error()))
	}
	for _, s := range srcs {
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(s.name))))
		h.Write([]byte(s.name))
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(s.data))))
		h.Write(s.data)
	}
	var fp [32]byte
	h.Sum(fp[:0])
	return fp
}

// check reloads when the files changed and applies what loads.
func (w *watcher) check() {
	fp, srcs, err := w.read()
	if fp == w.applied {
		w.seen, w.pending, w.applyErr = fp, nil, ""
		return
	}
	if fp != w.seen {
		w.seen, w.pending, w.applyErr = fp, nil, ""
		if err == nil {
			w.pending, err = build(srcs)
		}
		if err != nil {
			w.log.Error("descriptors: config not loaded; the previous one stays in force", errAttrs(err)...)
			return
		}
	}
	if w.pending == nil {
		return // a load error, already logged; wait for the next change
	}
	if err := w.apply(w.pending); err != nil {
		if w.ctx.Err() != nil {
			return // stopping: the caller refused because it no longer wants this watcher's files
		}
		if err.Error() != w.applyErr {
			w.applyErr = err.Error()
			w.log.Error("descriptors: config not applied; the previous one stays in force", errAttrs(err)...)
		}
		return
	}
	w.log.Info("descriptors: config applied", "domains", w.pending.Domains(), "files", len(w.pending.Files()))
	w.applied, w.pending, w.applyErr = fp, nil, ""
}

// errAttrs are the log attributes of an error: its text and, for an *Error, the file and path.
func errAttrs(err error) []any {
	attrs := []any{"error", err.Error()}
	var e *Error
	if errors.As(err, &e) {
		attrs = append(attrs, "file", e.File)
		if e.Line > 0 {
			attrs = append(attrs, "line", e.Line)
		}
		if e.Path != "" {
			attrs = append(attrs, "path", e.Path)
		}
	}
	return attrs
}
