package engine

import "errors"

// Code is a stable machine-readable error code of spec §3.6.
type Code string

// The error codes of spec §3.6 that the engine produces.
const (
	CodeInvalidRequest      Code = "invalid_request"
	CodeMissingLimit        Code = "missing_limit"
	CodeUnknownAlgorithm    Code = "unknown_algorithm"
	CodeInvalidRule         Code = "invalid_rule"
	CodeInvalidLeaseID      Code = "invalid_lease_id"
	CodeAlgorithmNotOnPlan  Code = "algorithm_not_on_plan"
	CodeConcurrentNotOnPlan Code = "concurrent_not_on_plan"
	CodeKeyNotFound         Code = "key_not_found"
	CodeHardCapExceeded     Code = "hard_cap_exceeded"
	CodeUnavailable         Code = "unavailable"
	CodeInternal            Code = "internal"
)

// Error is a failure the edges report to the caller by its Code and Message. Message is
// safe to show: it never carries store or driver detail (that stays in the wrapped cause).
type Error struct {
	Code    Code
	Message string
	// RetryAfterSec is set for hard_cap_exceeded: seconds to the end of the UTC month.
	RetryAfterSec int64
	cause         error
}

func (e *Error) Error() string {
	if e.cause != nil {
		return string(e.Code) + ": " + e.Message + ": " + e.cause.Error()
	}
	return string(e.Code) + ": " + e.Message
}

// Unwrap returns the internal cause, if any.
func (e *Error) Unwrap() error { return e.cause }

func newError(code Code, msg string) *Error { return &Error{Code: code, Message: msg} }

// Invalid returns an invalid_request error with msg.
func Invalid(msg string) *Error { return newError(CodeInvalidRequest, msg) }

// unavailable wraps a store error; the cause is for logs only.
func unavailable(cause error) *Error {
	return &Error{Code: CodeUnavailable, Message: "service temporarily unavailable", cause: cause}
}

// ErrNoRoom is returned by a store that has no room for new state (spec §11.1).
var ErrNoRoom = errors.New("store is full")

// CodeOf returns err's Code: its own for an *Error, internal for anything else.
func CodeOf(err error) Code {
	if err == nil {
		return CodeInternal
	}
	if e, ok := err.(*Error); ok { // the common case, without errors.As's allocation
		return e.Code
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
