"""The shapes of Leash's /v1 API (docs/openapi.yaml) as dataclasses. Field names are the
API's own; SCHEMAS maps each schema of the document to its dataclass, and the coverage test
checks it against clients/api.json, the document's summary."""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Dict, List, Optional, Type, TypeVar, Union

__all__ = ['LimitRequest', 'LimitResult', 'ResetResult', 'LeaseRequest', 'LeaseDecision',
           'ReleaseResult', 'RenewRequest', 'RenewResult', 'Override', 'RuleRequest', 'Rule',
           'RuleList', 'DeleteResult', 'DayStats', 'MonthStats', 'Stats', 'NamespaceUsage',
           'AccountUsage', 'NamespaceSummary', 'NamespaceList', 'HeldLease', 'LeaseList',
           'PlanLimits', 'OwnAccount', 'WebhookRequest', 'Webhook', 'WebhookWithSecret',
           'WebhookTestResult', 'Account', 'AccountPage', 'CreateAccountRequest',
           'UpdateAccountRequest', 'IssueKeyRequest', 'APIKey', 'IssuedKey', 'KeyList',
           'AuditActor', 'AuditEntry', 'AuditPage', 'ErrorBody', 'SCHEMAS', 'decode', 'encode']

T = TypeVar("T")


@dataclasses.dataclass
class LimitRequest:
    """POST /v1/limit and /v1/limit/reset; fields left None come from the namespace's rule."""
    namespace: str
    key: str
    algorithm: Optional[str] = None
    limit: Optional[int] = None
    window_ms: Optional[int] = None
    cost: Optional[int] = None
    overdraft: Optional[bool] = None


@dataclasses.dataclass
class LimitResult:
    """The verdict of a check; a denial is ``allowed=False``, not an error."""
    allowed: bool
    limit: int
    remaining: int
    reset_ms: int

    @property
    def retry_after(self) -> int:
        """The Retry-After Leash sends with a denial: reset_ms in whole seconds, at least 1."""
        return max(1, math.ceil(self.reset_ms / 1000))


@dataclasses.dataclass
class ResetResult:
    """POST /v1/limit/reset's answer (``client.reset`` returns it as a bool)."""
    reset: bool


@dataclasses.dataclass
class LeaseRequest:
    """POST /v1/leases: ``limit`` leases at most at once, each living ``window_ms``."""
    namespace: str
    key: str
    limit: Optional[int] = None
    window_ms: Optional[int] = None


@dataclasses.dataclass
class LeaseDecision:
    """An acquisition's answer; ``lease_id`` only when allowed."""
    allowed: bool
    active: int
    limit: int
    reset_ms: int
    lease_id: Optional[str] = None


@dataclasses.dataclass
class ReleaseResult:
    """DELETE /v1/leases/{id}."""
    released: bool
    active: int


@dataclasses.dataclass
class RenewRequest:
    """POST /v1/leases/{id}/renew's body: a new TTL from now, default the lease's own."""
    window_ms: Optional[int] = None


@dataclasses.dataclass
class RenewResult:
    """POST /v1/leases/{id}/renew; ``renewed=False`` once the lease is gone."""
    renewed: bool
    active: int
    reset_ms: int


@dataclasses.dataclass
class Override:
    """A key's own limit (and window) inside a rule (spec §6.7)."""
    key: str
    limit: int
    window_ms: Optional[int] = None


@dataclasses.dataclass
class RuleRequest:
    """POST /v1/namespaces/{ns}/rules."""
    algorithm: str
    limit: int
    window_ms: int
    name: Optional[str] = None
    namespace: Optional[str] = None
    overrides: Optional[List[Override]] = None


@dataclasses.dataclass
class Rule:
    """A namespace's rule."""
    namespace: str
    algorithm: str
    limit: int
    window_ms: int
    name: Optional[str] = None
    overrides: Optional[List[Override]] = None


@dataclasses.dataclass
class RuleList:
    """GET /v1/namespaces/{ns}/rules."""
    namespace: str
    rules: List[Rule]


@dataclasses.dataclass
class DeleteResult:
    """DELETE /v1/namespaces/{ns}/rules/{kind}."""
    deleted: bool


@dataclasses.dataclass
class DayStats:
    """One UTC day of usage."""
    day: str
    total: int
    blocked: int


@dataclasses.dataclass
class MonthStats:
    """The account's UTC month; ``hard_cap`` None for none."""
    month: str
    total: int
    quota: int
    over_quota: bool
    hard_cap: Optional[int]


@dataclasses.dataclass
class Stats:
    """GET /v1/namespaces/{ns}/stats."""
    namespace: str
    total: int
    blocked: int
    days: List[DayStats]
    month: MonthStats


@dataclasses.dataclass
class NamespaceUsage:
    """One namespace's totals over the last 30 UTC days."""
    namespace: str
    total: int
    blocked: int


@dataclasses.dataclass
class AccountUsage:
    """GET /v1/usage and GET /v1/admin/accounts/{id}/usage."""
    month: MonthStats
    namespaces: List[NamespaceUsage]
    days: List[DayStats]


@dataclasses.dataclass
class NamespaceSummary:
    """One namespace of GET /v1/namespaces."""
    namespace: str
    rules: int
    total: int
    blocked: int


@dataclasses.dataclass
class NamespaceList:
    """GET /v1/namespaces."""
    namespaces: List[NamespaceSummary]


@dataclasses.dataclass
class HeldLease:
    """One lease held on a key."""
    lease_id: str
    expires_in_ms: int


@dataclasses.dataclass
class LeaseList:
    """GET /v1/namespaces/{ns}/leases?key=K; ``limit`` None without a concurrent rule."""
    namespace: str
    key: str
    active: int
    limit: Optional[int]
    leases: List[HeldLease]


@dataclasses.dataclass
class PlanLimits:
    """What the account's plan allows."""
    algorithms: List[str]
    concurrent_limit: bool
    webhooks: bool
    monthly_quota: int
    hard_cap: Optional[int]


@dataclasses.dataclass
class OwnAccount:
    """GET /v1/account. ``suspended`` is True while an operator has the account suspended
    (spec §15.6): its decisions, leases, rule writes, webhook writes and tests and the keys it
    would issue itself raise AccountSuspended."""
    id: str
    plan: str
    suspended: bool
    plan_limits: PlanLimits


@dataclasses.dataclass
class WebhookRequest:
    """PUT /v1/webhook's body."""
    url: str


@dataclasses.dataclass
class Webhook:
    """GET /v1/webhook."""
    url: str


@dataclasses.dataclass
class WebhookWithSecret:
    """PUT /v1/webhook's answer; the secret is shown only here."""
    url: str
    secret: str


@dataclasses.dataclass
class WebhookTestResult:
    """POST /v1/webhook/test."""
    event_id: str


@dataclasses.dataclass
class Account:
    """An account as operators see it; ``created_at`` None for a configured one."""
    id: str
    plan: str
    source: str
    suspended: bool
    created_at: Optional[str]
    keys: int


@dataclasses.dataclass
class AccountPage:
    """One page of GET /v1/admin/accounts; ``next_cursor`` None on the last."""
    accounts: List[Account]
    next_cursor: Optional[str]


@dataclasses.dataclass
class CreateAccountRequest:
    """POST /v1/admin/accounts."""
    id: str
    plan: str


@dataclasses.dataclass
class UpdateAccountRequest:
    """PATCH /v1/admin/accounts/{id}; None members are not sent."""
    plan: Optional[str] = None
    suspended: Optional[bool] = None


@dataclasses.dataclass
class IssueKeyRequest:
    """POST /v1/keys and /v1/admin/accounts/{id}/keys."""
    name: Optional[str] = None


@dataclasses.dataclass
class APIKey:
    """A key as the lists show it (never the key itself)."""
    id: str
    name: str
    prefix: str
    created_at: Optional[str]
    source: str


@dataclasses.dataclass
class IssuedKey:
    """A key just issued; ``key`` is shown only here."""
    id: str
    name: str
    key: str
    prefix: str
    created_at: str


@dataclasses.dataclass
class KeyList:
    """GET /v1/keys and /v1/admin/accounts/{id}/keys."""
    keys: List[APIKey]


@dataclasses.dataclass
class AuditActor:
    """Who made a change: ``type`` "operator" (``id`` the operator's id) or "account" (``id``
    the account's, ``key_id`` the key it called with: ``key_…`` or ``config-N``)."""
    type: str
    id: str
    key_id: Optional[str] = None


@dataclasses.dataclass
class AuditEntry:
    """One change of the audit log (spec §15.10): ``time`` RFC 3339 in UTC by the store's
    clock; ``details`` the change's facts as strings (``plan``, ``name``, ``window_ms``...)."""
    id: str
    time: str
    actor: AuditActor
    action: str
    account: str
    target: str
    details: Dict[str, str]
    client: str
    request_id: str


@dataclasses.dataclass
class AuditPage:
    """One page of GET /v1/audit or /v1/admin/audit, newest first; ``next_cursor`` None on
    the last."""
    entries: List[AuditEntry]
    next_cursor: Optional[str]


@dataclasses.dataclass
class ErrorBody:
    """The body of every error answer."""
    error: str
    code: str


# Each schema of docs/openapi.yaml and the dataclass that carries it.
SCHEMAS: Dict[str, type] = {
    "APIKey": APIKey, "Account": Account, "AccountPage": AccountPage,
    "AccountUsage": AccountUsage, "AccountUsage.namespaces": NamespaceUsage,
    "AuditEntry": AuditEntry, "AuditEntry.actor": AuditActor, "AuditPage": AuditPage,
    "CreateAccountRequest": CreateAccountRequest, "DayStats": DayStats,
    "DeleteResult": DeleteResult, "Error": ErrorBody, "IssueKeyRequest": IssueKeyRequest,
    "IssuedKey": IssuedKey, "KeyList": KeyList, "LeaseDecision": LeaseDecision,
    "LeaseList": LeaseList, "LeaseList.leases": HeldLease, "LeaseRequest": LeaseRequest,
    "LimitRequest": LimitRequest, "LimitResult": LimitResult, "MonthStats": MonthStats,
    "NamespaceList": NamespaceList, "NamespaceList.namespaces": NamespaceSummary,
    "Override": Override, "OverrideRequest": Override, "OwnAccount": OwnAccount,
    "OwnAccount.plan_limits": PlanLimits, "ReleaseResult": ReleaseResult,
    "RenewRequest": RenewRequest, "RenewResult": RenewResult, "ResetResult": ResetResult,
    "Rule": Rule, "RuleList": RuleList, "RuleRequest": RuleRequest, "Stats": Stats,
    "UpdateAccountRequest": UpdateAccountRequest, "Webhook": Webhook,
    "WebhookRequest": WebhookRequest, "WebhookTestResult": WebhookTestResult,
    "WebhookWithSecret": WebhookWithSecret,
}


def decode(cls: Type[T], obj: Any) -> T:
    """The dataclass cls of a JSON object; members it does not know are left out."""
    hints = typing.get_type_hints(cls)
    kw = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in obj:
            kw[f.name] = _value(hints[f.name], obj[f.name])
    return cls(**kw)


def _value(tp: Any, v: Any) -> Any:
    if v is None:
        return None
    origin = typing.get_origin(tp)
    if origin is Union:
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _value(inner[0], v)
    if origin in (list, List):
        return [_value(typing.get_args(tp)[0], x) for x in v]
    if dataclasses.is_dataclass(tp):
        return decode(tp, v)  # type: ignore[arg-type]
    return v


def encode(obj: Any) -> Any:
    """The JSON value of a dataclass, its None members left out."""
    if dataclasses.is_dataclass(obj):
        return {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if getattr(obj, f.name) is not None}
    if isinstance(obj, list):
        return [encode(x) for x in obj]
    if isinstance(obj, dict):
        return {k: encode(v) for k, v in obj.items() if v is not None}
    return obj
