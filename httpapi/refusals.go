package httpapi

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/leashd/leash/engine"
)

// Refusal logging (spec §12.4). Two kinds of info lines, neither written by a background
// goroutine:
//
//   - "request refused", one per 401 or 403 (a key that is not valid, or a plan that
//     lacks the feature), with the request id, client address, method, route, status
//     and code: at most RefusalLinesPerInterval of them per interval, the rest only
//     counted, so that a flood of bad keys cannot flood the log;
//   - "requests refused", a summary of every 4xx answered in an interval, by code. It is
//     written by the first refusal after the interval ends, so an interval with no
//     refusal writes nothing, and the last busy interval's counts wait for the next
//     refusal.
//
// Neither ever carries an API key or its hash: the key is never read into the log.
const (
	// RefusalInterval is the interval of the refusal summary.
	RefusalInterval = time.Minute
	// RefusalLinesPerInterval bounds the "request refused" lines written per interval.
	RefusalLinesPerInterval = 20
)

// refusalLog counts the API's 4xx answers and writes the lines above.
type refusalLog struct {
	log   *slog.Logger
	clock engine.Clock

	mu       sync.Mutex
	start    time.Time             // the current interval's start; zero before the first refusal
	counts   map[engine.Code]int64 // 4xx answers in the interval, by code
	lines    int                   // "request refused" lines written in the interval
	unlogged int64                 // 401 and 403 answers counted but not written in the interval
}

func newRefusalLog(log *slog.Logger, clock engine.Clock) *refusalLog {
	if clock == nil {
		clock = engine.SystemClock{}
	}
	return &refusalLog{log: log, clock: clock, counts: make(map[engine.Code]int64)}
}

// refused notes a 4xx answer of the API: x's status and code, with its request id id.
// client is the request's client address (spec §15.7).
func (l *refusalLog) refused(ctx context.Context, x *exchange, id string, client netip.Addr) {
	now := l.clock.Now()
	own := x.status == http.StatusUnauthorized || x.status == http.StatusForbidden
	l.mu.Lock()
	var summary []slog.Attr
	if !l.start.IsZero() && now.Sub(l.start) >= RefusalInterval {
		summary = l.summaryLocked(now)
	}
	if l.start.IsZero() || summary != nil {
		l.start = now
	}
	l.counts[x.code]++
	write := own && l.lines < RefusalLinesPerInterval
	if write {
		l.lines++
	} else if own {
		l.unlogged++
	}
	l.mu.Unlock()

	if summary != nil {
		l.log.LogAttrs(ctx, slog.LevelInfo, "requests refused", summary...)
	}
	if write {
		l.log.LogAttrs(ctx, slog.LevelInfo, "request refused",
			slog.String("request_id", id),
			slog.String("client", client.String()),
			slog.String("method", x.r.Method),
			slog.String("route", x.route),
			slog.Int("status", x.status),
			slog.String("code", string(x.code)))
	}
}

// summaryLocked returns the attributes of the summary of the interval ending at now and
// starts a new one.
func (l *refusalLog) summaryLocked(now time.Time) []slog.Attr {
	codes := make([]slog.Attr, 0, len(l.counts))
	var total int64
	for _, c := range slices.Sorted(maps.Keys(l.counts)) {
		codes = append(codes, slog.Int64(string(c), l.counts[c]))
		total += l.counts[c]
	}
	attrs := []slog.Attr{
		slog.Int64("interval_ms", now.Sub(l.start).Milliseconds()),
		slog.Int64("total", total),
		slog.Attr{Key: "codes", Value: slog.GroupValue(codes...)},
		slog.Int64("auth_lines_not_written", l.unlogged),
	}
	clear(l.counts)
	l.lines, l.unlogged = 0, 0
	return attrs
}
