package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MiddlewareOptions configure Middleware.
type MiddlewareOptions struct {
	// Namespace is the namespace every check uses (required).
	Namespace string
	// Key returns the key of a request; "" lets the request through unchecked. Nil means
	// KeyByIP. See KeyByIP, KeyByHeader and KeyByBearer.
	Key func(*http.Request) string
	// Algorithm, Limit and Window set the check's fields inline; those left zero come
	// from the namespace's rule (spec §4.2).
	Algorithm string
	Limit     int64
	Window    time.Duration
	// Cost is the units one request spends (0 means 1).
	Cost int64
	// FailClosed answers 503 when Leash cannot decide (unavailable, a transport error,
	// a timeout, or any error other than hard_cap_exceeded). The default, fail open,
	// lets the request through, as Envoy's rate-limit filter does by default.
	FailClosed bool
	// Timeout bounds one check (default 1 s); the request's own context bounds it too.
	Timeout time.Duration
	// OnError is called with every error that is not a denial, before failing open or
	// closed: log it or count it in a metric. It must be safe for concurrent use.
	OnError func(r *http.Request, err error)
}

// The code of Middleware's 429 body when a check is denied.
const CodeRateLimited = "rate_limited"

// Middleware limits an http.Handler with one Leash check per request (spec §13.3). Allowed requests
// get RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset headers. A denied request
// is answered 429 with those headers, Retry-After and the JSON error body
// {"error": "rate limit exceeded", "code": "rate_limited"}; an account over its hard cap
// gets 429 with Leash's own hard_cap_exceeded body and Retry-After. When Leash cannot
// decide, OnError is called and the request goes through (fail open, the default) or is
// answered 503 {"code": "unavailable"} with Retry-After: 1 (FailClosed).
func Middleware(c *Client, opts MiddlewareOptions) func(http.Handler) http.Handler {
	keyOf := opts.Key
	if keyOf == nil {
		keyOf = KeyByIP
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = time.Second
	}
	var checkOpts []Option
	if opts.Algorithm != "" {
		checkOpts = append(checkOpts, WithAlgorithm(opts.Algorithm))
	}
	if opts.Limit > 0 {
		checkOpts = append(checkOpts, WithLimit(opts.Limit))
	}
	if opts.Window > 0 {
		checkOpts = append(checkOpts, WithWindow(opts.Window))
	}
	if opts.Cost > 0 {
		checkOpts = append(checkOpts, WithCost(opts.Cost))
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := keyOf(r)
			if key == "" {
				next.ServeHTTP(w, r)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			res, err := c.Limit(ctx, opts.Namespace, key, checkOpts...)
			cancel()
			if err != nil {
				var e *Error
				if errors.As(err, &e) && e.Code == CodeHardCapExceeded {
					writeError(w, http.StatusTooManyRequests, e.Message, e.Code, int64(e.RetryAfter/time.Second))
					return
				}
				if opts.OnError != nil {
					opts.OnError(r, err)
				}
				if opts.FailClosed {
					writeError(w, http.StatusServiceUnavailable, "rate limiter unavailable", CodeUnavailable, 1)
					return
				}
				next.ServeHTTP(w, r)
				return
			}
			h := w.Header()
			h.Set("RateLimit-Limit", strconv.FormatInt(res.Limit, 10))
			h.Set("RateLimit-Remaining", strconv.FormatInt(res.Remaining, 10))
			h.Set("RateLimit-Reset", strconv.FormatInt((res.ResetMS+999)/1000, 10))
			if !res.Allowed {
				writeError(w, http.StatusTooManyRequests, "rate limit exceeded", CodeRateLimited, retryAfterSeconds(res.ResetMS))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// writeError answers the JSON error body of spec §3.6 with Retry-After when retryAfter > 0.
func writeError(w http.ResponseWriter, status int, msg, code string, retryAfter int64) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(retryAfter, 10))
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg, "code": code})
}

// KeyByIP keys a request by its peer's IP address (RemoteAddr without the port). Behind
// a proxy, use KeyByHeader with the header the proxy sets.
func KeyByIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// KeyByHeader keys a request by a header's value ("" when absent: unchecked).
func KeyByHeader(name string) func(*http.Request) string {
	return func(r *http.Request) string { return r.Header.Get(name) }
}

// KeyByBearer keys a request by its "Authorization: Bearer" token ("" when absent).
// Leash stores the key as given: hash tokens first if they must not be seen there.
func KeyByBearer(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}
