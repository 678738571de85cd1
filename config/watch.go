package config

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"log/slog"
	"time"

	"github.com/leashd/leash/internal/filewatch"
)

// watchPoll re-reads the files even without events (a missed event, no inotify).
const watchPoll = time.Second

// Watch re-loads the config whenever one of its files changes and passes each valid
// result to onChange; an invalid one is logged with its error and ignored, so the running
// config stays. It blocks until ctx is done (run it in a goroutine) and calls onChange from
// that goroutine only.
//
// It watches the files' folders, not the files, so atomic renames and Kubernetes ConfigMap
// symlink swaps are seen, and it also re-reads the files every second; a change is applied
// within about a second. A file is re-loaded only when the content of some file changed.
//
// Only accounts, plans and envoy settings are meant to apply live (spec §10.4):
// listeners, TLS settings, the store and the other keys need a restart; the caller picks
// what it uses from the new Config. logger may be nil.
//
// loaded is the config in force, as Load read it from the same paths: the files as Load
// read them are not passed on again, and an edit made since that load is passed on as
// Watch starts. A nil loaded (none in force) has the files passed on as Watch starts.
func Watch(ctx context.Context, paths []string, environ []string, loaded *Config, onChange func(*Config), logger *slog.Logger) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if len(paths) == 0 {
		<-ctx.Done()
		return
	}
	var last [32]byte // in force; zero: none
	if loaded != nil {
		last = loaded.fingerprint
	}
	check := func() {
		files := readFiles(paths)
		fp := fingerprint(files)
		if fp == last {
			return
		}
		last = fp
		cfg, err := load(files, environ)
		if err != nil {
			logger.Error("config reload rejected; the running config stays", "err", err)
			return
		}
		cfg.fingerprint = fp
		onChange(cfg)
	}
	check() // an edit made since the load
	filewatch.Run(ctx, paths, watchPoll, check, logger)
}

// fingerprint summarises the files' names, contents and read errors.
func fingerprint(files []file) [32]byte {
	h := sha256.New()
	part := func(b []byte) {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
		h.Write(b)
	}
	for _, f := range files {
		part([]byte(f.path))
		if f.err != nil {
			part([]byte("error: " + f.err.Error()))
		} else {
			part(f.data)
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}
