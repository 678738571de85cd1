"""Errors: every error answer is a LeashError, of the class of its code (spec §3.6)."""

from __future__ import annotations

from typing import Dict, Optional, Type

__all__ = ['LeashError', 'InvalidRequest', 'Unauthorized', 'Forbidden', 'NotFound', 'Conflict',
           'TooManyRequests', 'Unavailable', 'MissingLimit', 'UnknownAlgorithm', 'InvalidRule',
           'InvalidLeaseId', 'UnknownPlan', 'AlgorithmNotOnPlan', 'ConcurrentNotOnPlan',
           'WebhookNotOnPlan', 'AccountSuspended', 'OperatorKeyRequired', 'AccountKeyRequired',
           'KeyNotFound', 'WebhookNotFound', 'AccountNotFound', 'ApiKeyNotFound',
           'AccountExists', 'ConfigReadOnly', 'TooManyKeys', 'WebhookUrlRejected',
           'HardCapExceeded', 'TooManyAuthFailures', 'LeaseDenied', 'error_for', 'BY_CODE',
           'BY_STATUS']


class LeashError(Exception):
    """An error answer from Leash, or no answer at all (status 0, code "unavailable").

    ``status`` is the HTTP status, ``code`` the spec's stable code ("" when the answer had no
    Leash error body), ``message`` the text for people, ``retry_after`` the answer's
    Retry-After in seconds (None when absent), ``request_id`` its X-Request-Id and
    ``operation`` the operationId of the call.
    """

    def __init__(self, operation: str, status: int, code: str, message: str,
                 retry_after: Optional[float] = None, request_id: Optional[str] = None) -> None:
        super().__init__(f"leash: {operation}: {status or 'no answer'} {code}: {message}")
        self.operation = operation
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.request_id = request_id

    @property
    def unavailable(self) -> bool:
        """True for a 503, a 500 and a call with no answer: worth trying again later."""
        return self.status in (0, 500, 503)


class InvalidRequest(LeashError):
    """400: a malformed body or field, or a limit that resolves to nothing."""


class Unauthorized(LeashError):
    """401 unauthorized: a missing or unknown API key."""


class Forbidden(LeashError):
    """403: not on the plan, suspended, or the wrong kind of key."""


class NotFound(LeashError):
    """404: no such counter, webhook, account, key or route."""


class Conflict(LeashError):
    """409: the account exists, is read-only, or holds too many keys."""


class TooManyRequests(LeashError):
    """429: the hard cap is reached, or this address failed authentication too often."""


class Unavailable(LeashError):
    """503 (the store did not answer), 500, or no answer at all."""


# The classes of the spec's codes, each under its status's class.
class MissingLimit(InvalidRequest):
    """400 missing_limit."""


class UnknownAlgorithm(InvalidRequest):
    """400 unknown_algorithm."""


class InvalidRule(InvalidRequest):
    """400 invalid_rule."""


class InvalidLeaseId(InvalidRequest):
    """400 invalid_lease_id."""


class UnknownPlan(InvalidRequest):
    """400 unknown_plan."""


class AlgorithmNotOnPlan(Forbidden):
    """403 algorithm_not_on_plan."""


class ConcurrentNotOnPlan(Forbidden):
    """403 concurrent_not_on_plan."""


class WebhookNotOnPlan(Forbidden):
    """403 webhook_not_on_plan."""


class AccountSuspended(Forbidden):
    """403 account_suspended."""


class OperatorKeyRequired(Forbidden):
    """403 operator_key_required."""


class AccountKeyRequired(Forbidden):
    """403 account_key_required."""


class KeyNotFound(NotFound):
    """404 key_not_found."""


class WebhookNotFound(NotFound):
    """404 webhook_not_found."""


class AccountNotFound(NotFound):
    """404 account_not_found."""


class ApiKeyNotFound(NotFound):
    """404 api_key_not_found."""


class AccountExists(Conflict):
    """409 account_exists."""


class ConfigReadOnly(Conflict):
    """409 config_read_only."""


class TooManyKeys(Conflict):
    """409 too_many_keys."""


class WebhookUrlRejected(LeashError):
    """422 webhook_url_rejected."""


class HardCapExceeded(TooManyRequests):
    """429 hard_cap_exceeded."""


class TooManyAuthFailures(TooManyRequests):
    """429 too_many_auth_failures."""


BY_CODE: Dict[str, Type[LeashError]] = {
    "invalid_request": InvalidRequest, "missing_limit": MissingLimit,
    "unknown_algorithm": UnknownAlgorithm, "invalid_rule": InvalidRule,
    "invalid_lease_id": InvalidLeaseId, "unknown_plan": UnknownPlan,
    "unauthorized": Unauthorized,
    "algorithm_not_on_plan": AlgorithmNotOnPlan, "concurrent_not_on_plan": ConcurrentNotOnPlan,
    "webhook_not_on_plan": WebhookNotOnPlan, "account_suspended": AccountSuspended,
    "operator_key_required": OperatorKeyRequired, "account_key_required": AccountKeyRequired,
    "key_not_found": KeyNotFound, "webhook_not_found": WebhookNotFound,
    "account_not_found": AccountNotFound, "api_key_not_found": ApiKeyNotFound,
    "not_found": NotFound,
    "account_exists": AccountExists, "config_read_only": ConfigReadOnly,
    "too_many_keys": TooManyKeys, "webhook_url_rejected": WebhookUrlRejected,
    "hard_cap_exceeded": HardCapExceeded, "too_many_auth_failures": TooManyAuthFailures,
    "internal": Unavailable, "unavailable": Unavailable,
}

BY_STATUS: Dict[int, Type[LeashError]] = {
    400: InvalidRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    429: TooManyRequests, 500: Unavailable, 503: Unavailable, 0: Unavailable,
}


def error_for(operation: str, status: int, code: str, message: str,
              retry_after: Optional[float] = None, request_id: Optional[str] = None) -> LeashError:
    """The exception of an error answer: the class of its code, else of its status."""
    cls = BY_CODE.get(code) or BY_STATUS.get(status) or LeashError
    return cls(operation, status, code, message, retry_after, request_id)


class LeaseDenied(Exception):
    """``client.lease(...)`` found every slot held; ``reset_ms`` until the soonest ends."""

    def __init__(self, active: int, limit: int, reset_ms: int) -> None:
        super().__init__(f"leash: lease denied: {active} of {limit} held, next slot in {reset_ms} ms")
        self.active = active
        self.limit = limit
        self.reset_ms = reset_ms
