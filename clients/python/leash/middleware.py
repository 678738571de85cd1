"""WSGI and ASGI middleware: one rate-limit check per request (spec §13.3), for Flask,
Django and any WSGI app, and for FastAPI, Starlette and any ASGI app, without importing them.

Allowed: the request is served with RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset.
Denied: 429 with those, Retry-After and {"error": "rate limit exceeded", "code":
"rate_limited"}. Leash's own 429 hard_cap_exceeded is passed on with its Retry-After. Any
other failure calls on_error, then serves the request (fail open, the default) or, with
fail_closed, answers 503 {"error": "rate limiter unavailable", "code": "unavailable"}.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from ._async import AsyncClient
from ._client import Client
from ._errors import LeashError
from ._types import LimitResult

Headers = List[Tuple[str, str]]


def key_by_ip(request: Dict[str, Any]) -> Optional[str]:
    """Keys a request by its peer's address: a WSGI environ's REMOTE_ADDR or an ASGI scope's
    client. Behind a proxy, key by the header the proxy sets (key_by_header)."""
    if "REMOTE_ADDR" in request:
        return request["REMOTE_ADDR"] or None
    client = request.get("client")
    return client[0] if client else None


def key_by_header(name: str) -> Callable[[Dict[str, Any]], Optional[str]]:
    """Keys a request by one header's value (None when absent: the request is unchecked)."""
    environ_name = "HTTP_" + name.upper().replace("-", "_")
    raw = name.lower().encode("latin-1")

    def key(request: Dict[str, Any]) -> Optional[str]:
        if "headers" in request and "REMOTE_ADDR" not in request:
            for k, v in request["headers"]:
                if k.lower() == raw:
                    return v.decode("latin-1")
            return None
        return request.get(environ_name)

    return key


class _Policy:
    def __init__(self, namespace: str, key: Callable[[Dict[str, Any]], Optional[str]],
                 algorithm: Optional[str], limit: Optional[int], window_ms: Optional[int],
                 cost: Optional[int], timeout: float, fail_closed: bool,
                 on_error: Optional[Callable[[Dict[str, Any], BaseException], None]]) -> None:
        self.namespace, self.key = namespace, key
        self.args = {"algorithm": algorithm, "limit": limit, "window_ms": window_ms, "cost": cost,
                     "timeout": timeout}
        self.fail_closed, self.on_error = fail_closed, on_error

    def allowed(self, r: LimitResult) -> Tuple[bool, Headers]:
        h = [("RateLimit-Limit", str(r.limit)), ("RateLimit-Remaining", str(r.remaining)),
             ("RateLimit-Reset", str(math.ceil(r.reset_ms / 1000)))]
        if r.allowed:
            return True, h
        h.append(("Retry-After", str(r.retry_after)))
        return False, h

    def failed(self, request: Dict[str, Any], e: BaseException) -> Optional[Tuple[str, Headers, bytes]]:
        """The answer to send when the check failed, or None to serve the request."""
        if isinstance(e, LeashError) and e.code == "hard_cap_exceeded":
            h = [("Retry-After", str(math.ceil(e.retry_after)))] if e.retry_after else []
            return "429 Too Many Requests", h, _body(e.message, e.code)
        if self.on_error is not None:
            self.on_error(request, e)
        if self.fail_closed:
            return ("503 Service Unavailable", [("Retry-After", "1")],
                    _body("rate limiter unavailable", "unavailable"))
        return None


def _body(error: str, code: str) -> bytes:
    return json.dumps({"error": error, "code": code}).encode()


_DENIED = _body("rate limit exceeded", "rate_limited")


def _json(status: str, headers: Headers, body: bytes) -> Tuple[str, Headers, bytes]:
    return status, headers + [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))], body


class WSGIMiddleware:
    """Wraps a WSGI app (Flask's ``app.wsgi_app``, Django's ``get_wsgi_application()``) with
    one check per request: ``app = WSGIMiddleware(app, client, namespace="api", limit=100,
    window_ms=60000)``. ``key`` takes the environ (default key_by_ip)."""

    def __init__(self, app: Callable[..., Iterable[bytes]], client: Client, *, namespace: str,
                 key: Callable[[Dict[str, Any]], Optional[str]] = key_by_ip,
                 algorithm: Optional[str] = None, limit: Optional[int] = None,
                 window_ms: Optional[int] = None, cost: Optional[int] = None,
                 timeout: float = 1.0, fail_closed: bool = False,
                 on_error: Optional[Callable[[Dict[str, Any], BaseException], None]] = None) -> None:
        self.app, self.client = app, client
        self.policy = _Policy(namespace, key, algorithm, limit, window_ms, cost, timeout,
                              fail_closed, on_error)

    def __call__(self, environ: Dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        p = self.policy
        k = p.key(environ)
        if not k:
            return self.app(environ, start_response)
        try:
            r = self.client.limit(p.namespace, k, **p.args)
        except Exception as e:  # noqa: BLE001 - any failure of the check is the policy's
            answer = p.failed(environ, e)
            if answer is None:
                return self.app(environ, start_response)
            status, h, body = _json(*answer)
            start_response(status, h)
            return [body]
        ok, extra = p.allowed(r)
        if not ok:
            status, h, body = _json("429 Too Many Requests", extra, _DENIED)
            start_response(status, h)
            return [body]

        def start(status: str, headers: Headers, exc_info: Any = None) -> Any:
            return start_response(status, list(headers) + extra, exc_info)

        return self.app(environ, start)


class ASGIMiddleware:
    """Wraps an ASGI app (FastAPI, Starlette) with one check per HTTP request:
    ``app = ASGIMiddleware(app, async_client, namespace="api", limit=100, window_ms=60000)``
    (or ``app.add_middleware(ASGIMiddleware, client=..., namespace=...)``). ``key`` takes
    the scope (default key_by_ip). Lifespan and WebSocket scopes pass through."""

    def __init__(self, app: Callable[..., Any], client: AsyncClient, *, namespace: str,
                 key: Callable[[Dict[str, Any]], Optional[str]] = key_by_ip,
                 algorithm: Optional[str] = None, limit: Optional[int] = None,
                 window_ms: Optional[int] = None, cost: Optional[int] = None,
                 timeout: float = 1.0, fail_closed: bool = False,
                 on_error: Optional[Callable[[Dict[str, Any], BaseException], None]] = None) -> None:
        self.app, self.client = app, client
        self.policy = _Policy(namespace, key, algorithm, limit, window_ms, cost, timeout,
                              fail_closed, on_error)

    async def __call__(self, scope: Dict[str, Any], receive: Callable[..., Any],
                       send: Callable[..., Any]) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        p = self.policy
        k = p.key(scope)
        if not k:
            await self.app(scope, receive, send)
            return
        try:
            r = await self.client.limit(p.namespace, k, **p.args)  # type: ignore[attr-defined]
        except Exception as e:  # noqa: BLE001 - any failure of the check is the policy's
            answer = p.failed(scope, e)
            if answer is None:
                await self.app(scope, receive, send)
                return
            await _send(send, *_json(*answer))
            return
        ok, extra = p.allowed(r)
        if not ok:
            await _send(send, *_json("429 Too Many Requests", extra, _DENIED))
            return
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in extra]

        async def send_with_headers(message: Dict[str, Any]) -> None:
            if message.get("type") == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + raw
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _send(send: Callable[..., Any], status: str, headers: Headers, body: bytes) -> None:
    await send({"type": "http.response.start", "status": int(status.split()[0]),
                "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]})
    await send({"type": "http.response.body", "body": body})
