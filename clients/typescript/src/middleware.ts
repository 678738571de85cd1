// Middleware: one rate-limit check per request (spec §13.3). Allowed: the request is served
// with RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset. Denied: 429 with those,
// Retry-After and {"error": "rate limit exceeded", "code": "rate_limited"}. Leash's own 429
// hard_cap_exceeded is passed on with its Retry-After. Any other failure calls onError, then
// serves the request (fail open, the default) or, with failClosed, answers 503.

import type { Leash } from "./client.js";
import { LeashError } from "./errors.js";
import type { Algorithm } from "./types.js";

/** Options shared by both middlewares. */
export interface LimitOptions<Req> {
  /** The namespace of every check. */
  namespace: string;
  /** The request's key; "" or undefined lets the request through unchecked. */
  key: (req: Req) => string | undefined;
  /** Inline values; those not given come from the namespace's rule. */
  algorithm?: Exclude<Algorithm, "concurrent_limit">;
  limit?: number;
  windowMs?: number;
  cost?: number;
  /** Bound on the check, ms; default 1000. */
  timeoutMs?: number;
  /** Answer 503 when Leash cannot decide, instead of serving the request. */
  failClosed?: boolean;
  /** Called with the error when Leash could not decide (a log line, a metric). */
  onError?: (req: Req, err: unknown) => void;
}

/** What to do with one request. */
type Verdict =
  | { serve: true; headers: Record<string, string> }
  | { serve: false; status: number; headers: Record<string, string>; body: string };

function seconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

async function decide<Req>(leash: Leash, o: LimitOptions<Req>, req: Req): Promise<Verdict> {
  const key = o.key(req);
  if (!key) return { serve: true, headers: {} };
  try {
    const r = await leash.limit(
      { namespace: o.namespace, key, algorithm: o.algorithm, limit: o.limit, windowMs: o.windowMs, cost: o.cost },
      { timeoutMs: o.timeoutMs ?? 1000 },
    );
    const headers: Record<string, string> = {
      "RateLimit-Limit": String(r.limit),
      "RateLimit-Remaining": String(r.remaining),
      "RateLimit-Reset": String(seconds(r.resetMs)),
    };
    if (r.allowed) return { serve: true, headers };
    headers["Retry-After"] = String(Math.max(1, seconds(r.resetMs)));
    headers["Content-Type"] = "application/json";
    return { serve: false, status: 429, headers, body: JSON.stringify({ error: "rate limit exceeded", code: "rate_limited" }) };
  } catch (e) {
    if (e instanceof LeashError && e.code === "hard_cap_exceeded") {
      const headers: Record<string, string> = { "Content-Type": "application/json" };
      if (e.retryAfterMs !== undefined) headers["Retry-After"] = String(seconds(e.retryAfterMs));
      return { serve: false, status: 429, headers, body: JSON.stringify({ error: e.detail, code: e.code }) };
    }
    o.onError?.(req, e);
    if (o.failClosed) {
      return {
        serve: false,
        status: 503,
        headers: { "Content-Type": "application/json", "Retry-After": "1" },
        body: JSON.stringify({ error: "rate limiter unavailable", code: "unavailable" }),
      };
    }
    return { serve: true, headers: {} };
  }
}

/** The parts of a Node/Express/Connect request the middleware reads. */
export interface NodeLikeRequest {
  headers: Record<string, string | string[] | undefined>;
  socket?: { remoteAddress?: string | undefined } | null;
  ip?: string | undefined;
}

/** The parts of a Node/Express/Connect response the middleware writes. */
export interface NodeLikeResponse {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(body?: string): unknown;
}

/** Keys a Node request by its peer's address (Express's req.ip when set). Behind a proxy,
 * key by the header the proxy sets instead. */
export function keyByIP(req: NodeLikeRequest): string | undefined {
  return req.ip ?? req.socket?.remoteAddress ?? undefined;
}

/** Keys a request by one header's value (undefined when absent: unchecked). */
export function keyByHeader(name: string): (req: NodeLikeRequest | Request) => string | undefined {
  const lower = name.toLowerCase();
  return (req) => {
    if (typeof Request !== "undefined" && req instanceof Request) return req.headers.get(name) ?? undefined;
    const v = (req as NodeLikeRequest).headers[lower];
    return Array.isArray(v) ? v[0] : v;
  };
}

/**
 * Express/Connect-style middleware, `(req, res, next)`, for Express, Connect, Fastify's
 * middie and plain `node:http` handlers. `key` defaults to keyByIP.
 */
export function rateLimit<Req extends NodeLikeRequest = NodeLikeRequest>(
  leash: Leash,
  opts: Omit<LimitOptions<Req>, "key"> & { key?: (req: Req) => string | undefined },
): (req: Req, res: NodeLikeResponse, next: (err?: unknown) => void) => void {
  const o: LimitOptions<Req> = { ...opts, key: opts.key ?? keyByIP };
  return (req, res, next) => {
    decide(leash, o, req).then(
      (v) => {
        for (const [k, val] of Object.entries(v.headers)) res.setHeader(k, val);
        if (v.serve) return next();
        res.statusCode = v.status;
        res.end(v.body);
      },
      (e) => next(e),
    );
  };
}

/**
 * Wraps a fetch-style handler, `(request) => Response` (Hono, Next.js route handlers, edge
 * runtimes, Deno, Bun), with one check per request; `key` is required, since a Request
 * carries no peer address.
 */
export function withRateLimit<Rest extends unknown[]>(
  leash: Leash,
  opts: LimitOptions<Request>,
  handler: (req: Request, ...rest: Rest) => Response | Promise<Response>,
): (req: Request, ...rest: Rest) => Promise<Response> {
  return async (req, ...rest) => {
    const v = await decide(leash, opts, req);
    if (!v.serve) return new Response(v.body, { status: v.status, headers: v.headers });
    const res = await handler(req, ...rest);
    if (Object.keys(v.headers).length === 0) return res;
    const out = new Response(res.body, res); // a fetched Response's headers are immutable
    for (const [k, val] of Object.entries(v.headers)) out.headers.set(k, val);
    return out;
  };
}
