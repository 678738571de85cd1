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

// Error codes of the admin and account routes (spec §15.9).
const (
	CodeAccountSuspended Code = "account_suspended"
	CodeAccountExists    Code = "account_exists"
	CodeAccountNotFound  Code = "account_not_found"
	CodeAPIKeyNotFound   Code = "api_key_not_found"
	CodeConfigReadOnly   Code = "config_read_only"
	CodeTooManyKeys      Code = "too_many_keys"
	CodeUnknownPlan      Code = "unknown_plan"
)

// Webhook error codes of spec §3.6.
const (
	CodeWebhookNotOnPlan   Code = "webhook_not_on_plan"
	CodeWebhookNotFound    Code = "webhook_not_found"
	CodeWebhookURLRejected Code = "webhook_url_rejected"
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

// NewError returns an error with code and a message safe to show.
func NewError(code Code, msg string) *Error { return &Error{Code: code, Message: msg} }

// Invalid returns an invalid_request error with msg.
func Invalid(msg string) *Error { return NewError(CodeInvalidRequest, msg) }

// Unavailable wraps a store error; the cause is for logs only.
func Unavailable(cause error) *Error {
	return &Error{Code: CodeUnavailable, Message: "service temporarily unavailable", cause: cause}
}

// Internal wraps a failure that is the deployment's, not the caller's (a capability
// wired without the store it needs); the cause is for logs only.
func Internal(cause error) *Error {
	return &Error{Code: CodeInternal, Message: "internal error", cause: cause}
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
