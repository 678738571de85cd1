// The shapes of Leash's /v1 API (docs/openapi.yaml), in camelCase. FIELDS lists, for each
// schema of the document, the wire names of the type that carries it; the compiler checks
// each list against its type (every property listed, nothing else), and the coverage test
// checks the lists against clients/api.json, the document's summary.

/** A rate algorithm, or `concurrent_limit` for a rule that feeds leases. */
export type Algorithm = "fixed_window" | "sliding_window" | "token_bucket" | "concurrent_limit";

/** POST /v1/limit and /v1/limit/reset. Fields not given come from the namespace's rule. */
export interface LimitRequest {
  namespace: string;
  key: string;
  algorithm?: Algorithm;
  limit?: number;
  windowMs?: number;
  /** Units to spend, default 1; 0 looks without spending. */
  cost?: number;
  /** Count the cost even when it is denied (spec §4.12). */
  overdraft?: boolean;
}

/** The verdict of a rate-limit check; a denial is `allowed: false`, not an error. */
export interface LimitResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  resetMs: number;
}

/** POST /v1/limit/reset's answer (a counter with no state is `reset()` → false). */
export interface ResetResult {
  reset: boolean;
}

/** POST /v1/leases. `limit` is the most leases held at once, `windowMs` each one's TTL. */
export interface LeaseRequest {
  namespace: string;
  key: string;
  limit?: number;
  windowMs?: number;
}

/** The answer to an acquisition: `leaseId` only when allowed. */
export interface LeaseDecision {
  allowed: boolean;
  leaseId?: string;
  active: number;
  limit: number;
  resetMs: number;
}

/** DELETE /v1/leases/{id}. */
export interface ReleaseResult {
  released: boolean;
  active: number;
}

/** POST /v1/leases/{id}/renew's body: a new TTL from now, default the lease's own. */
export interface RenewRequest {
  windowMs?: number;
}

/** POST /v1/leases/{id}/renew. */
export interface RenewResult {
  renewed: boolean;
  active: number;
  resetMs: number;
}

/** A key's own limit inside a rule (spec §6.7). */
export interface Override {
  key: string;
  limit: number;
  windowMs?: number;
}

/** A rule to write (POST /v1/namespaces/{ns}/rules). */
export interface RuleRequest {
  algorithm: Algorithm;
  limit: number;
  windowMs: number;
  name?: string;
  /** Accepted and ignored by the server: the path's namespace is used. */
  namespace?: string;
  overrides?: Override[];
}

/** A namespace's rule as the server answers it. */
export interface Rule {
  namespace: string;
  algorithm: Algorithm;
  limit: number;
  windowMs: number;
  name?: string;
  overrides?: Override[];
}

/** A rule write's answer: `created` is true on 201 (the slot was empty). */
export interface RuleWrite {
  rule: Rule;
  created: boolean;
}

/** GET /v1/namespaces/{ns}/rules. */
export interface RuleList {
  namespace: string;
  rules: Rule[];
}

/** DELETE /v1/namespaces/{ns}/rules/{kind}. */
export interface DeleteResult {
  deleted: boolean;
}

/** One UTC day of usage. */
export interface DayStats {
  day: string;
  total: number;
  blocked: number;
}

/** The account's UTC month. `hardCap` is null for none. */
export interface MonthStats {
  month: string;
  total: number;
  quota: number;
  overQuota: boolean;
  hardCap: number | null;
}

/** GET /v1/namespaces/{ns}/stats. */
export interface Stats {
  namespace: string;
  total: number;
  blocked: number;
  days: DayStats[];
  month: MonthStats;
}

/** One namespace's totals over the last 30 UTC days. */
export interface NamespaceUsage {
  namespace: string;
  total: number;
  blocked: number;
}

/** GET /v1/usage and GET /v1/admin/accounts/{id}/usage. */
export interface AccountUsage {
  month: MonthStats;
  namespaces: NamespaceUsage[];
  days: DayStats[];
}

/** One namespace of GET /v1/namespaces. */
export interface NamespaceSummary {
  namespace: string;
  rules: number;
  total: number;
  blocked: number;
}

/** GET /v1/namespaces. */
export interface NamespaceList {
  namespaces: NamespaceSummary[];
}

/** One held lease. */
export interface HeldLease {
  leaseId: string;
  expiresInMs: number;
}

/** GET /v1/namespaces/{ns}/leases?key=K. `limit` is null without a concurrent rule. */
export interface LeaseList {
  namespace: string;
  key: string;
  active: number;
  limit: number | null;
  leases: HeldLease[];
}

/** What the account's plan allows. */
export interface PlanLimits {
  algorithms: Algorithm[];
  concurrentLimit: boolean;
  webhooks: boolean;
  monthlyQuota: number;
  hardCap: number | null;
}

/** GET /v1/account. */
export interface OwnAccount {
  id: string;
  plan: string;
  /** True while an operator has the account suspended (spec §15.6): its decisions, leases,
   * rule writes, webhook writes and tests and the keys it would issue itself are refused
   * with `account_suspended`. */
  suspended: boolean;
  planLimits: PlanLimits;
}

/** PUT /v1/webhook's body. */
export interface WebhookRequest {
  url: string;
}

/** GET /v1/webhook. */
export interface Webhook {
  url: string;
}

/** PUT /v1/webhook's answer: the secret is shown only here. */
export interface WebhookWithSecret {
  url: string;
  secret: string;
}

/** POST /v1/webhook/test. */
export interface WebhookTestResult {
  eventId: string;
}

/** An account as operators see it. `createdAt` is null for a configured account. */
export interface Account {
  id: string;
  plan: string;
  source: "config" | "api";
  suspended: boolean;
  createdAt: string | null;
  keys: number;
}

/** One page of GET /v1/admin/accounts; `nextCursor` null on the last. */
export interface AccountPage {
  accounts: Account[];
  nextCursor: string | null;
}

/** POST /v1/admin/accounts. */
export interface CreateAccountRequest {
  id: string;
  plan: string;
}

/** PATCH /v1/admin/accounts/{id}: members not given are left as they are. */
export interface UpdateAccountRequest {
  plan?: string;
  suspended?: boolean;
}

/** POST /v1/keys and /v1/admin/accounts/{id}/keys. */
export interface IssueKeyRequest {
  name?: string;
}

/** A key as the lists show it (never the key itself). */
export interface APIKey {
  id: string;
  name: string;
  prefix: string;
  createdAt: string | null;
  source: "config" | "api";
}

/** A key just issued: `key` is shown only here. */
export interface IssuedKey {
  id: string;
  name: string;
  key: string;
  prefix: string;
  createdAt: string;
}

/** GET /v1/keys and /v1/admin/accounts/{id}/keys. */
export interface KeyList {
  keys: APIKey[];
}

/** Who made a change: an operator (`id` the operator's id) or an account (`id` the
 * account's, `keyId` the key it called with: `key_…` or `config-N`). */
export interface AuditActor {
  type: "operator" | "account";
  id: string;
  keyId?: string;
}

/** One change of the audit log (spec §15.10). */
export interface AuditEntry {
  /** Unique; ids sort as the entries were recorded. */
  id: string;
  /** When it was recorded, by the store's clock: RFC 3339 in UTC with milliseconds. */
  time: string;
  actor: AuditActor;
  action:
    | "account.created"
    | "account.plan_changed"
    | "account.suspended"
    | "account.resumed"
    | "account.deleted"
    | "key.issued"
    | "key.revoked"
    | "rule.set"
    | "rule.deleted"
    | "webhook.set"
    | "webhook.deleted"
    | "counter.reset";
  /** The account the change concerns. */
  account: string;
  /** The account id, a key id, `<ns>/<rate or concurrent>`, `webhook`, or a namespace. */
  target: string;
  /** The change's facts, under their wire names (`plan`, `name`, `window_ms`, `host`...). */
  details: Record<string, string>;
  /** The client address. */
  client: string;
  /** The request's X-Request-Id. */
  requestId: string;
}

/** One page of GET /v1/audit or /v1/admin/audit, newest first; `nextCursor` null on the last. */
export interface AuditPage {
  entries: AuditEntry[];
  nextCursor: string | null;
}

/** The error body of every error answer. */
export interface ErrorBody {
  error: string;
  code: string;
}

/** snake_case of a camelCase name. */
export type Snake<S extends string> = S extends `${infer H}${infer T}`
  ? `${H extends Lowercase<H> ? H : `_${Lowercase<H>}`}${Snake<T>}`
  : S;

/** The wire names of T's properties. */
export type Wire<T> = Snake<keyof T & string>;

/** Checks at compile time that a list holds exactly T's wire names. */
function fields<T>() {
  return <const L extends readonly Wire<T>[]>(list: L & ([Wire<T>] extends [L[number]] ? unknown : never)): L => list;
}

/** For each schema of docs/openapi.yaml, the wire fields of the type that carries it. */
export const FIELDS = {
  APIKey: fields<APIKey>()(["id", "name", "prefix", "created_at", "source"]),
  Account: fields<Account>()(["id", "plan", "source", "suspended", "created_at", "keys"]),
  AccountPage: fields<AccountPage>()(["accounts", "next_cursor"]),
  AccountUsage: fields<AccountUsage>()(["month", "namespaces", "days"]),
  AuditEntry: fields<AuditEntry>()(["id", "time", "actor", "action", "account", "target", "details", "client", "request_id"]),
  "AuditEntry.actor": fields<AuditActor>()(["type", "id", "key_id"]),
  AuditPage: fields<AuditPage>()(["entries", "next_cursor"]),
  "AccountUsage.namespaces": fields<NamespaceUsage>()(["namespace", "total", "blocked"]),
  CreateAccountRequest: fields<CreateAccountRequest>()(["id", "plan"]),
  DayStats: fields<DayStats>()(["day", "total", "blocked"]),
  DeleteResult: fields<DeleteResult>()(["deleted"]),
  Error: fields<ErrorBody>()(["error", "code"]),
  IssueKeyRequest: fields<IssueKeyRequest>()(["name"]),
  IssuedKey: fields<IssuedKey>()(["id", "name", "key", "prefix", "created_at"]),
  KeyList: fields<KeyList>()(["keys"]),
  LeaseDecision: fields<LeaseDecision>()(["allowed", "lease_id", "active", "limit", "reset_ms"]),
  LeaseList: fields<LeaseList>()(["namespace", "key", "active", "limit", "leases"]),
  "LeaseList.leases": fields<HeldLease>()(["lease_id", "expires_in_ms"]),
  LeaseRequest: fields<LeaseRequest>()(["namespace", "key", "limit", "window_ms"]),
  LimitRequest: fields<LimitRequest>()(["namespace", "key", "algorithm", "limit", "window_ms", "cost", "overdraft"]),
  LimitResult: fields<LimitResult>()(["allowed", "limit", "remaining", "reset_ms"]),
  MonthStats: fields<MonthStats>()(["month", "total", "quota", "over_quota", "hard_cap"]),
  NamespaceList: fields<NamespaceList>()(["namespaces"]),
  "NamespaceList.namespaces": fields<NamespaceSummary>()(["namespace", "rules", "total", "blocked"]),
  Override: fields<Override>()(["key", "limit", "window_ms"]),
  OverrideRequest: fields<Override>()(["key", "limit", "window_ms"]),
  OwnAccount: fields<OwnAccount>()(["id", "plan", "suspended", "plan_limits"]),
  "OwnAccount.plan_limits": fields<PlanLimits>()(["algorithms", "concurrent_limit", "webhooks", "monthly_quota", "hard_cap"]),
  ReleaseResult: fields<ReleaseResult>()(["released", "active"]),
  RenewRequest: fields<RenewRequest>()(["window_ms"]),
  RenewResult: fields<RenewResult>()(["renewed", "active", "reset_ms"]),
  ResetResult: fields<ResetResult>()(["reset"]),
  Rule: fields<Rule>()(["namespace", "algorithm", "limit", "window_ms", "name", "overrides"]),
  RuleList: fields<RuleList>()(["namespace", "rules"]),
  RuleRequest: fields<RuleRequest>()(["algorithm", "limit", "window_ms", "name", "namespace", "overrides"]),
  Stats: fields<Stats>()(["namespace", "total", "blocked", "days", "month"]),
  UpdateAccountRequest: fields<UpdateAccountRequest>()(["plan", "suspended"]),
  Webhook: fields<Webhook>()(["url"]),
  WebhookRequest: fields<WebhookRequest>()(["url"]),
  WebhookTestResult: fields<WebhookTestResult>()(["event_id"]),
  WebhookWithSecret: fields<WebhookWithSecret>()(["url", "secret"]),
} as const;

/** camelCase of a snake_case name. */
function camel(s: string): string {
  return s.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** snake_case of a camelCase name. */
function snake(s: string): string {
  return s.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase());
}

/** An audit page from its JSON answer: the members' names in camelCase, except each entry's
 * `details`, whose keys are data and keep their wire names. */
export function auditFromWire(v: unknown): AuditPage {
  const page = fromWire<AuditPage>(v);
  const raw = v as { entries: { details: Record<string, string> }[] };
  page.entries.forEach((e, i) => (e.details = { ...raw.entries[i]!.details }));
  return page;
}

/** A JSON answer with its members' names in camelCase, all the way down. */
export function fromWire<T>(v: unknown): T {
  return convert(v, camel) as T;
}

/** A request body with its members' names in snake_case; undefined members left out. */
export function toWire(v: unknown): unknown {
  return convert(v, snake);
}

function convert(v: unknown, name: (s: string) => string): unknown {
  if (Array.isArray(v)) return v.map((x) => convert(x, name));
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (x !== undefined) out[name(k)] = convert(x, name);
    }
    return out;
  }
  return v;
}
