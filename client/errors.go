package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The error codes of spec §3.6.
const (
	CodeInvalidRequest        = "invalid_request"
	CodeMissingLimit          = "missing_limit"
	CodeUnknownAlgorithm      = "unknown_algorithm"
	CodeInvalidRule           = "invalid_rule"
	CodeInvalidLeaseID        = "invalid_lease_id"
	CodeUnauthorized          = "unauthorized"
	CodeAlgorithmNotOnPlan    = "algorithm_not_on_plan"
	CodeConcurrentNotOnPlan   = "concurrent_not_on_plan"
	CodeWebhookNotOnPlan      = "webhook_not_on_plan"
	CodeKeyNotFound           = "key_not_found"
	CodeWebhookNotFound       = "webhook_not_found"
	CodeNotFound              = "not_found"
	CodeMethodNotAllowed      = "method_not_allowed"
	CodeRequestTooLarge       = "request_too_large"
	CodeUnsupportedMediaType  = "unsupported_media_type"
	CodeWebhookURLRejected    = "webhook_url_rejected"
	CodeHardCapExceeded       = "hard_cap_exceeded"
	CodeRequestHeaderTooLarge = "request_header_too_large"
	CodeInternal              = "internal"
	CodeUnavailable           = "unavailable"
	CodeAccountSuspended      = "account_suspended"
	CodeAccountExists         = "account_exists"
	CodeAccountNotFound       = "account_not_found"
	CodeAPIKeyNotFound        = "api_key_not_found"
	CodeConfigReadOnly        = "config_read_only"
	CodeTooManyKeys           = "too_many_keys"
	CodeUnknownPlan           = "unknown_plan"
	CodeOperatorKeyRequired   = "operator_key_required"
	CodeAccountKeyRequired    = "account_key_required"
	CodeTooManyAuthFailures   = "too_many_auth_failures"
)

// Error is an error answer from the service (spec §3.6).
type Error struct {
	// Op is the call, e.g. "POST /v1/limit".
	Op string
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the spec's stable code ("" when the answer had no Leash error body, e.g.
	// from a proxy in between).
	Code string
	// Message is the service's message, for people.
	Message string
	// RetryAfter is the Retry-After header (0 when absent).
	RetryAfter time.Duration
	// RequestID is the answer's X-Request-Id, also in the service's log.
	RequestID string
}

// Error implements error.
func (e *Error) Error() string {
	code := e.Code
	if code == "" {
		code = "http " + http.StatusText(e.StatusCode)
	}
	return fmt.Sprintf("leash: %s: %d %s: %s", e.Op, e.StatusCode, code, e.Message)
}

// IsCode reports whether err is (or wraps) an *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// IsUnavailable reports whether err means the service could not decide: a 503, a 5xx
// without a Leash body, or no answer at all (not the caller's own context ending).
func IsUnavailable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode == http.StatusServiceUnavailable || (e.StatusCode >= 500 && e.Code == "") ||
			e.Code == CodeInternal
	}
	return errors.Is(err, errTransport)
}

// ErrDenied is what a refused lease acquisition wraps (errors.Is); the error itself is a
// *DeniedError.
var ErrDenied = errors.New("leash: lease denied: every slot is held")

// DeniedError is a refused lease acquisition: every slot of the key is held.
type DeniedError struct {
	Namespace, Key string
	// Active is the number of leases held; Limit the resolved limit.
	Active, Limit int64
	// Reset is the time until the soonest-expiring lease ends.
	Reset time.Duration
}

// Error implements error.
func (e *DeniedError) Error() string {
	return fmt.Sprintf("leash: lease on %s/%s denied: %d of %d held, next slot in %s", e.Namespace, e.Key,
		e.Active, e.Limit, e.Reset)
}

// Is makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// IsDenied reports whether err is a refused lease acquisition.
func IsDenied(err error) bool { return errors.Is(err, ErrDenied) }
