"""The blocking clients: one method per /v1 operation, bounded retries of the calls that are
safe to repeat, errors by code, and leases renewed in the background and always released."""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional, Tuple, Union

from ._errors import LeaseDenied, LeashError, error_for
from ._types import (Account, AccountPage, AccountUsage, AuditPage, CreateAccountRequest,
                     DeleteResult, IssueKeyRequest, IssuedKey, KeyList, LeaseDecision, LeaseList,
                     LeaseRequest, LimitRequest, LimitResult, NamespaceList, Override, OwnAccount,
                     ReleaseResult, RenewRequest, RenewResult, Rule, RuleList, RuleRequest, Stats,
                     UpdateAccountRequest, Webhook, WebhookRequest, WebhookTestResult,
                     WebhookWithSecret, decode, encode)

# The operations of docs/openapi.yaml, by operationId: method, path, and whether a call may be
# repeated after a 503 or no answer (a spend or an issued key never is).
OPERATIONS: Dict[str, Tuple[str, str, bool]] = {
    "checkLimit": ("POST", "/v1/limit", False),
    "resetLimit": ("POST", "/v1/limit/reset", True),
    "acquireLease": ("POST", "/v1/leases", False),
    "releaseLease": ("DELETE", "/v1/leases/{lease_id}", True),
    "renewLease": ("POST", "/v1/leases/{lease_id}/renew", False),
    "listLeases": ("GET", "/v1/namespaces/{ns}/leases", True),
    "listRules": ("GET", "/v1/namespaces/{ns}/rules", True),
    "putRule": ("POST", "/v1/namespaces/{ns}/rules", False),
    "deleteRule": ("DELETE", "/v1/namespaces/{ns}/rules/{kind}", True),
    "namespaceStats": ("GET", "/v1/namespaces/{ns}/stats", True),
    "getWebhook": ("GET", "/v1/webhook", True),
    "putWebhook": ("PUT", "/v1/webhook", False),
    "deleteWebhook": ("DELETE", "/v1/webhook", True),
    "testWebhook": ("POST", "/v1/webhook/test", False),
    "getOwnAccount": ("GET", "/v1/account", True),
    "getUsage": ("GET", "/v1/usage", True),
    "listNamespaces": ("GET", "/v1/namespaces", True),
    "listOwnKeys": ("GET", "/v1/keys", True),
    "issueOwnKey": ("POST", "/v1/keys", False),
    "revokeOwnKey": ("DELETE", "/v1/keys/{key_id}", True),
    "createAccount": ("POST", "/v1/admin/accounts", False),
    "listAccounts": ("GET", "/v1/admin/accounts", True),
    "getAccount": ("GET", "/v1/admin/accounts/{id}", True),
    "updateAccount": ("PATCH", "/v1/admin/accounts/{id}", True),
    "deleteAccount": ("DELETE", "/v1/admin/accounts/{id}", True),
    "issueAccountKey": ("POST", "/v1/admin/accounts/{id}/keys", False),
    "listAccountKeys": ("GET", "/v1/admin/accounts/{id}/keys", True),
    "revokeAccountKey": ("DELETE", "/v1/admin/accounts/{id}/keys/{key_id}", True),
    "getAccountUsage": ("GET", "/v1/admin/accounts/{id}/usage", True),
    "listAudit": ("GET", "/v1/admin/audit", True),
    "listOwnAudit": ("GET", "/v1/audit", True),
}


class _Transport:
    """Sends operations: timeouts, the bearer key, retries, error answers as exceptions."""

    def __init__(self, url: str, api_key: Optional[str], timeout: float, max_retries: int,
                 retry_backoff: float, max_retry_wait: float) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"leash: the url must be http(s)://host[:port], not {url!r}")
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.retry_backoff = retry_backoff
        self.max_retry_wait = max_retry_wait

    def call(self, op: str, params: Optional[Dict[str, str]] = None,
             query: Optional[Dict[str, Any]] = None, body: Any = None,
             timeout: Optional[float] = None) -> Tuple[int, Any]:
        method, path, safe = OPERATIONS[op]
        for k, v in (params or {}).items():
            path = path.replace("{" + k + "}", urllib.parse.quote(v, safe=""))
        q = {k: v for k, v in (query or {}).items() if v is not None}
        url = self.url + path + ("?" + urllib.parse.urlencode(q) if q else "")
        headers = {"Accept": "application/json"}
        if self.api_key is not None:
            headers["Authorization"] = "Bearer " + self.api_key
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(encode(body)).encode()
        retries = self.max_retries if safe else 0
        backoff = self.retry_backoff
        attempt = 0
        while True:
            err = self._attempt(op, method, url, headers, data, timeout or self.timeout)
            if not isinstance(err, LeashError):
                return err
            if attempt >= retries or (err.status != 503 and err.status != 0):
                raise err
            wait = err.retry_after if err.retry_after is not None else backoff * random.uniform(0.8, 1.2)
            if wait > self.max_retry_wait:
                raise err
            time.sleep(wait)
            backoff *= 2
            attempt += 1

    def _attempt(self, op: str, method: str, url: str, headers: Dict[str, str],
                 data: Optional[bytes], timeout: float) -> Union[Tuple[int, Any], LeashError]:
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                raw = res.read()
                return res.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            code, message = "", f"HTTP {e.code}"
            try:
                b = json.loads(raw)
                code, message = str(b.get("code", "")), str(b.get("error", message))
            except (ValueError, AttributeError):
                pass
            ra = e.headers.get("Retry-After")
            retry_after = float(ra) if ra and ra.strip().isdigit() else None
            return error_for(op, e.code, code, message, retry_after, e.headers.get("X-Request-Id"))
        except (urllib.error.URLError, OSError, ValueError) as e:
            return error_for(op, 0, "unavailable", f"no answer: {e}")


class _Base:
    def __init__(self, url: str = "http://localhost:8080", api_key: Optional[str] = None, *,
                 timeout: float = 10.0, max_retries: int = 2, retry_backoff: float = 0.1,
                 max_retry_wait: float = 5.0) -> None:
        self._t = _Transport(url, api_key, timeout, max_retries, retry_backoff, max_retry_wait)


class Client(_Base):
    """A client of an account's routes: ``leash.Client(url, api_key)``.

    ``timeout`` bounds each attempt (seconds); calls that are safe to repeat (reads, deletes,
    resets) are retried up to ``max_retries`` times after a 503 or no answer, waiting the
    answer's Retry-After (else ``retry_backoff``, doubling); a longer wait than
    ``max_retry_wait`` ends the retries. A check, an acquisition, a renewal and every write are
    never retried: a repeated spend could count twice.
    """

    def limit(self, namespace: str, key: str, *, algorithm: Optional[str] = None,
              limit: Optional[int] = None, window_ms: Optional[int] = None,
              cost: Optional[int] = None, overdraft: Optional[bool] = None,
              timeout: Optional[float] = None) -> LimitResult:
        """Checks (and spends) a rate limit: POST /v1/limit. A denial is ``allowed=False``."""
        body = LimitRequest(namespace, key, algorithm, limit, window_ms, cost, overdraft)
        return decode(LimitResult, self._t.call("checkLimit", body=body, timeout=timeout)[1])

    def reset(self, namespace: str, key: str, *, algorithm: Optional[str] = None,
              limit: Optional[int] = None, window_ms: Optional[int] = None,
              cost: Optional[int] = None, overdraft: Optional[bool] = None) -> bool:
        """Clears one counter: POST /v1/limit/reset; False when it held no state."""
        body = LimitRequest(namespace, key, algorithm, limit, window_ms, cost, overdraft)
        try:
            self._t.call("resetLimit", body=body)
            return True
        except LeashError as e:
            if e.code == "key_not_found":
                return False
            raise

    def acquire(self, namespace: str, key: str, *, limit: Optional[int] = None,
                window_ms: Optional[int] = None) -> LeaseDecision:
        """Acquires a concurrency lease: POST /v1/leases. A denial is ``allowed=False``."""
        body = LeaseRequest(namespace, key, limit, window_ms)
        return decode(LeaseDecision, self._t.call("acquireLease", body=body)[1])

    def release(self, lease_id: str) -> ReleaseResult:
        """Releases a lease: DELETE /v1/leases/{id}; idempotent."""
        return decode(ReleaseResult, self._t.call("releaseLease", {"lease_id": lease_id})[1])

    def renew(self, lease_id: str, *, window_ms: Optional[int] = None,
              timeout: Optional[float] = None) -> RenewResult:
        """Renews a held lease: POST /v1/leases/{id}/renew; ``renewed=False`` once it is gone."""
        body = RenewRequest(window_ms) if window_ms is not None else None
        return decode(RenewResult, self._t.call("renewLease", {"lease_id": lease_id}, body=body,
                                                timeout=timeout)[1])

    def lease(self, namespace: str, key: str, *, limit: Optional[int] = None,
              window_ms: Optional[int] = None) -> "Lease":
        """A lease to hold in a ``with`` block: acquired on entry (LeaseDenied when every slot
        is held), renewed in a background thread every third of its TTL, released on exit
        whether the block returns or raises."""
        return Lease(self, namespace, key, limit, window_ms)

    def rules(self, namespace: str) -> RuleList:
        """The namespace's rules: GET /v1/namespaces/{ns}/rules."""
        return decode(RuleList, self._t.call("listRules", {"ns": namespace})[1])

    def set_rule(self, namespace: str, *, algorithm: str, limit: int, window_ms: int,
                 name: Optional[str] = None, overrides: Optional[List[Override]] = None
                 ) -> Tuple[Rule, bool]:
        """Writes a rule: POST /v1/namespaces/{ns}/rules; the rule, and True when it was new."""
        body = RuleRequest(algorithm, limit, window_ms, name, None, overrides)
        status, obj = self._t.call("putRule", {"ns": namespace}, body=body)
        return decode(Rule, obj), status == 201

    def delete_rule(self, namespace: str, kind: str) -> DeleteResult:
        """Deletes a rule: DELETE /v1/namespaces/{ns}/rules/{kind} (rate or concurrent)."""
        return decode(DeleteResult, self._t.call("deleteRule", {"ns": namespace, "kind": kind})[1])

    def stats(self, namespace: str) -> Stats:
        """A namespace's usage: GET /v1/namespaces/{ns}/stats."""
        return decode(Stats, self._t.call("namespaceStats", {"ns": namespace})[1])

    def leases(self, namespace: str, key: str) -> LeaseList:
        """The leases held on a key: GET /v1/namespaces/{ns}/leases?key=K."""
        return decode(LeaseList, self._t.call("listLeases", {"ns": namespace}, {"key": key})[1])

    def account(self) -> OwnAccount:
        """The account and its plan: GET /v1/account."""
        return decode(OwnAccount, self._t.call("getOwnAccount")[1])

    def usage(self) -> AccountUsage:
        """The account's usage: GET /v1/usage."""
        return decode(AccountUsage, self._t.call("getUsage")[1])

    def namespaces(self) -> NamespaceList:
        """The namespaces with a rule or recent usage: GET /v1/namespaces."""
        return decode(NamespaceList, self._t.call("listNamespaces")[1])

    def keys(self) -> KeyList:
        """The account's own keys: GET /v1/keys."""
        return decode(KeyList, self._t.call("listOwnKeys")[1])

    def create_key(self, *, name: Optional[str] = None) -> IssuedKey:
        """Issues a key to the account: POST /v1/keys (never retried)."""
        return decode(IssuedKey, self._t.call("issueOwnKey", body=IssueKeyRequest(name))[1])

    def revoke_key(self, key_id: str) -> None:
        """Revokes one of the account's keys: DELETE /v1/keys/{key_id}."""
        self._t.call("revokeOwnKey", {"key_id": key_id})

    def webhook(self) -> Optional[Webhook]:
        """The webhook: GET /v1/webhook; None when none is set."""
        try:
            return decode(Webhook, self._t.call("getWebhook")[1])
        except LeashError as e:
            if e.code == "webhook_not_found":
                return None
            raise

    def set_webhook(self, url: str) -> WebhookWithSecret:
        """Sets the webhook: PUT /v1/webhook; the secret is in this answer only."""
        return decode(WebhookWithSecret, self._t.call("putWebhook", body=WebhookRequest(url))[1])

    def delete_webhook(self) -> None:
        """Removes the webhook: DELETE /v1/webhook."""
        self._t.call("deleteWebhook")

    def test_webhook(self) -> WebhookTestResult:
        """Queues a webhook.test event: POST /v1/webhook/test."""
        return decode(WebhookTestResult, self._t.call("testWebhook")[1])

    def audit(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> AuditPage:
        """One page of the account's own audit log, newest first: GET /v1/audit (spec §15.10);
        pass a page's ``next_cursor`` as ``cursor`` for the next. Allowed while suspended."""
        return decode(AuditPage, self._t.call("listOwnAudit", query={"limit": limit, "cursor": cursor})[1])


class AdminClient(_Base):
    """A client of the operators' routes, /v1/admin: ``leash.AdminClient(url, operator_key)``."""

    def create_account(self, id: str, plan: str) -> Account:
        """Creates an account: POST /v1/admin/accounts."""
        return decode(Account, self._t.call("createAccount", body=CreateAccountRequest(id, plan))[1])

    def list_accounts(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> AccountPage:
        """One page of accounts: GET /v1/admin/accounts."""
        return decode(AccountPage, self._t.call("listAccounts", query={"limit": limit, "cursor": cursor})[1])

    def get_account(self, id: str) -> Account:
        """One account: GET /v1/admin/accounts/{id}."""
        return decode(Account, self._t.call("getAccount", {"id": id})[1])

    def update_account(self, id: str, *, plan: Optional[str] = None,
                       suspended: Optional[bool] = None) -> Account:
        """Re-plans, suspends or resumes an account: PATCH /v1/admin/accounts/{id}."""
        body = UpdateAccountRequest(plan, suspended)
        return decode(Account, self._t.call("updateAccount", {"id": id}, body=body)[1])

    def delete_account(self, id: str) -> None:
        """Deletes an account and its keys: DELETE /v1/admin/accounts/{id}."""
        self._t.call("deleteAccount", {"id": id})

    def issue_key(self, id: str, *, name: Optional[str] = None) -> IssuedKey:
        """Issues a key to an account: POST /v1/admin/accounts/{id}/keys (never retried)."""
        return decode(IssuedKey, self._t.call("issueAccountKey", {"id": id}, body=IssueKeyRequest(name))[1])

    def list_keys(self, id: str) -> KeyList:
        """An account's keys: GET /v1/admin/accounts/{id}/keys."""
        return decode(KeyList, self._t.call("listAccountKeys", {"id": id})[1])

    def revoke_key(self, id: str, key_id: str) -> None:
        """Revokes an account's key: DELETE /v1/admin/accounts/{id}/keys/{key_id}."""
        self._t.call("revokeAccountKey", {"id": id, "key_id": key_id})

    def usage(self, id: str) -> AccountUsage:
        """An account's usage: GET /v1/admin/accounts/{id}/usage."""
        return decode(AccountUsage, self._t.call("getAccountUsage", {"id": id})[1])

    def audit(self, *, account: Optional[str] = None, limit: Optional[int] = None,
              cursor: Optional[str] = None) -> AuditPage:
        """One page of the audit log, newest first: GET /v1/admin/audit (spec §15.10); every
        account's entries, or with ``account`` only that account's. Pass a page's
        ``next_cursor`` as ``cursor`` for the next."""
        query = {"account": account, "limit": limit, "cursor": cursor}
        return decode(AuditPage, self._t.call("listAudit", query=query)[1])


class Lease:
    """A lease held in a ``with`` block (``client.lease(...)``): ``id``, ``ttl_ms``, and
    ``lost``, a threading.Event set when the lease is no longer held (a renewal answered
    ``renewed=False``, or renewals failed until the TTL ran out)."""

    def __init__(self, client: Client, namespace: str, key: str, limit: Optional[int],
                 window_ms: Optional[int]) -> None:
        self._client = client
        self._args = (namespace, key, limit, window_ms)
        self.id = ""
        self.ttl_ms = 0
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> "Lease":
        ns, key, limit, window_ms = self._args
        d = self._client.acquire(ns, key, limit=limit, window_ms=window_ms)
        if not d.allowed or d.lease_id is None:
            raise LeaseDenied(d.active, d.limit, d.reset_ms)
        self.id, self.ttl_ms = d.lease_id, d.reset_ms
        self._thread = threading.Thread(target=self._keep_alive, name="leash-lease", daemon=True)
        self._thread.start()
        return self

    def _keep_alive(self) -> None:
        ttl = self.ttl_ms / 1000
        held_until = time.monotonic() + ttl
        wait = ttl / 3
        while not self._stop.wait(wait):
            try:
                r = self._client.renew(self.id, window_ms=self.ttl_ms, timeout=max(ttl / 2, 0.05))
            except LeashError:
                wait = ttl / 10
                if time.monotonic() + wait >= held_until:
                    self.lost.set()
                    return
                continue
            if not r.renewed:
                self.lost.set()
                return
            held_until, wait = time.monotonic() + ttl, ttl / 3

    def close(self) -> None:
        """Stops renewing and releases the lease; a second call does nothing more."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if not self.lost.is_set():
            try:
                self._client.release(self.id)
            except LeashError:
                pass  # the lease expires by its TTL

    def __exit__(self, *exc: Any) -> None:
        self.close()
