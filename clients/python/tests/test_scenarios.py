"""clients/scenarios.json, the scenarios every client runs, with Client and AsyncClient."""

import asyncio
import dataclasses
import json
import math
import time
import unittest

import leash
from tests.env import CLIENTS, KEYS, REDIS_URL, URL, outage

SCENARIOS = json.loads((CLIENTS / "scenarios.json").read_text())["scenarios"]


class WorkFailed(Exception):
    """What a with_lease step's work raises when it throws."""


class Run:
    """One scenario's state; ``call`` runs a client method, sync or async."""

    def __init__(self, test, client, ns, is_async):
        self.t, self.c, self.ns, self.is_async = test, client, ns, is_async
        self.lease = ""

    def s(self, a, k):
        v = a.get(k)
        return self.lease if v == "$lease" else v

    async def call(self, name, *args, **kw):
        r = getattr(self.c, name)(*args, **kw)
        return await r if self.is_async else r

    def check_args(self, a):
        return {k: a[k] for k in ("algorithm", "limit", "window_ms", "cost", "overdraft") if k in a}

    async def step(self, name, st):
        a = st["args"]
        start = time.monotonic()
        got, err, retry_after = {}, None, None
        try:
            c = st["call"]
            if c == "limit":
                r = await self.call("limit", self.ns, self.s(a, "key"), **self.check_args(a))
                got = dataclasses.asdict(r)
                if not r.allowed:
                    retry_after = r.retry_after
            elif c == "reset":
                got = {"reset": await self.call("reset", self.ns, self.s(a, "key"), **self.check_args(a))}
            elif c == "acquire":
                d = await self.call("acquire", self.ns, self.s(a, "key"), limit=a.get("limit"), window_ms=a.get("window_ms"))
                if d.lease_id:
                    self.lease = d.lease_id
                got = dataclasses.asdict(d)
            elif c == "renew":
                got = dataclasses.asdict(await self.call("renew", self.s(a, "lease_id"), window_ms=a.get("window_ms")))
            elif c == "release":
                got = dataclasses.asdict(await self.call("release", self.s(a, "lease_id")))
            elif c == "leases":
                got = dataclasses.asdict(await self.call("leases", self.ns, self.s(a, "key")))
            elif c == "stats":
                got = dataclasses.asdict(await self.call("stats", self.ns))
            elif c == "outage":
                outage(a["ms"])
                return
            elif c == "with_lease":
                await self.with_lease(name, st)
                return
            else:
                self.t.fail(f"{name}: unknown call {c}")
        except leash.LeashError as e:
            err = e
        elapsed = (time.monotonic() - start) * 1000
        if "want_error" in st:
            w = st["want_error"]
            self.t.assertIsNotNone(err, f"{name}: got {got}, want error {w}")
            self.t.assertEqual((err.status, err.code), (w["status"], w["code"]), name)
            self.t.assertIs(type(err), leash.BY_CODE.get(w["code"], type(err)), name)
            retry_after = err.retry_after
        elif err is not None:
            raise err
        for k, v in st.get("want", {}).items():
            self.t.assertEqual(got.get(k), v, f"{name}: {k} in {got}")
        if "retry_after_s" in st:
            lo, hi = st["retry_after_s"]
            self.t.assertTrue(retry_after is not None and lo <= retry_after <= hi, f"{name}: Retry-After {retry_after}")
        if "min_elapsed_ms" in st:
            self.t.assertGreaterEqual(elapsed, st["min_elapsed_ms"], name)

    async def with_lease(self, name, st):
        a = st["args"]
        lease = self.c.lease(self.ns, a["key"], limit=a.get("limit"), window_ms=a.get("window_ms"))

        async def work(lease):
            await asyncio.sleep(st.get("work_ms", 0) / 1000)
            self.t.assertFalse(lease.lost.is_set(), f"{name}: the lease was lost during the work")
            for i, d in enumerate(st.get("during", [])):
                await self.step(f"{name}, during {i + 1} ({d['call']})", d)
            if st.get("throw"):
                raise WorkFailed()

        try:
            if self.is_async:
                async with lease as held:
                    await work(held)
            else:
                with lease as held:
                    await work(held)
        except WorkFailed:
            self.t.assertTrue(st.get("throw"), f"{name}: the work failed")
            return
        self.t.assertFalse(st.get("throw"), f"{name}: the work's exception was not passed on")


def run_scenario(test, i, sc, is_async, prefix):
    url = REDIS_URL if sc.get("server") == "redis" else URL
    account = sc.get("as", "scale")
    # The second run (AsyncClient) uses a second account where one is used up (a hard cap).
    key = KEYS.get(account + "_2", KEYS[account]) if is_async else KEYS[account]
    ns = f"{prefix}-{i}"

    async def main():
        client = (leash.AsyncClient if is_async else leash.Client)(url, key)
        r = Run(test, client, ns, is_async)
        for j, st in enumerate(sc["steps"]):
            await r.step(f"step {j + 1} ({st['call']})", st)

    asyncio.run(main())


class ScenariosTest(unittest.TestCase):
    """Every scenario with the blocking Client and with AsyncClient: one test method each,
    test_scenario_<n>_<name>_client and ..._async_client, made below."""

    def test_every_scenario_has_its_tests(self):
        names = [n for n in dir(self) if n.startswith("test_scenario_")]
        self.assertEqual(len(names), 2 * len(SCENARIOS))

    def test_lease_denied(self):
        c = leash.Client(URL, KEYS["scale"])
        held = c.acquire("py-denied", "k", limit=1, window_ms=60000)
        ran = False
        with self.assertRaises(leash.LeaseDenied) as cm:
            with c.lease("py-denied", "k", limit=1, window_ms=60000):
                ran = True
        self.assertFalse(ran)
        self.assertEqual((cm.exception.active, cm.exception.limit), (1, 1))
        self.assertGreater(cm.exception.reset_ms, 0)
        self.assertTrue(c.release(held.lease_id).released)


def _scenario_test(i, sc, is_async):
    def test(self):
        run_scenario(self, i, sc, is_async, "py-async" if is_async else "py")
    test.__doc__ = f"scenario: {sc['name']} ({'AsyncClient' if is_async else 'Client'})"
    return test


for _i, _sc in enumerate(SCENARIOS):
    _slug = "".join(c if c.isalnum() else "_" for c in _sc["name"].lower())
    setattr(ScenariosTest, f"test_scenario_{_i:02d}_{_slug}_client", _scenario_test(_i, _sc, False))
    setattr(ScenariosTest, f"test_scenario_{_i:02d}_{_slug}_async_client", _scenario_test(_i, _sc, True))


if __name__ == "__main__":
    unittest.main()
