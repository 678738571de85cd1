"""leash: the Python client of Leash, a rate-limit and concurrency-lease service (spec §13.6).

``leash.Client(url, api_key)`` and ``leash.AsyncClient`` call an account's routes,
``leash.AdminClient`` / ``leash.AsyncAdminClient`` the operators' (/v1/admin). Standard
library only; Python 3.9 or later.
"""

from ._async import AsyncAdminClient, AsyncClient, AsyncLease
from ._client import OPERATIONS, AdminClient, Client, Lease
from ._errors import *  # noqa: F401,F403 - the exception of every code
from ._errors import BY_CODE, LeaseDenied, LeashError
from ._types import *  # noqa: F401,F403 - the dataclasses of every schema
from ._types import SCHEMAS
from .middleware import ASGIMiddleware, WSGIMiddleware, key_by_header, key_by_ip

__all__ = ["Client", "AsyncClient", "AdminClient", "AsyncAdminClient", "Lease", "AsyncLease",
           "LeashError", "LeaseDenied", "BY_CODE", "OPERATIONS", "SCHEMAS", "WSGIMiddleware",
           "ASGIMiddleware", "key_by_ip", "key_by_header"]
