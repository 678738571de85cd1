// Errors: every error answer is a LeashError with the spec's code (spec §3.6).

import type { LeaseDecision } from "./types.js";

/** The stable codes of Leash's error answers (spec §3.6), and `rate_limited`, the code the
 * middleware answers a denied request with. */
export type ErrorCode =
  | "invalid_request"
  | "missing_limit"
  | "unknown_algorithm"
  | "invalid_rule"
  | "invalid_lease_id"
  | "unauthorized"
  | "algorithm_not_on_plan"
  | "concurrent_not_on_plan"
  | "webhook_not_on_plan"
  | "key_not_found"
  | "webhook_not_found"
  | "not_found"
  | "method_not_allowed"
  | "request_too_large"
  | "unsupported_media_type"
  | "webhook_url_rejected"
  | "hard_cap_exceeded"
  | "request_header_too_large"
  | "internal"
  | "unavailable"
  | "account_suspended"
  | "account_exists"
  | "account_not_found"
  | "api_key_not_found"
  | "config_read_only"
  | "too_many_keys"
  | "unknown_plan"
  | "operator_key_required"
  | "account_key_required"
  | "too_many_auth_failures"
  | "rate_limited";

/** An error answer from Leash, or no answer at all (status 0, code "unavailable"). */
export class LeashError extends Error {
  /** The HTTP status; 0 when no answer was read (refused, reset, timed out). */
  status: number;
  /** The spec's code; "" when the answer had no Leash error body. */
  code: ErrorCode | "";
  /** The operationId of the call. */
  operation: string;
  /** The answer's Retry-After, in ms, when it had one. */
  retryAfterMs: number | undefined;
  /** The answer's X-Request-Id, for the server's log. */
  requestId: string | undefined;
  /** The message for people, as the server wrote it. */
  detail: string;

  constructor(operation: string, status: number, code: ErrorCode | "", message: string, opts: { cause?: unknown } = {}) {
    super(`leash: ${operation}: ${status === 0 ? "no answer" : status} ${code}: ${message}`, opts);
    this.name = "LeashError";
    this.operation = operation;
    this.status = status;
    this.code = code;
    this.retryAfterMs = undefined;
    this.requestId = undefined;
    this.detail = message;
  }

  /** The error of an answer with a non-2xx status. */
  static fromAnswer(op: string, status: number, body: unknown, _retryAfter: string | null, requestId: string | null): LeashError {
    let code = "";
    let message = `HTTP ${status}`;
    if (body !== null && typeof body === "object") {
      const b = body as Record<string, unknown>;
      if (typeof b["code"] === "string") code = b["code"];
      if (typeof b["error"] === "string") message = b["error"];
    }
    const e = new LeashError(op, status, code as ErrorCode, message);
    e.requestId = requestId ?? undefined;
    return e;
  }

  /** The error of a call that got no answer. */
  static noAnswer(op: string, cause: unknown): LeashError {
    const msg = cause instanceof Error ? cause.message : String(cause);
    return new LeashError(op, 0, "unavailable", `no answer: ${msg}`, { cause });
  }

  /** True for a 503, a 500 and a call with no answer: worth trying again later. */
  get unavailable(): boolean {
    return this.status === 0 || this.status === 503 || this.status === 500;
  }
}

/** True when e is a LeashError with the given code. */
export function isCode(e: unknown, code: ErrorCode): boolean {
  return e instanceof LeashError && e.code === code;
}

/** withLease found every slot held: `resetMs` until the soonest lease ends. */
export class LeaseDeniedError extends Error {
  /** Leases held now. */
  active: number;
  /** The resolved limit. */
  limit: number;
  /** ms until the soonest-expiring lease frees a slot. */
  resetMs: number;

  constructor(d: LeaseDecision) {
    super(`leash: lease denied: ${d.active} of ${d.limit} held, next slot in ${d.resetMs} ms`);
    this.name = "LeaseDeniedError";
    this.active = d.active;
    this.limit = d.limit;
    this.resetMs = d.resetMs;
  }
}

/** A lease kept by withLease is no longer held; the reason of its signal's abort. */
export class LeaseLostError extends Error {
  /** The lost lease's id. */
  leaseId: string;

  constructor(leaseId: string, why: string, cause?: unknown) {
    super(`leash: lease lost: ${why}`, { cause });
    this.name = "LeaseLostError";
    this.leaseId = leaseId;
  }
}
