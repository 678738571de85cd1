// Package client calls Leash's /v1 JSON API (spec §3–§8) from Go (spec §13.1). It imports
// only the standard library and package wire, where the bodies it sends and reads are
// defined (itself standard library only).
//
//	c, err := client.New(client.Options{BaseURL: "http://localhost:8080", APIKey: key})
//	res, err := c.Limit(ctx, "api", "user-42", client.WithLimit(100), client.WithWindow(time.Minute))
//	if err == nil && !res.Allowed { /* wait res.RetryAfter() */ }
//
//	lease, err := c.Acquire(ctx, "jobs", "export")
//	if err != nil { return err } // client.IsDenied(err) when every slot is held
//	defer lease.Release(context.WithoutCancel(ctx))
//	lost := lease.KeepAlive(ctx)
//
// Every error from the service is a *Error (errors.As) carrying the HTTP status, the
// spec's code (IsCode(err, CodeHardCapExceeded)), the message and Retry-After. Calls that
// are safe to repeat (reads, releases, deletes) are retried on 503 and transport errors,
// honouring Retry-After, at most Options.MaxRetries times; checks, acquisitions, renewals
// and writes never are (a repeated spend could count twice, spec §3.8).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leashd/leash/wire"
)

// DefaultBaseURL is the base URL used when Options.BaseURL is empty.
const DefaultBaseURL = "http://localhost:8080"

// Options configure a Client. The zero value talks to DefaultBaseURL without a key.
type Options struct {
	// BaseURL is the service's address, e.g. "http://leash.internal:8080" (no /v1).
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <APIKey>".
	APIKey string
	// HTTPClient sends the requests; nil means a client of its own with Timeout.
	HTTPClient *http.Client
	// Timeout bounds each attempt (default 10 s; negative: none beyond the context's).
	Timeout time.Duration
	// MaxRetries is how many times a safe call is repeated after a 503 or a transport
	// error (default 2; negative: never).
	MaxRetries int
	// RetryBackoff is the first wait between attempts when the answer names none; it
	// doubles each time (default 100 ms).
	RetryBackoff time.Duration
	// MaxRetryWait bounds one wait, a Retry-After included: a longer Retry-After ends
	// the retries and returns the error (default 5 s).
	MaxRetryWait time.Duration
	// UserAgent is sent as User-Agent (default "leash-go-client").
	UserAgent string
}

// Client calls one Leash service. It is safe for concurrent use.
type Client struct {
	base    string
	key     string
	hc      *http.Client
	timeout time.Duration
	retries int
	backoff time.Duration
	maxWait time.Duration
	ua      string
}

// New returns a Client for opts; it fails only on a malformed BaseURL.
func New(opts Options) (*Client, error) {
	base := strings.TrimRight(opts.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("leash client: base URL %q is not an http(s) URL", opts.BaseURL)
	}
	c := &Client{base: base, key: opts.APIKey, hc: opts.HTTPClient, timeout: opts.Timeout,
		retries: opts.MaxRetries, backoff: opts.RetryBackoff, maxWait: opts.MaxRetryWait, ua: opts.UserAgent}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	if c.timeout == 0 {
		c.timeout = 10 * time.Second
	}
	if c.retries == 0 {
		c.retries = 2
	}
	if c.backoff <= 0 {
		c.backoff = 100 * time.Millisecond
	}
	if c.maxWait <= 0 {
		c.maxWait = 5 * time.Second
	}
	if c.ua == "" {
		c.ua = "leash-go-client"
	}
	return c, nil
}

// BaseURL returns the service address the client calls.
func (c *Client) BaseURL() string { return c.base }

// call is one API call: method, path (already escaped), an optional JSON body, whether
// it may be retried, and where to decode a 2xx answer (nil: ignore it). It returns the
// HTTP status of the 2xx answer.
func (c *Client) call(ctx context.Context, method, path string, body any, safe bool, out any) (int, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return 0, fmt.Errorf("leash client: encode %s %s: %w", method, path, err)
		}
	}
	retries := 0
	if safe && c.retries > 0 {
		retries = c.retries
	}
	wait := c.backoff
	for attempt := 0; ; attempt++ {
		status, err := c.once(ctx, method, path, payload, out)
		if err == nil || attempt >= retries || !retryable(ctx, err) {
			return status, err
		}
		d := wait
		var e *Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			d = e.RetryAfter
		} else {
			d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
		}
		if d > c.maxWait {
			return status, err
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return status, err
		case <-t.C:
		}
		wait *= 2
	}
}

// retryable: a 503, or a transport error that is not the caller's own context ending.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode == http.StatusServiceUnavailable
	}
	return errors.Is(err, errTransport)
}

// errTransport marks errors where no HTTP answer was read.
var errTransport = errors.New("leash client: transport error")

type transportError struct {
	op  string
	err error
}

func (e *transportError) Error() string { return "leash client: " + e.op + ": " + e.err.Error() }
func (e *transportError) Unwrap() []error {
	return []error{e.err, errTransport}
}

func (c *Client) once(ctx context.Context, method, path string, payload []byte, out any) (int, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, fmt.Errorf("leash client: %s %s: %w", method, path, err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	op := method + " " + path
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, &transportError{op: op, err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, &transportError{op: op, err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, newError(op, resp, b)
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("leash client: %s: decode the answer: %w", op, err)
		}
	}
	return resp.StatusCode, nil
}

// newError reads an error answer: the spec §3.6 body when there is one, else the status.
func newError(op string, resp *http.Response, body []byte) *Error {
	e := &Error{Op: op, StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var w wire.Error
	if json.Unmarshal(body, &w) == nil && w.Code != "" {
		e.Code, e.Message = w.Code, w.Error
	} else {
		e.Message = http.StatusText(resp.StatusCode)
	}
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// escape makes one path segment.
func escape(s string) string { return url.PathEscape(s) }
