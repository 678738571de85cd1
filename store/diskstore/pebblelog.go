package diskstore

import (
	"fmt"
	"log/slog"
	"os"
)

// pebbleLogger writes Pebble's messages to the store's logger: informational ones at
// debug level, errors at error level.
type pebbleLogger struct{ log *slog.Logger }

// Infof logs an informational message of Pebble's.
func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug("pebble", "msg", fmt.Sprintf(format, args...))
}

// Errorf logs an error of Pebble's.
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("pebble", "msg", fmt.Sprintf(format, args...))
}

// Fatalf logs a fatal error of Pebble's and exits, as Pebble expects.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error("pebble fatal", "msg", fmt.Sprintf(format, args...))
	os.Exit(1)
}
