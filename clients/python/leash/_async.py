"""The asyncio clients: the blocking clients' calls run in the event loop's default thread
pool, so that nothing blocks the loop; leases are renewed by a task of their own."""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, Callable, Optional, TypeVar

from ._client import AdminClient, Client
from ._errors import LeaseDenied, LeashError

T = TypeVar("T")


class _AsyncBase:
    _sync_class: Any = None

    def __init__(self, url: str = "http://localhost:8080", api_key: Optional[str] = None, *,
                 timeout: float = 10.0, max_retries: int = 2, retry_backoff: float = 0.1,
                 max_retry_wait: float = 5.0) -> None:
        self._sync = self._sync_class(url, api_key, timeout=timeout, max_retries=max_retries,
                                      retry_backoff=retry_backoff, max_retry_wait=max_retry_wait)

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, fn)


def _wrap(cls: Any, name: str) -> Any:
    sync = getattr(cls, name)

    @functools.wraps(sync)
    async def method(self: _AsyncBase, *args: Any, **kwargs: Any) -> Any:
        return await self._run(functools.partial(getattr(self._sync, name), *args, **kwargs))

    return method


class AsyncClient(_AsyncBase):
    """The asyncio form of Client: the same methods, awaited, and ``async with
    client.lease(...)``. Options as Client's."""

    _sync_class = Client

    def lease(self, namespace: str, key: str, *, limit: Optional[int] = None,
              window_ms: Optional[int] = None) -> "AsyncLease":
        """A lease to hold in an ``async with`` block: acquired on entry (LeaseDenied when
        every slot is held), renewed by a task every third of its TTL, released on exit
        whether the block returns or raises."""
        return AsyncLease(self, namespace, key, limit, window_ms)


class AsyncAdminClient(_AsyncBase):
    """The asyncio form of AdminClient."""

    _sync_class = AdminClient


for _cls, _sync in ((AsyncClient, Client), (AsyncAdminClient, AdminClient)):
    for _name in dir(_sync):
        if not _name.startswith("_") and _name != "lease" and callable(getattr(_sync, _name)):
            setattr(_cls, _name, _wrap(_sync, _name))


class AsyncLease:
    """A lease held in an ``async with`` block: ``id``, ``ttl_ms``, and ``lost``, an
    asyncio.Event set when the lease is no longer held."""

    def __init__(self, client: AsyncClient, namespace: str, key: str, limit: Optional[int],
                 window_ms: Optional[int]) -> None:
        self._client = client
        self._args = (namespace, key, limit, window_ms)
        self.id = ""
        self.ttl_ms = 0
        self.lost = asyncio.Event()
        self._task: Optional["asyncio.Task[None]"] = None

    async def __aenter__(self) -> "AsyncLease":
        ns, key, limit, window_ms = self._args
        d = await self._client.acquire(ns, key, limit=limit, window_ms=window_ms)  # type: ignore[attr-defined]
        if not d.allowed or d.lease_id is None:
            raise LeaseDenied(d.active, d.limit, d.reset_ms)
        self.id, self.ttl_ms = d.lease_id, d.reset_ms
        self._task = asyncio.get_running_loop().create_task(self._keep_alive())
        return self

    async def _keep_alive(self) -> None:
        ttl = self.ttl_ms / 1000
        held_until = time.monotonic() + ttl
        wait = ttl / 3
        while True:
            await asyncio.sleep(wait)
            try:
                r = await self._client.renew(self.id, window_ms=self.ttl_ms, timeout=max(ttl / 2, 0.05))  # type: ignore[attr-defined]
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

    async def close(self) -> None:
        """Stops renewing and releases the lease; a second call does nothing more."""
        if self._task is None:
            return
        task, self._task = self._task, None
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        if not self.lost.is_set():
            try:
                await self._client.release(self.id)  # type: ignore[attr-defined]
            except LeashError:
                pass  # the lease expires by its TTL

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
