// Package console serves Leash's web console: static files embedded in the binary, served
// at /console/ on the HTTP listener (spec §16). The console is a client of the public /v1
// API and nothing else; this package only hands out its files, under a Content-Security-Policy
// that keeps the page to its own origin.
package console

import (
	"embed"
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

// Handler serves the console's files under Prefix; /console redirects to /console/.
func Handler() http.Handler {
	files := http.StripPrefix(Prefix, http.FileServerFS(Assets()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		files.ServeHTTP(w, r)
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
