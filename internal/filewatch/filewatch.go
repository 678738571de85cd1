// Package filewatch tells its caller when a set of files and folders may have changed:
// after a burst of file-system events in their folders settles, and on every poll tick
// (events can be missed, and some file systems send none). The caller compares contents
// itself; filewatch only says when to look.
package filewatch

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Settle is how long Run waits after a file-system event before calling check, so that
// a burst of events (an editor's save, a Kubernetes ConfigMap symlink swap) is one call.
const Settle = 100 * time.Millisecond

// Run calls check whenever the files or folders in paths may have changed, and every
// poll, until ctx is done; check runs on Run's goroutine, one call at a time. It watches
// the folders (not the files), so atomic renames and ConfigMap swaps are seen.
func Run(ctx context.Context, paths []string, poll time.Duration, check func(), log *slog.Logger) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	if fw, err := fsnotify.NewWatcher(); err != nil {
		log.Warn("file watch: events unavailable; polling only", "err", err)
	} else {
		defer fw.Close()
		for _, dir := range Dirs(paths) {
			if err := fw.Add(dir); err != nil {
				log.Warn("file watch: cannot watch folder; polling it", "dir", dir, "err", err)
			}
		}
		events, errs = fw.Events, fw.Errors
		log.Debug("file watch: watching", "dirs", fw.WatchList())
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	soon := time.NewTimer(time.Hour)
	soon.Stop()
	defer soon.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			soon.Reset(Settle)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			log.Warn("file watch: event error; polling continues", "err", err)
		case <-soon.C:
			check()
		case <-tick.C:
			check()
		}
	}
}

// Dirs returns the folders whose events matter for paths: each folder named, the folder
// of each file named, and the folders of their symlink targets, each once.
func Dirs(paths []string) []string {
	seen := map[string]bool{}
	var dirs []string
	add := func(d string) {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	for _, p := range paths {
		if info, err := os.Stat(p); err == nil && info.IsDir() {
			add(p)
			continue
		}
		add(filepath.Dir(p))
		if real, err := filepath.EvalSymlinks(p); err == nil {
			add(filepath.Dir(real))
		}
	}
	return dirs
}
