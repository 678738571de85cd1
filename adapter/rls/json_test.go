package rls_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/leashd/leash/adapter/rls"
)

// jsonServer serves h's service on the /json handler over a loopback listener.
func jsonServer(t *testing.T, h *harness, healthy func(context.Context) error) string {
	t.Helper()
	srv := httptest.NewServer(rls.NewJSONHandler(h.svc, rls.JSONOptions{Healthy: healthy}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func postJSON(t *testing.T, url, body string) (int, string, string) {
	t.Helper()
	resp, err := http.Post(url+"/json", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// POST /json answers as ShouldRateLimit does, in proto JSON: 200 for OK, 429 for
// OVER_LIMIT, 400 for a request it cannot read. Mirrors the peer's
// src/server/server_impl.go (NewJsonHandler) and test/server/server_impl_test.go.
func TestJSONEndpoint(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": edgeConfig})
	url := jsonServer(t, h, nil)
	req := `{"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": "json-user"}]}]}`
	for i, want := range []struct {
		code    int
		overall rlsv3.RateLimitResponse_Code
		left    uint32
	}{{200, ok, 2}, {200, ok, 1}, {200, ok, 0}, {429, over, 0}} {
		code, ctype, body := postJSON(t, url, req)
		if code != want.code || ctype != "application/json" {
			t.Fatalf("call %d: %d %q %s, want %d", i, code, ctype, body, want.code)
		}
		var resp rlsv3.RateLimitResponse
		if err := protojson.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatalf("call %d: body %s: %v", i, body, err)
		}
		st := resp.GetStatuses()[0]
		if resp.GetOverallCode() != want.overall || st.GetLimitRemaining() != want.left || st.GetCurrentLimit().GetRequestsPerUnit() != 3 {
			t.Errorf("call %d: %v", i, &resp)
		}
	}
	// The same counter as the gRPC endpoint: one decision path.
	if st := h.one(desc("user", "json-user")); st.GetCode() != over {
		t.Errorf("gRPC after /json: %v", st)
	}

	for _, tc := range []struct{ name, body string }{
		{"not JSON", "{"},
		{"empty body", ""},
		{"unknown field", `{"domain": "edge", "bogus": 1, "descriptors": [{"entries": [{"key": "user", "value": "x"}]}]}`},
		{"empty domain", `{"descriptors": [{"entries": [{"key": "user", "value": "x"}]}]}`},
		{"no descriptors", `{"domain": "edge"}`},
		{"too large", `{"domain": "` + strings.Repeat("x", 2<<20) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := postJSON(t, url, tc.body)
			if code != http.StatusBadRequest || body != "Bad Request\n" {
				t.Errorf("%d %q, want 400 Bad Request", code, body)
			}
		})
	}

	h.store.down.Store(true)
	if code, _, body := postJSON(t, url, req); code != http.StatusServiceUnavailable {
		t.Errorf("store down: %d %s, want 503", code, body)
	}
}

// /healthcheck answers "OK" while healthy and 500 otherwise, to any method, as the peer's
// src/server/health.go and src/server/server_impl.go do.
func TestJSONHealthcheck(t *testing.T) {
	h := newHarness(t, scalePlan(), nil)
	var down atomic.Bool
	url := jsonServer(t, h, func(context.Context) error {
		if down.Load() {
			return errors.New("down")
		}
		return nil
	})
	get := func() (int, string) {
		resp, err := http.Get(url + "/healthcheck")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != 200 || body != "OK" {
		t.Errorf("healthy: %d %q", code, body)
	}
	down.Store(true)
	if code, _ := get(); code != 500 {
		t.Errorf("unhealthy: %d, want 500", code)
	}
	down.Store(false)
	resp, err := http.Post(url+"/healthcheck", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /healthcheck: %d, want 200 (any method, as the peer)", resp.StatusCode)
	}
}
