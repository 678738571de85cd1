// The Leash client: one method per /v1 operation of docs/openapi.yaml, bounded retries of
// the calls that are safe to repeat, errors typed by the spec's codes, and leases that are
// renewed while work runs and always released.

import {
  auditFromWire,
  fromWire,
  toWire,
  type AccountPage,
  type AuditPage,
  type Account,
  type AccountUsage,
  type CreateAccountRequest,
  type DeleteResult,
  type IssueKeyRequest,
  type IssuedKey,
  type KeyList,
  type LeaseDecision,
  type LeaseList,
  type LeaseRequest,
  type LimitRequest,
  type LimitResult,
  type NamespaceList,
  type OwnAccount,
  type ReleaseResult,
  type RenewRequest,
  type RenewResult,
  type Rule,
  type RuleList,
  type RuleRequest,
  type RuleWrite,
  type Stats,
  type UpdateAccountRequest,
  type Webhook,
  type WebhookTestResult,
  type WebhookWithSecret,
} from "./types.js";
import { LeashError, LeaseDeniedError, LeaseLostError } from "./errors.js";

/** The operations of docs/openapi.yaml, by operationId: method, path and whether a call may
 * be repeated after a 503 or a transport error (a spend or an issued key never is). */
export const OPERATIONS = {
  checkLimit: { method: "POST", path: "/v1/limit", retry: false },
  resetLimit: { method: "POST", path: "/v1/limit/reset", retry: true },
  acquireLease: { method: "POST", path: "/v1/leases", retry: false },
  releaseLease: { method: "DELETE", path: "/v1/leases/{lease_id}", retry: true },
  renewLease: { method: "POST", path: "/v1/leases/{lease_id}/renew", retry: false },
  listLeases: { method: "GET", path: "/v1/namespaces/{ns}/leases", retry: true },
  listRules: { method: "GET", path: "/v1/namespaces/{ns}/rules", retry: true },
  putRule: { method: "POST", path: "/v1/namespaces/{ns}/rules", retry: false },
  deleteRule: { method: "DELETE", path: "/v1/namespaces/{ns}/rules/{kind}", retry: true },
  namespaceStats: { method: "GET", path: "/v1/namespaces/{ns}/stats", retry: true },
  getWebhook: { method: "GET", path: "/v1/webhook", retry: true },
  putWebhook: { method: "PUT", path: "/v1/webhook", retry: false },
  deleteWebhook: { method: "DELETE", path: "/v1/webhook", retry: true },
  testWebhook: { method: "POST", path: "/v1/webhook/test", retry: false },
  getOwnAccount: { method: "GET", path: "/v1/account", retry: true },
  getUsage: { method: "GET", path: "/v1/usage", retry: true },
  listNamespaces: { method: "GET", path: "/v1/namespaces", retry: true },
  listOwnKeys: { method: "GET", path: "/v1/keys", retry: true },
  issueOwnKey: { method: "POST", path: "/v1/keys", retry: false },
  revokeOwnKey: { method: "DELETE", path: "/v1/keys/{key_id}", retry: true },
  createAccount: { method: "POST", path: "/v1/admin/accounts", retry: false },
  listAccounts: { method: "GET", path: "/v1/admin/accounts", retry: true },
  getAccount: { method: "GET", path: "/v1/admin/accounts/{id}", retry: true },
  updateAccount: { method: "PATCH", path: "/v1/admin/accounts/{id}", retry: true },
  deleteAccount: { method: "DELETE", path: "/v1/admin/accounts/{id}", retry: true },
  issueAccountKey: { method: "POST", path: "/v1/admin/accounts/{id}/keys", retry: false },
  listAccountKeys: { method: "GET", path: "/v1/admin/accounts/{id}/keys", retry: true },
  revokeAccountKey: { method: "DELETE", path: "/v1/admin/accounts/{id}/keys/{key_id}", retry: true },
  getAccountUsage: { method: "GET", path: "/v1/admin/accounts/{id}/usage", retry: true },
  listAudit: { method: "GET", path: "/v1/admin/audit", retry: true },
  listOwnAudit: { method: "GET", path: "/v1/audit", retry: true },
} as const;

/** An operationId of docs/openapi.yaml. */
export type OperationId = keyof typeof OPERATIONS;

/** Options of a client. */
export interface LeashOptions {
  /** The /v1 listener, without /v1; default http://localhost:8080. */
  url?: string;
  /** Sent as `Authorization: Bearer <key>`: an account's key (Leash) or an operator's (LeashAdmin). */
  apiKey?: string;
  /** The fetch to send requests with; default globalThis.fetch. */
  fetch?: typeof fetch;
  /** Bound on each attempt, ms; default 10000 (0: none). */
  timeoutMs?: number;
  /** Repeats of a call that is safe to repeat, after a 503 or no answer; default 2. */
  maxRetries?: number;
  /** First wait when the answer names none, ms; doubles, ±20 % jitter; default 100. */
  retryBackoffMs?: number;
  /** A longer wait (a Retry-After included) ends the retries; default 5000. */
  maxRetryWaitMs?: number;
}

/** Per-call options. */
export interface CallOptions {
  /** Ends the call (and its retries) when aborted. */
  signal?: AbortSignal;
  /** Bound on each attempt, ms, in place of the client's. */
  timeoutMs?: number;
}

interface Call {
  params?: Record<string, string>;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  opts?: CallOptions | undefined;
}

interface Answer {
  status: number;
  body: unknown;
}

/** A signal aborted when any of the given ones is, and a function that detaches it. */
function anySignal(signals: (AbortSignal | undefined)[]): { signal: AbortSignal; done: () => void } {
  const ctl = new AbortController();
  const undo: (() => void)[] = [];
  for (const s of signals) {
    if (!s) continue;
    if (s.aborted) {
      ctl.abort(s.reason);
      break;
    }
    const on = () => ctl.abort(s.reason);
    s.addEventListener("abort", on, { once: true });
    undo.push(() => s.removeEventListener("abort", on));
  }
  return { signal: ctl.signal, done: () => undo.forEach((f) => f()) };
}

/** Waits ms, or rejects when signal aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", on);
      resolve();
    }, ms);
    const on = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", on, { once: true });
  });
}

/** The seconds of a Retry-After header, in ms (undefined when absent or not a number). */
function retryAfterMs(h: string | null): number | undefined {
  if (h === null || !/^\d+$/.test(h.trim())) return undefined;
  return Number(h.trim()) * 1000;
}

/** What the two clients share: the transport. */
class Base {
  readonly #url: string;
  readonly #key: string | undefined;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #maxRetries: number;
  readonly #backoffMs: number;
  readonly #maxWaitMs: number;

  constructor(opts: LeashOptions = {}) {
    this.#url = (opts.url ?? "http://localhost:8080").replace(/\/+$/, "");
    this.#key = opts.apiKey;
    const f = opts.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("leash: no fetch: pass options.fetch");
    this.#fetch = f;
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
    this.#maxRetries = Math.max(0, opts.maxRetries ?? 2);
    this.#backoffMs = opts.retryBackoffMs ?? 100;
    this.#maxWaitMs = opts.maxRetryWaitMs ?? 5_000;
  }

  /** Sends one operation, retried when it is safe to; an error answer throws LeashError. */
  protected async call(op: OperationId, c: Call = {}): Promise<Answer> {
    const spec = OPERATIONS[op];
    let path: string = spec.path;
    for (const [k, v] of Object.entries(c.params ?? {})) path = path.replace(`{${k}}`, encodeURIComponent(v));
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(c.query ?? {})) if (v !== undefined) q.set(k, String(v));
    const url = this.#url + path + (q.toString() !== "" ? "?" + q.toString() : "");
    const headers: Record<string, string> = { Accept: "application/json" };
    if (this.#key !== undefined) headers["Authorization"] = "Bearer " + this.#key;
    let body: string | undefined;
    if (c.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(toWire(c.body));
    }
    const retries = spec.retry ? this.#maxRetries : 0;
    let backoff = this.#backoffMs;
    for (let attempt = 0; ; attempt++) {
      let err: LeashError;
      const timeout = c.opts?.timeoutMs ?? this.#timeoutMs;
      const timer = new AbortController();
      const t = timeout > 0 ? setTimeout(() => timer.abort(new Error("timeout")), timeout) : undefined;
      const sig = anySignal([c.opts?.signal, timer.signal]);
      try {
        const res = await this.#fetch(url, { method: spec.method, headers, body, signal: sig.signal });
        const text = await res.text();
        let parsed: unknown = undefined;
        try {
          parsed = text === "" ? undefined : JSON.parse(text);
        } catch {
          parsed = undefined;
        }
        if (res.ok) return { status: res.status, body: parsed };
        err = LeashError.fromAnswer(op, res.status, parsed, res.headers.get("Retry-After"), res.headers.get("X-Request-Id"));
        err.retryAfterMs = retryAfterMs(res.headers.get("Retry-After"));
        if (res.status !== 503) throw err;
      } catch (e) {
        if (e instanceof LeashError && e.status !== 503) throw e;
        if (c.opts?.signal?.aborted) throw c.opts.signal.reason;
        err = e instanceof LeashError ? e : LeashError.noAnswer(op, e);
      } finally {
        if (t !== undefined) clearTimeout(t);
        sig.done();
      }
      if (attempt >= retries) throw err;
      const jitter = 0.8 + Math.random() * 0.4;
      const wait = err.retryAfterMs ?? backoff * jitter;
      if (wait > this.#maxWaitMs) throw err;
      await sleep(wait, c.opts?.signal);
      backoff *= 2;
    }
  }
}

/** A client of an account's routes: `new Leash({ url, apiKey })`. */
export class Leash extends Base {
  /** Checks (and spends) a rate limit: POST /v1/limit. A denial is `allowed: false`. */
  async limit(req: LimitRequest, opts?: CallOptions): Promise<LimitResult> {
    return fromWire((await this.call("checkLimit", { body: req, opts })).body);
  }

  /** Clears one counter: POST /v1/limit/reset; false when it held no state. */
  async reset(req: LimitRequest, opts?: CallOptions): Promise<boolean> {
    try {
      await this.call("resetLimit", { body: req, opts });
      return true;
    } catch (e) {
      if (e instanceof LeashError && e.code === "key_not_found") return false;
      throw e;
    }
  }

  /** Acquires a concurrency lease: POST /v1/leases. A denial is `allowed: false`. */
  async acquire(req: LeaseRequest, opts?: CallOptions): Promise<LeaseDecision> {
    return fromWire((await this.call("acquireLease", { body: req, opts })).body);
  }

  /** Releases a lease: DELETE /v1/leases/{id}; idempotent. */
  async release(leaseId: string, opts?: CallOptions): Promise<ReleaseResult> {
    return fromWire((await this.call("releaseLease", { params: { lease_id: leaseId }, opts })).body);
  }

  /** Renews a held lease: POST /v1/leases/{id}/renew; `renewed: false` once it is gone. */
  async renew(leaseId: string, req: RenewRequest = {}, opts?: CallOptions): Promise<RenewResult> {
    const body = req.windowMs === undefined ? undefined : req;
    return fromWire((await this.call("renewLease", { params: { lease_id: leaseId }, body, opts })).body);
  }

  /**
   * Runs fn while holding a lease: acquires it (LeaseDeniedError when every slot is held),
   * renews it every third of its time-to-live while fn runs, and releases it when fn
   * settles, whether it returns or throws. fn's signal is aborted if the lease is lost
   * (a renewal answered `renewed: false`, or renewals failed until the TTL ran out).
   */
  async withLease<T>(req: LeaseRequest, fn: (lease: HeldLeaseHandle) => Promise<T> | T): Promise<T> {
    const d = await this.acquire(req);
    if (!d.allowed || d.leaseId === undefined) throw new LeaseDeniedError(d);
    const lease = new HeldLeaseHandle(this, d.leaseId, d.resetMs);
    try {
      return await fn(lease);
    } finally {
      await lease.release();
    }
  }

  /** The namespace's rules: GET /v1/namespaces/{ns}/rules. */
  async rules(namespace: string, opts?: CallOptions): Promise<RuleList> {
    return fromWire((await this.call("listRules", { params: { ns: namespace }, opts })).body);
  }

  /** Writes a rule: POST /v1/namespaces/{ns}/rules (created: the slot was empty). */
  async setRule(namespace: string, rule: RuleRequest, opts?: CallOptions): Promise<RuleWrite> {
    const a = await this.call("putRule", { params: { ns: namespace }, body: rule, opts });
    return { rule: fromWire<Rule>(a.body), created: a.status === 201 };
  }

  /** Deletes a rule: DELETE /v1/namespaces/{ns}/rules/{kind}. */
  async deleteRule(namespace: string, kind: "rate" | "concurrent", opts?: CallOptions): Promise<DeleteResult> {
    return fromWire((await this.call("deleteRule", { params: { ns: namespace, kind }, opts })).body);
  }

  /** A namespace's usage: GET /v1/namespaces/{ns}/stats. */
  async stats(namespace: string, opts?: CallOptions): Promise<Stats> {
    return fromWire((await this.call("namespaceStats", { params: { ns: namespace }, opts })).body);
  }

  /** The leases held on a key: GET /v1/namespaces/{ns}/leases?key=K. */
  async leases(namespace: string, key: string, opts?: CallOptions): Promise<LeaseList> {
    return fromWire((await this.call("listLeases", { params: { ns: namespace }, query: { key }, opts })).body);
  }

  /** The account and its plan: GET /v1/account. */
  async account(opts?: CallOptions): Promise<OwnAccount> {
    return fromWire((await this.call("getOwnAccount", { opts })).body);
  }

  /** The account's usage: GET /v1/usage. */
  async usage(opts?: CallOptions): Promise<AccountUsage> {
    return fromWire((await this.call("getUsage", { opts })).body);
  }

  /** The namespaces with a rule or recent usage: GET /v1/namespaces. */
  async namespaces(opts?: CallOptions): Promise<NamespaceList> {
    return fromWire((await this.call("listNamespaces", { opts })).body);
  }

  /** The account's own keys: GET /v1/keys. */
  async keys(opts?: CallOptions): Promise<KeyList> {
    return fromWire((await this.call("listOwnKeys", { opts })).body);
  }

  /** Issues a key to the account: POST /v1/keys (never retried). */
  async createKey(req: IssueKeyRequest = {}, opts?: CallOptions): Promise<IssuedKey> {
    return fromWire((await this.call("issueOwnKey", { body: req, opts })).body);
  }

  /** Revokes one of the account's keys: DELETE /v1/keys/{key_id}. */
  async revokeKey(keyId: string, opts?: CallOptions): Promise<void> {
    await this.call("revokeOwnKey", { params: { key_id: keyId }, opts });
  }

  /** The webhook: GET /v1/webhook; null when none is set. */
  async webhook(opts?: CallOptions): Promise<Webhook | null> {
    try {
      return fromWire((await this.call("getWebhook", { opts })).body);
    } catch (e) {
      if (e instanceof LeashError && e.code === "webhook_not_found") return null;
      throw e;
    }
  }

  /** Sets the webhook: PUT /v1/webhook; the secret is in this answer only. */
  async setWebhook(url: string, opts?: CallOptions): Promise<WebhookWithSecret> {
    return fromWire((await this.call("putWebhook", { body: { url }, opts })).body);
  }

  /** Removes the webhook: DELETE /v1/webhook. */
  async deleteWebhook(opts?: CallOptions): Promise<void> {
    await this.call("deleteWebhook", { opts });
  }

  /** Queues a webhook.test event: POST /v1/webhook/test. */
  async testWebhook(opts?: CallOptions): Promise<WebhookTestResult> {
    return fromWire((await this.call("testWebhook", { opts })).body);
  }

  /** One page of the account's own audit log, newest first: GET /v1/audit (spec §15.10);
   * pass a page's `nextCursor` as `cursor` for the next. Allowed while suspended. */
  async audit(page: { limit?: number; cursor?: string } = {}, opts?: CallOptions): Promise<AuditPage> {
    return auditFromWire((await this.call("listOwnAudit", { query: { limit: page.limit, cursor: page.cursor }, opts })).body);
  }
}

/** A lease held by withLease: renewed in the background until released. */
export class HeldLeaseHandle {
  /** The lease's id. */
  readonly id: string;
  /** The lease's time-to-live, ms. */
  readonly ttlMs: number;
  readonly #client: Leash;
  readonly #lost = new AbortController();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #renewing: Promise<void> | undefined;
  #released: Promise<void> | undefined;
  #heldUntil: number;

  constructor(client: Leash, id: string, ttlMs: number) {
    this.#client = client;
    this.id = id;
    this.ttlMs = ttlMs;
    this.#heldUntil = Date.now() + ttlMs;
    this.#schedule(Math.max(1, Math.floor(ttlMs / 3)));
  }

  /** Aborted, with a LeaseLostError, when the lease is no longer held. */
  get signal(): AbortSignal {
    return this.#lost.signal;
  }

  #schedule(ms: number): void {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#renewing = this.#renew().finally(() => (this.#renewing = undefined));
    }, ms);
  }

  async #renew(): Promise<void> {
    try {
      const r = await this.#client.renew(this.id, { windowMs: this.ttlMs }, { timeoutMs: Math.max(50, Math.floor(this.ttlMs / 2)) });
      if (this.#released) return;
      if (!r.renewed) {
        this.#lost.abort(new LeaseLostError(this.id, "the lease is no longer held"));
        return;
      }
      this.#heldUntil = Date.now() + this.ttlMs;
      this.#schedule(Math.max(1, Math.floor(this.ttlMs / 3)));
    } catch (e) {
      if (this.#released) return;
      const retry = Math.max(1, Math.floor(this.ttlMs / 10));
      if (Date.now() + retry >= this.#heldUntil) {
        this.#lost.abort(new LeaseLostError(this.id, "renewals failed until the lease expired", e));
        return;
      }
      this.#schedule(retry);
    }
  }

  /** Stops renewing and releases the lease; a second call does nothing more. */
  release(): Promise<void> {
    this.#released ??= (async () => {
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      await this.#renewing?.catch(() => undefined);
      if (this.#lost.signal.aborted) return;
      await this.#client.release(this.id).then(
        () => undefined,
        () => undefined, // the lease expires by its TTL
      );
    })();
    return this.#released;
  }
}

/** A client of the operators' routes, /v1/admin: `new LeashAdmin({ url, apiKey: operatorKey })`. */
export class LeashAdmin extends Base {
  /** Creates an account: POST /v1/admin/accounts. */
  async createAccount(req: CreateAccountRequest, opts?: CallOptions): Promise<Account> {
    return fromWire((await this.call("createAccount", { body: req, opts })).body);
  }

  /** One page of accounts: GET /v1/admin/accounts. */
  async listAccounts(page: { limit?: number; cursor?: string } = {}, opts?: CallOptions): Promise<AccountPage> {
    return fromWire((await this.call("listAccounts", { query: page, opts })).body);
  }

  /** One account: GET /v1/admin/accounts/{id}. */
  async getAccount(id: string, opts?: CallOptions): Promise<Account> {
    return fromWire((await this.call("getAccount", { params: { id }, opts })).body);
  }

  /** Re-plans, suspends or resumes an account: PATCH /v1/admin/accounts/{id}. */
  async updateAccount(id: string, req: UpdateAccountRequest, opts?: CallOptions): Promise<Account> {
    return fromWire((await this.call("updateAccount", { params: { id }, body: req, opts })).body);
  }

  /** Deletes an account and its keys: DELETE /v1/admin/accounts/{id}. */
  async deleteAccount(id: string, opts?: CallOptions): Promise<void> {
    await this.call("deleteAccount", { params: { id }, opts });
  }

  /** Issues a key to an account: POST /v1/admin/accounts/{id}/keys (never retried). */
  async issueKey(id: string, req: IssueKeyRequest = {}, opts?: CallOptions): Promise<IssuedKey> {
    return fromWire((await this.call("issueAccountKey", { params: { id }, body: req, opts })).body);
  }

  /** An account's keys: GET /v1/admin/accounts/{id}/keys. */
  async listKeys(id: string, opts?: CallOptions): Promise<KeyList> {
    return fromWire((await this.call("listAccountKeys", { params: { id }, opts })).body);
  }

  /** Revokes an account's key: DELETE /v1/admin/accounts/{id}/keys/{key_id}. */
  async revokeKey(id: string, keyId: string, opts?: CallOptions): Promise<void> {
    await this.call("revokeAccountKey", { params: { id, key_id: keyId }, opts });
  }

  /** An account's usage: GET /v1/admin/accounts/{id}/usage. */
  async usage(id: string, opts?: CallOptions): Promise<AccountUsage> {
    return fromWire((await this.call("getAccountUsage", { params: { id }, opts })).body);
  }

  /** One page of the audit log, newest first: GET /v1/admin/audit (spec §15.10); every
   * account's entries, or with `account` only that account's. Pass a page's `nextCursor`
   * as `cursor` for the next. */
  async audit(page: { account?: string; limit?: number; cursor?: string } = {}, opts?: CallOptions): Promise<AuditPage> {
    const query = { account: page.account, limit: page.limit, cursor: page.cursor };
    return auditFromWire((await this.call("listAudit", { query, opts })).body);
  }
}
