"""The servers tests/clients started for this suite (go test ./tests/clients runs it)."""

import json
import os
import pathlib
import random
import time
import urllib.request


def _need(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        raise RuntimeError(f"{name} is not set: run this suite through "
                           "go test ./tests/clients/ -run TestPythonClient (or make clients-test)")
    return v


URL = _need("LEASH_URL")  # the leash on the memory store
REDIS_URL = _need("LEASH_REDIS_URL")  # the leash on a Redis that outage() stops
KEYS = json.loads(_need("LEASH_KEYS"))  # scale, free, operator, unknown
_OUTAGE = _need("LEASH_OUTAGE_URL")
CLIENTS = pathlib.Path(_need("LEASH_CLIENTS_DIR"))  # the repository's clients/


def outage(ms: int) -> None:
    """Stops the Redis under REDIS_URL for ms."""
    with urllib.request.urlopen(urllib.request.Request(f"{_OUTAGE}?ms={ms}", method="POST")) as r:
        assert r.status == 204


def unique(prefix: str) -> str:
    """A fresh name for this run."""
    return f"{prefix}-{int(time.time() * 1000):x}-{random.randrange(1 << 30):x}"
