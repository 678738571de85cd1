// The middlewares in real node:http servers, against a real leash.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Leash, rateLimit, withRateLimit, keyByHeader } from "../src/index.js";
import { keys, unique, url } from "./env.js";

/** Listens on a free loopback port; resolves the server's base URL. */
function listen(s: Server): Promise<string> {
  return new Promise((resolve) => s.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(s.address() as AddressInfo).port}`)));
}

function close(s: Server): Promise<void> {
  return new Promise((resolve) => s.close(() => resolve()));
}

/** Sends three requests as one client; the limit is two. */
async function threeRequests(base: string) {
  const out = [];
  for (let i = 0; i < 3; i++) {
    const res = await fetch(base + "/hello", { headers: { "X-User": "u1" } });
    out.push({ status: res.status, headers: res.headers, body: await res.text() });
  }
  return out;
}

function checkThree(got: { status: number; headers: Headers; body: string }[]) {
  assert.deepEqual(got.map((r) => r.status), [200, 200, 429]);
  assert.equal(got[0]!.body, "hello");
  assert.equal(got[0]!.headers.get("ratelimit-limit"), "2");
  assert.equal(got[0]!.headers.get("ratelimit-remaining"), "1");
  const denied = got[2]!;
  assert.equal(denied.headers.get("ratelimit-limit"), "2");
  assert.equal(denied.headers.get("ratelimit-remaining"), "0");
  const reset = Number(denied.headers.get("ratelimit-reset"));
  const retry = Number(denied.headers.get("retry-after"));
  assert.ok(reset >= 1 && reset <= 60, `RateLimit-Reset ${reset}`);
  assert.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
  assert.equal(denied.headers.get("content-type"), "application/json");
  assert.deepEqual(JSON.parse(denied.body), { error: "rate limit exceeded", code: "rate_limited" });
}

test("rateLimit in a node:http server answers 429 with RateLimit-* and Retry-After once the limit is spent", async () => {
  const leash = new Leash({ url, apiKey: keys["scale"] });
  const mw = rateLimit(leash, { namespace: unique("ts-mw"), key: keyByHeader("X-User"), algorithm: "fixed_window", limit: 2, windowMs: 60000 });
  const s = createServer((req, res) => mw(req, res, () => res.end("hello")));
  try {
    checkThree(await threeRequests(await listen(s)));
  } finally {
    await close(s);
  }
});

/** A fetch-style handler served by node:http, as Hono's node adapter does. */
function serveFetch(handler: (r: Request) => Promise<Response>): Server {
  return createServer(async (req: IncomingMessage, res) => {
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    const out = await handler(new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers }));
    res.statusCode = out.status;
    out.headers.forEach((v, k) => res.setHeader(k, v));
    res.end(await out.text());
  });
}

test("withRateLimit around a fetch handler answers 429 with RateLimit-* and Retry-After once the limit is spent", async () => {
  const leash = new Leash({ url, apiKey: keys["scale"] });
  const handler = withRateLimit(
    leash,
    { namespace: unique("ts-fetch"), key: keyByHeader("X-User"), algorithm: "fixed_window", limit: 2, windowMs: 60000 },
    async () => new Response("hello"),
  );
  const s = serveFetch(handler);
  try {
    checkThree(await threeRequests(await listen(s)));
  } finally {
    await close(s);
  }
});

test("Leash unreachable: served (fail open) after onError, or 503 with failClosed", async () => {
  // A port nothing listens on: a server that was started and closed again.
  const dead = createServer();
  const deadUrl = await listen(dead);
  await close(dead);
  const leash = new Leash({ url: deadUrl, apiKey: "k", maxRetries: 0 });
  const errors: unknown[] = [];
  const open = rateLimit(leash, { namespace: "n", limit: 1, windowMs: 1000, onError: (_r, e) => errors.push(e) });
  const closed = rateLimit(leash, { namespace: "n", limit: 1, windowMs: 1000, failClosed: true });
  const s = createServer((req, res) => (req.url === "/closed" ? closed : open)(req, res, () => res.end("served")));
  try {
    const base = await listen(s);
    const a = await fetch(base + "/open");
    assert.equal(a.status, 200);
    assert.equal(await a.text(), "served");
    assert.equal(errors.length, 1);
    const b = await fetch(base + "/closed");
    assert.equal(b.status, 503);
    assert.equal(b.headers.get("retry-after"), "1");
    assert.deepEqual(await b.json(), { error: "rate limiter unavailable", code: "unavailable" });
  } finally {
    await close(s);
  }
});

test("rateLimit passes Leash's 429 hard_cap_exceeded on, with its Retry-After", async () => {
  const leash = new Leash({ url, apiKey: keys["capped_mw"] });
  const mw = rateLimit(leash, { namespace: "ts-cap", key: () => "k", limit: 100, windowMs: 60000 });
  const s = createServer((req, res) => mw(req, res, () => res.end("hello")));
  try {
    const base = await listen(s);
    const statuses = [];
    let last: Response | undefined;
    for (let i = 0; i < 4; i++) {
      last = await fetch(base + "/");
      statuses.push(last.status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 429]);
    assert.equal((await last!.json()).code, "hard_cap_exceeded");
    assert.ok(Number(last!.headers.get("retry-after")) >= 1);
  } finally {
    await close(s);
  }
});
