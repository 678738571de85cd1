// Package console serves Leash's web console: static files embedded in the binary, served
// at /console/ on the HTTP listener (spec §16). The console is a client of the public /v1
// API and nothing else; this package only hands out its files, under a Content-Security-Policy
// that keeps the page to its own origin.
package console

import (
	"embed"
	"io"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console/"

// CSP is the Content-Security-Policy of every console response: scripts, styles, images
// and API calls from the console's own origin only, no inline script, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Assets returns the console's files, rooted at the folder index.html is in.
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has the folder
	}
	return sub
}

// Errors under Prefix have the API's JSON body (spec §3.6).
const (
	notFoundBody  = `{"error":"no such endpoint","code":"not_found"}`
	methodBody    = `{"error":"method not allowed on this endpoint; see the Allow header","code":"method_not_allowed"}`
	indexFileName = "index.html"
)

// jsonError answers status with body, the API's JSON error.
func jsonError(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Last-Modified")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// Handler serves the console's files under Prefix; /console redirects to /console/.
// Only files are served: a folder, a missing file or a path that is not clean is 404 in
// JSON, never a directory listing.
func Handler() http.Handler {
	fsys := Assets()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			jsonError(w, http.StatusMethodNotAllowed, methodBody)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = indexFileName
		}
		if !ok || !fs.ValidPath(name) {
			jsonError(w, http.StatusNotFound, notFoundBody)
			return
		}
		if st, err := fs.Stat(fsys, name); err != nil || !st.Mode().IsRegular() {
			jsonError(w, http.StatusNotFound, notFoundBody)
			return
		}
		f, err := fsys.Open(name)
		if err != nil {
			jsonError(w, http.StatusNotFound, notFoundBody)
			return
		}
		defer f.Close()
		st, _ := f.Stat()
		http.ServeContent(w, r, name, st.ModTime(), f.(io.ReadSeeker))
	})
}

// Mount returns a handler that serves the console under Prefix (and the bare /console)
// and passes every other request to next unchanged.
func Mount(next http.Handler) http.Handler {
	ui := Handler()
	bare := strings.TrimSuffix(Prefix, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == bare || strings.HasPrefix(p, Prefix) {
			ui.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
