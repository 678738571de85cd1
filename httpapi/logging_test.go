package httpapi_test

import (
	"bufio"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/leashd/leash/httpapi"
	"github.com/leashd/leash/testkit"
)

// logEnv is an API over env's engine whose log is captured as JSON lines at level.
type logEnv struct {
	*env
	api  *httpapi.API
	logs *testkit.SyncBuffer
}

func newLogEnv(t *testing.T, level slog.Level) *logEnv {
	e := newEnv(t, nil)
	logs := &testkit.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: level}))
	api := httpapi.New(httpapi.Options{Engine: e.eng, Logger: log, Clock: e.clock, AuthGuard: lenientGuard()})
	return &logEnv{env: e, api: api, logs: logs}
}

// send serves one request from client address 192.0.2.7 and returns its request id.
func (l *logEnv) send(method, path, auth, body string) string {
	l.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = "192.0.2.7:4711"
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	l.api.ServeHTTP(w, r)
	return w.Result().Header.Get("X-Request-Id")
}

// lines returns the captured log lines with message msg.
func (l *logEnv) lines(msg string) []map[string]any {
	l.t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.logs.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			l.t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// An authentication failure is logged at info with the request id, the client address,
// the route and the code, and never the key or its hash.
func TestLogAuthFailure(t *testing.T) {
	l := newLogEnv(t, slog.LevelInfo)
	const badKey = "not-a-key-0123456789"
	id := l.send(http.MethodPost, "/v1/limit", "Bearer "+badKey, `{}`)
	got := l.lines("request refused")
	if len(got) != 1 {
		t.Fatalf("%d refusal lines, want 1; log:\n%s", len(got), l.logs.String())
	}
	m := got[0]
	if m["level"] != "INFO" || m["request_id"] != id || m["client"] != "192.0.2.7" || m["route"] != "POST /v1/limit" ||
		m["code"] != "unauthorized" || m["status"] != float64(401) {
		t.Fatalf("refusal line %v (request id %s)", m, id)
	}
	if s := l.logs.String(); strings.Contains(s, badKey) {
		t.Fatalf("the key is in the log: %s", s)
	}
}

// A plan refusal (403) is logged the same way; a 400 is not logged on its own line.
func TestLogPlanRefusal(t *testing.T) {
	l := newLogEnv(t, slog.LevelInfo)
	id := l.send(http.MethodPost, "/v1/leases", "Bearer "+keyFree, `{"namespace":"ns","key":"k"}`)
	l.send(http.MethodPost, "/v1/limit", "Bearer "+keyAcme, `{"bogus":1}`)
	got := l.lines("request refused")
	if len(got) != 1 || got[0]["request_id"] != id || got[0]["status"] != float64(403) || got[0]["code"] != "concurrent_not_on_plan" {
		t.Fatalf("refusal lines %v, want one 403 with request id %s", got, id)
	}
}

// Refusals are summed up by code once per interval, by the first refusal after it.
func TestLogRefusalSummary(t *testing.T) {
	l := newLogEnv(t, slog.LevelInfo)
	l.send(http.MethodPost, "/v1/limit", "Bearer "+keyAcme, `{"bogus":1}`)
	l.send(http.MethodPost, "/v1/limit", "Bearer "+keyAcme, `{"bogus":1}`)
	l.send(http.MethodGet, "/v1/nowhere", "", "")
	l.send(http.MethodGet, "/v1/limit", "", "")
	l.send(http.MethodPost, "/v1/limit", "Bearer nope", `{}`)
	if got := l.lines("requests refused"); len(got) != 0 {
		t.Fatalf("summary before the interval ended: %v", got)
	}
	l.clock.Advance(time.Minute)
	l.send(http.MethodGet, "/v1/nowhere", "", "")
	got := l.lines("requests refused")
	if len(got) != 1 {
		t.Fatalf("%d summary lines, want 1; log:\n%s", len(got), l.logs.String())
	}
	m := got[0]
	codes, _ := m["codes"].(map[string]any)
	want := map[string]float64{"invalid_request": 2, "not_found": 1, "method_not_allowed": 1, "unauthorized": 1}
	if len(codes) != len(want) {
		t.Fatalf("summary %v, want codes %v", m, want)
	}
	for c, n := range want {
		if codes[c] != n {
			t.Fatalf("summary %v, want codes %v", m, want)
		}
	}
	if m["interval_ms"] != float64(60000) || m["total"] != float64(5) {
		t.Fatalf("summary %v: want interval_ms 60000, total 5", m)
	}
}

// At debug every request is logged with its request id and its duration in milliseconds.
func TestLogDebugRequest(t *testing.T) {
	l := newLogEnv(t, slog.LevelDebug)
	id := l.send(http.MethodPost, "/v1/limit", "Bearer "+keyAcme, `{"namespace":"ns","key":"k","limit":1,"window_ms":1000}`)
	got := l.lines("request")
	if len(got) != 1 || got[0]["request_id"] != id || got[0]["status"] != float64(200) {
		t.Fatalf("request lines %v, want one with request id %s", got, id)
	}
	if _, ok := got[0]["duration_ms"].(float64); !ok || got[0]["duration"] != nil {
		t.Fatalf("request line %v: want duration_ms, no duration", got[0])
	}
}

// A flood of bad keys writes at most RefusalLinesPerInterval lines per interval; the
// rest are counted in the summary.
func TestLogAuthFailuresBounded(t *testing.T) {
	l := newLogEnv(t, slog.LevelInfo)
	n := httpapi.RefusalLinesPerInterval + 5
	for range n {
		l.send(http.MethodPost, "/v1/limit", "Bearer nope", `{}`)
	}
	if got := l.lines("request refused"); len(got) != httpapi.RefusalLinesPerInterval {
		t.Fatalf("%d refusal lines, want %d", len(got), httpapi.RefusalLinesPerInterval)
	}
	l.clock.Advance(httpapi.RefusalInterval)
	l.send(http.MethodPost, "/v1/limit", "Bearer nope", `{}`)
	got := l.lines("request refused")
	sum := l.lines("requests refused")
	if len(got) != httpapi.RefusalLinesPerInterval+1 || len(sum) != 1 || sum[0]["auth_lines_not_written"] != float64(5) || sum[0]["total"] != float64(n) {
		t.Fatalf("after the interval: %d refusal lines, summary %v", len(got), sum)
	}
}
