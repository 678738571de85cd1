package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/tracing"
	"github.com/leashd/leash/wire"
	"go.opentelemetry.io/otel/trace"
)

// exchange is one request's transport state, whatever its route: the writer the router
// and the handlers write through (it records the status for the metrics and the log),
// the request id, the route, the account, and the body and reply buffers. It is pooled
// by the API so that those buffers are reused. What a route decodes and answers lives
// in the route's own request and reply types. A route's handlers find it in the
// request's context (enter), never by asserting the ResponseWriter's type, so any
// middleware may wrap the writer they are given.
type exchange struct {
	a *API                // the API the exchange is pooled by, for its engine, settings and metrics
	w http.ResponseWriter // the server's writer, which the exchange wraps
	r *http.Request       // the request as the running handler was given it
	// rw is the writer the running handler was given: the exchange itself, or a
	// middleware's wrapper of it. Every answer is written through it.
	rw     http.ResponseWriter
	status int
	route  string
	routed bool   // false while the mux routes: what it writes then is its own 404 or 405
	muxErr int    // the status the mux itself answered (404 or 405), to be answered in JSON
	id     string // the request id, or "" until a generated one is needed
	idSeq  uint64 // the sequence number of a generated id
	acct   *engine.Account
	op     *engine.Operator // on an operator route
	keyID  string           // the id of the account key the request was made with
	// clientAddr is the client's address once clientSet (exchange.client).
	clientAddr netip.Addr
	clientSet  bool
	code       engine.Code // the error code answered, for the refusal log
	err        error       // the cause of a 5xx, for the log only
	span       trace.Span  // the request's server span when it records; nil with tracing off or unsampled

	body bytes.Buffer // the request body
	out  bytes.Buffer // the reply body being built
}

// maxPooledBody is the largest buffer kept for reuse; an exchange that read or wrote a
// larger body drops its buffer so idle pooled exchanges stay small.
const maxPooledBody = 8 << 10

func (x *exchange) begin(w http.ResponseWriter, r *http.Request) {
	x.w, x.r, x.rw = w, r, x
	x.status, x.muxErr, x.routed, x.code = 0, 0, true, ""
	x.route = unmatchedRoute
	x.acct, x.op, x.err, x.keyID = nil, nil, nil, ""
	x.clientAddr, x.clientSet = netip.Addr{}, false
}

// end drops the references the exchange holds so a pooled one pins nothing.
func (x *exchange) end() {
	x.w, x.r, x.rw, x.acct, x.op, x.err, x.id, x.idSeq, x.span = nil, nil, nil, nil, nil, nil, "", 0, nil
	for _, b := range []*bytes.Buffer{&x.body, &x.out} {
		if b.Cap() > maxPooledBody {
			*b = bytes.Buffer{}
		} else {
			b.Reset()
		}
	}
}

// Header returns the response headers.
func (x *exchange) Header() http.Header { return x.w.Header() }

// WriteHeader sends the status line and headers, recording the status. A status the
// mux writes before any route runs is its own 404 or 405, answered afterwards in JSON
// by routed.
func (x *exchange) WriteHeader(code int) {
	if !x.routed {
		if x.muxErr == 0 {
			x.muxErr = code
		}
		return
	}
	if x.status == 0 {
		x.status = code
	}
	x.w.WriteHeader(code)
}

// Write writes body bytes (status 200 if none was sent).
func (x *exchange) Write(b []byte) (int, error) {
	if !x.routed { // the mux's plain-text error body
		return len(b), nil
	}
	if x.status == 0 {
		x.status = http.StatusOK
	}
	return x.w.Write(b)
}

// Unwrap gives http.ResponseController the underlying writer.
func (x *exchange) Unwrap() http.ResponseWriter { return x.w }

// Codes of spec §3.6 that only the HTTP edge produces.
const (
	codeUnauthorized         engine.Code = "unauthorized"
	codeNotFound             engine.Code = "not_found"
	codeMethodNotAllowed     engine.Code = "method_not_allowed"
	codeRequestTooLarge      engine.Code = "request_too_large"
	codeUnsupportedMediaType engine.Code = "unsupported_media_type"
	codeHeaderTooLarge       engine.Code = "request_header_too_large"
	codeOperatorKeyRequired  engine.Code = "operator_key_required"
	codeAccountKeyRequired   engine.Code = "account_key_required"
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

	msgOperatorKeyRequired = "this endpoint needs an operator key, not an account's API key"
	msgAccountKeyRequired  = "this endpoint needs an account's API key, not an operator key"
	msgTooManyAuthFailures = "too many failed authentications from this address; retry later"
)

// statusOf maps an engine code to its HTTP status (spec §3.6); an unknown code is 500.
func statusOf(code engine.Code) int {
	switch code {
	case engine.CodeInvalidRequest, engine.CodeMissingLimit, engine.CodeUnknownAlgorithm,
		engine.CodeInvalidRule, engine.CodeInvalidLeaseID:
		return http.StatusBadRequest
	case engine.CodeAlgorithmNotOnPlan, engine.CodeConcurrentNotOnPlan, engine.CodeWebhookNotOnPlan, engine.CodeAccountSuspended:
		return http.StatusForbidden
	case engine.CodeKeyNotFound, engine.CodeWebhookNotFound, engine.CodeAccountNotFound, engine.CodeAPIKeyNotFound:
		return http.StatusNotFound
	case engine.CodeAccountExists, engine.CodeConfigReadOnly, engine.CodeTooManyKeys:
		return http.StatusConflict
	case engine.CodeUnknownPlan:
		return http.StatusBadRequest
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
func (x *exchange) engineError(err error) {
	var e *engine.Error
	if !errors.As(err, &e) {
		if x.span != nil {
			x.annotate(tracing.AttrErrorCode.String(string(engine.CodeInternal)))
		}
		x.err = err
		x.writeError(http.StatusInternalServerError, engine.CodeInternal, msgInternal)
		return
	}
	status := statusOf(e.Code)
	if x.span != nil { // recording: an unsampled request builds no attributes
		x.annotate(tracing.AttrErrorCode.String(string(e.Code)))
	}
	switch {
	case e.Code == engine.CodeHardCapExceeded:
		x.rw.Header()["Retry-After"] = []string{strconv.FormatInt(max(1, e.RetryAfterSec), 10)}
	case e.Code == engine.CodeUnavailable:
		x.rw.Header()["Retry-After"] = x.a.hdrRetry1
		x.err = err
	case status == http.StatusInternalServerError:
		x.err = err
		x.writeError(status, engine.CodeInternal, msgInternal)
		return
	}
	x.writeError(status, e.Code, e.Message)
}

// routed finishes a request no route served: the mux answered 404, or 405 with the
// Allow header, and the API answers the same in JSON (spec §3.5).
func (a *API) routed(x *exchange) {
	if x.muxErr == 0 {
		return
	}
	x.routed = true
	h := x.rw.Header()
	delete(h, "Location")
	if x.muxErr == http.StatusMethodNotAllowed {
		x.writeError(http.StatusMethodNotAllowed, codeMethodNotAllowed, msgMethod)
		return
	}
	delete(h, "Allow")
	x.notFound()
}

// notFound answers 404 not_found.
func (x *exchange) notFound() {
	x.route = unmatchedRoute
	x.writeError(http.StatusNotFound, codeNotFound, msgNotFound)
}

// writeError writes the error body {"error": msg, "code": code}.
func (x *exchange) writeError(status int, code engine.Code, msg string) {
	x.code = code
	x.reply(status, &wire.Error{Error: msg, Code: string(code)})
}

// encodeOptions are the options of every reply: a string that is not valid UTF-8 is
// written with replacement characters, never raw (and never fails the reply).
var encodeOptions = json.JoinOptions(jsontext.AllowInvalidUTF8(true))

// reply writes v, a route's reply type, as the JSON response: the one encoder of every
// route but POST /v1/limit, whose reply is appendLimitReply's (docs/performance.md).
func (x *exchange) reply(status int, v any) {
	x.out.Reset()
	if err := json.MarshalWrite(&x.out, v, encodeOptions); err != nil {
		// The reply types always encode; a failure is a bug, answered as one.
		x.err = err
		x.out.Reset()
		x.out.WriteString(`{"error":"` + msgInternal + `","code":"` + string(engine.CodeInternal) + `"}`)
		status, x.code = http.StatusInternalServerError, engine.CodeInternal
	}
	x.writeJSON(status, x.out.Bytes())
}

// writeJSON sends a JSON response, with X-Request-Id unless the handler set it.
func (x *exchange) writeJSON(status int, body []byte) {
	h := x.rw.Header()
	if _, ok := h[RequestIDHeader]; !ok {
		h[RequestIDHeader] = []string{x.requestID()}
	}
	h["Content-Type"] = x.a.hdrJSON
	x.rw.WriteHeader(status)
	_, _ = x.rw.Write(body) // a failed write is the client's disconnect; nothing to do
}

// readBody applies the size and media-type checks (413, 415) and reads the body into
// x.body. A route with an optional body accepts an empty one whatever its Content-Type.
func (x *exchange) readBody(required bool) bool {
	r := x.r
	if r.ContentLength > MaxBodyBytes {
		x.tooLarge()
		return false
	}
	x.body.Reset()
	if r.ContentLength != 0 {
		body := r.Body
		if r.ContentLength < 0 { // chunked: the length is only known by reading
			body = http.MaxBytesReader(x.rw, r.Body, MaxBodyBytes)
		}
		if _, err := x.body.ReadFrom(body); err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				x.tooLarge()
				return false
			}
			x.writeError(http.StatusBadRequest, engine.CodeInvalidRequest, msgReadBody)
			return false
		}
	}
	if (required || x.body.Len() > 0) && !jsonMediaType(r.Header["Content-Type"]) {
		x.writeError(http.StatusUnsupportedMediaType, codeUnsupportedMediaType, msgMediaType)
		return false
	}
	return true
}

func (x *exchange) tooLarge() {
	// Close the connection rather than read the rest of an oversized body.
	x.rw.Header().Set("Connection", "close")
	x.writeError(http.StatusRequestEntityTooLarge, codeRequestTooLarge, msgTooLarge)
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
