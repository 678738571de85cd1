package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/tracing"
	"go.opentelemetry.io/otel/trace"
)

// call is one request's state. It is pooled by the API: it carries the buffers and the
// decoder reused across requests, and the storage the engine requests' optional fields
// point into, so the hot path allocates almost nothing of its own.
//
// It is also the http.ResponseWriter the router and the handlers write through, which
// records the status for the metrics and the log.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	status int
	route  string
	id     string // the request id, or "" until a generated one is needed
	idSeq  uint64 // the sequence number of a generated id
	acct   *engine.Account
	err    error      // the cause of a 5xx, for the log only
	span   trace.Span // the request's server span when it records; nil with tracing off or unsampled

	body bytes.Buffer // the request body
	out  []byte       // the response body being built
	p    parser

	chk checkBody
	rst engine.ResetRequest
	// The one-item query of POST /v1/limit and its verdict.
	q    engine.Query
	item [1]engine.Item
	res  [1]engine.ItemResult
	acq  engine.AcquireRequest
	rule engine.RuleRequest
	// Storage of optional fields: the requests above point here when a field is present.
	alg, name, ignoredStr string
	limit, window, cost   int64
}

// maxPooledBody is the largest body buffer kept for reuse; a call that read a larger
// body drops its buffer so idle pooled calls stay small.
const maxPooledBody = 8 << 10

func (c *call) begin(w http.ResponseWriter, r *http.Request) {
	c.w, c.r = w, r
	c.status = 0
	c.route = unmatchedRoute
	c.acct, c.err = nil, nil
}

// end drops the references the call holds so a pooled call pins nothing.
func (c *call) end() {
	c.w, c.r, c.acct, c.err, c.id, c.idSeq, c.span = nil, nil, nil, nil, "", 0, nil
	if c.body.Cap() > maxPooledBody {
		c.body = bytes.Buffer{}
	} else {
		c.body.Reset()
	}
	if cap(c.out) > maxPooledBody {
		c.out = nil
	}
	c.p.end()
	c.chk, c.rst, c.acq, c.rule = checkBody{}, engine.ResetRequest{}, engine.AcquireRequest{}, engine.RuleRequest{}
	c.q, c.item[0] = engine.Query{}, engine.Item{}
	c.alg, c.name, c.ignoredStr = "", "", ""
}

// Header returns the response headers.
func (c *call) Header() http.Header { return c.w.Header() }

// WriteHeader sends the status line and headers, recording the status.
func (c *call) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.w.WriteHeader(code)
}

// Write writes body bytes (status 200 if none was sent).
func (c *call) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.w.Write(b)
}

// Unwrap gives http.ResponseController the underlying writer.
func (c *call) Unwrap() http.ResponseWriter { return c.w }

// Codes of spec §3.6 that only the HTTP edge produces.
const (
	codeUnauthorized         engine.Code = "unauthorized"
	codeNotFound             engine.Code = "not_found"
	codeMethodNotAllowed     engine.Code = "method_not_allowed"
	codeRequestTooLarge      engine.Code = "request_too_large"
	codeUnsupportedMediaType engine.Code = "unsupported_media_type"
	codeHeaderTooLarge       engine.Code = "request_header_too_large"
)

const (
	msgUnauthorized   = "missing or invalid API key"
	msgInternal       = "internal error"
	msgNotFound       = "no such endpoint"
	msgMethod         = "method not allowed on this endpoint; see the Allow header"
	msgTooLarge       = "request body must be at most 65536 bytes"
	msgMediaType      = "Content-Type must be application/json"
	msgReadBody       = "could not read the request body"
	msgHeaderTooLarge = "request headers must be at most 65536 bytes"
)

// statusOf maps an engine code to its HTTP status (spec §3.6); an unknown code is 500.
func statusOf(code engine.Code) int {
	switch code {
	case engine.CodeInvalidRequest, engine.CodeMissingLimit, engine.CodeUnknownAlgorithm,
		engine.CodeInvalidRule, engine.CodeInvalidLeaseID:
		return http.StatusBadRequest
	case engine.CodeAlgorithmNotOnPlan, engine.CodeConcurrentNotOnPlan, engine.CodeWebhookNotOnPlan:
		return http.StatusForbidden
	case engine.CodeKeyNotFound, engine.CodeWebhookNotFound:
		return http.StatusNotFound
	case engine.CodeWebhookURLRejected:
		return http.StatusUnprocessableEntity
	case engine.CodeHardCapExceeded:
		return http.StatusTooManyRequests
	case engine.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// engineError answers err, an error from the engine (or the body decoder). Only an
// *engine.Error's Message reaches the client, and never for a 500; causes go to the log.
func (a *API) engineError(c *call, err error) {
	var e *engine.Error
	if !errors.As(err, &e) {
		if c.span != nil {
			a.annotate(c, tracing.AttrErrorCode.String(string(engine.CodeInternal)))
		}
		c.err = err
		a.writeError(c, http.StatusInternalServerError, engine.CodeInternal, msgInternal)
		return
	}
	status := statusOf(e.Code)
	if c.span != nil { // recording: an unsampled request builds no attributes
		a.annotate(c, tracing.AttrErrorCode.String(string(e.Code)))
	}
	switch {
	case e.Code == engine.CodeHardCapExceeded:
		c.w.Header()["Retry-After"] = []string{strconv.FormatInt(max(1, e.RetryAfterSec), 10)}
	case e.Code == engine.CodeUnavailable:
		c.w.Header()["Retry-After"] = a.hdrRetry1
		c.err = err
	case status == http.StatusInternalServerError:
		c.err = err
		a.writeError(c, status, engine.CodeInternal, msgInternal)
		return
	}
	a.writeError(c, status, e.Code, e.Message)
}

// routingError answers 404 not_found, or 405 method_not_allowed with Allow.
func (a *API) routingError(c *call, status int, allow string) {
	c.route = unmatchedRoute
	if status == http.StatusMethodNotAllowed {
		c.w.Header().Set("Allow", allow)
		a.writeError(c, status, codeMethodNotAllowed, msgMethod)
		return
	}
	a.writeError(c, http.StatusNotFound, codeNotFound, msgNotFound)
}

// writeError writes the error body {"error": msg, "code": code}.
func (a *API) writeError(c *call, status int, code engine.Code, msg string) {
	b := append(c.out[:0], `{"error":`...)
	b, _ = jsontext.AppendQuote(b, msg) // invalid UTF-8 is replaced, never echoed raw
	b = append(b, `,"code":"`...)
	b = append(b, code...)
	b = append(b, `"}`...)
	c.out = b
	a.writeJSON(c, status, b)
}

// writeJSON sends a JSON response, with X-Request-Id unless the handler set it.
func (a *API) writeJSON(c *call, status int, body []byte) {
	h := c.w.Header()
	if _, ok := h[RequestIDHeader]; !ok {
		h[RequestIDHeader] = []string{a.requestID(c)}
	}
	h["Content-Type"] = a.hdrJSON
	c.WriteHeader(status)
	_, _ = c.w.Write(body) // a failed write is the client's disconnect; nothing to do
}

// readBody applies the size and media-type checks (413, 415) and reads the body into
// c.body. A route with an optional body accepts an empty one whatever its Content-Type.
func (a *API) readBody(c *call, required bool) bool {
	r := c.r
	if r.ContentLength > MaxBodyBytes {
		a.tooLarge(c)
		return false
	}
	c.body.Reset()
	if r.ContentLength != 0 {
		body := r.Body
		if r.ContentLength < 0 { // chunked: the length is only known by reading
			body = http.MaxBytesReader(c.w, r.Body, MaxBodyBytes)
		}
		if _, err := c.body.ReadFrom(body); err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				a.tooLarge(c)
				return false
			}
			a.writeError(c, http.StatusBadRequest, engine.CodeInvalidRequest, msgReadBody)
			return false
		}
	}
	if (required || c.body.Len() > 0) && !jsonMediaType(r.Header["Content-Type"]) {
		a.writeError(c, http.StatusUnsupportedMediaType, codeUnsupportedMediaType, msgMediaType)
		return false
	}
	return true
}

func (a *API) tooLarge(c *call) {
	// Close the connection rather than read the rest of an oversized body.
	c.w.Header().Set("Connection", "close")
	a.writeError(c, http.StatusRequestEntityTooLarge, codeRequestTooLarge, msgTooLarge)
}

// jsonMediaType reports whether a Content-Type is application/json, parameters allowed;
// a missing or empty one is read as JSON (spec §3.2).
func jsonMediaType(v []string) bool {
	if len(v) == 0 {
		return true
	}
	s := v[0]
	if i := strings.IndexByte(s, ';'); i >= 0 {
		s = s[:i]
	}
	s = strings.Trim(s, " \t")
	return s == "" || strings.EqualFold(s, "application/json")
}
