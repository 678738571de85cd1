package console_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/leashd/leash/console"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func TestServesIndexWithCSP(t *testing.T) {
	res := get(t, console.Handler(), http.MethodGet, "/console/")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`<script type="module" src="js/app.js">`)) {
		t.Fatalf("GET /console/: %d %q", res.StatusCode, body)
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q allows unsafe sources", csp)
	}
	if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q", got)
	}
	js := get(t, console.Handler(), http.MethodGet, "/console/js/app.js")
	if ct := js.Header.Get("Content-Type"); js.StatusCode != 200 || !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("app.js: %d %q", js.StatusCode, ct)
	}
}

func TestMountRoutes(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := console.Mount(api)
	if res := get(t, h, http.MethodGet, "/console"); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/console/" {
		t.Errorf("/console: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	if res := get(t, h, http.MethodPost, "/console/"); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /console/: %d", res.StatusCode)
	}
	if res := get(t, h, http.MethodGet, "/console/nope.js"); res.StatusCode != http.StatusNotFound {
		t.Errorf("missing asset: %d", res.StatusCode)
	}
	for _, p := range []string{"/v1/limit", "/consoles", "/"} {
		if res := get(t, h, http.MethodGet, p); res.StatusCode != http.StatusTeapot {
			t.Errorf("%s did not reach the API: %d", p, res.StatusCode)
		}
	}
}

// TestAssetsGzippedSize holds the console's files to 250 KB gzipped in all.
func TestAssetsGzippedSize(t *testing.T) {
	total := 0
	_ = fs.WalkDir(console.Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, _ := fs.ReadFile(console.Assets(), p)
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(data)
		zw.Close()
		total += buf.Len()
		return nil
	})
	t.Logf("console assets: %d bytes gzipped", total)
	if total == 0 || total > 250_000 {
		t.Fatalf("console assets are %d bytes gzipped; the bound is 250,000", total)
	}
}

// TestAssetsStayInTheirOrigin fails when a file inserts markup from strings, evaluates
// code, or names another origin: tenant text goes into the page as text only (the
// browser test shows it with payloads), and the page loads nothing from elsewhere.
func TestAssetsStayInTheirOrigin(t *testing.T) {
	markup := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setTimeout\(['"]|javascript:`)
	origin := regexp.MustCompile(`(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	_ = fs.WalkDir(console.Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, _ := fs.ReadFile(console.Assets(), p)
		text := strings.ReplaceAll(string(data), "http://www.w3.org/2000/svg", "")
		for i, line := range strings.Split(text, "\n") {
			if m := markup.FindString(line); m != "" {
				t.Errorf("%s:%d uses %s", p, i+1, m)
			}
			if m := origin.FindString(line); m != "" && !strings.Contains(line, "example.com") {
				t.Errorf("%s:%d names another origin: %s", p, i+1, m)
			}
		}
		return nil
	})
}

// TestErrorsAreJSONAndNoListings: a path under /console/ that is not one of its files (a
// folder included: no directory listing) is 404 with the API's JSON error body, and a
// method other than GET or HEAD is 405 in JSON (spec §16, §3.6).
func TestErrorsAreJSONAndNoListings(t *testing.T) {
	h := console.Handler()
	for _, c := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/console/js/", 404, "not_found"},
		{http.MethodGet, "/console/js", 404, "not_found"},
		{http.MethodGet, "/console/nope.js", 404, "not_found"},
		{http.MethodGet, "/console/js/../app.css", 404, "not_found"},
		{http.MethodHead, "/console/js/", 404, "not_found"},
		{http.MethodPost, "/console/", 405, "method_not_allowed"},
	} {
		res := get(t, h, c.method, c.path)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != c.status || res.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %q %q, want %d in JSON", c.method, c.path, res.StatusCode, res.Header.Get("Content-Type"), body, c.status)
			continue
		}
		if c.method == http.MethodHead {
			continue
		}
		var e struct{ Error, Code string }
		if err := json.Unmarshal(body, &e); err != nil || e.Code != c.code || e.Error == "" {
			t.Errorf("%s %s: body %q, want {error, code: %s}", c.method, c.path, body, c.code)
		}
		if bytes.Contains(body, []byte("app.js")) {
			t.Errorf("%s %s lists the folder: %q", c.method, c.path, body)
		}
	}
	for _, p := range []string{"/console/", "/console/js/app.js", "/console/app.css"} {
		if res := get(t, h, http.MethodGet, p); res.StatusCode != 200 {
			t.Errorf("GET %s: %d", p, res.StatusCode)
		}
	}
}
