// clients/scenarios.json, the scenarios every client runs, with this client.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Leash, LeashError, LeaseDeniedError } from "../src/index.js";
import { clientsFile, keys, outage, redisUrl, url } from "./env.js";

interface Step {
  call: string;
  args: Record<string, unknown>;
  want?: Record<string, unknown>;
  want_error?: { status: number; code: string };
  retry_after_s?: [number, number];
  min_elapsed_ms?: number;
  work_ms?: number;
  throw?: boolean;
  during?: Step[];
}
interface Scenario {
  name: string;
  server?: string;
  as?: string;
  steps: Step[];
}

const file = clientsFile<{ scenarios: Scenario[] }>("scenarios.json");
const workFailed = new Error("the work failed");

/** The answer's fields in the API's wire names. */
function wire(v: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) out[k.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase())] = x;
  return out;
}

class Run {
  lease = "";
  constructor(readonly c: Leash, readonly ns: string) {}

  str(a: Record<string, unknown>, k: string): string {
    const v = a[k] as string;
    return v === "$lease" ? this.lease : v;
  }

  req(a: Record<string, unknown>) {
    return {
      namespace: this.ns,
      key: this.str(a, "key"),
      algorithm: a["algorithm"] as "fixed_window" | undefined,
      limit: a["limit"] as number | undefined,
      windowMs: a["window_ms"] as number | undefined,
      cost: a["cost"] as number | undefined,
      overdraft: a["overdraft"] as boolean | undefined,
    };
  }

  async step(name: string, st: Step): Promise<void> {
    const a = st.args;
    const start = Date.now();
    let got: Record<string, unknown> = {};
    let err: unknown;
    let retryAfterS: number | undefined;
    try {
      switch (st.call) {
        case "limit": {
          const r = await this.c.limit(this.req(a));
          got = wire(r);
          if (!r.allowed) retryAfterS = Math.max(1, Math.ceil(r.resetMs / 1000));
          break;
        }
        case "reset":
          got = { reset: await this.c.reset(this.req(a)) };
          break;
        case "acquire": {
          const d = await this.c.acquire(this.req(a));
          if (d.leaseId) this.lease = d.leaseId;
          got = wire(d);
          break;
        }
        case "renew":
          got = wire(await this.c.renew(this.str(a, "lease_id"), { windowMs: a["window_ms"] as number | undefined }));
          break;
        case "release":
          got = wire(await this.c.release(this.str(a, "lease_id")));
          break;
        case "leases":
          got = wire(await this.c.leases(this.ns, this.str(a, "key")));
          break;
        case "stats":
          got = wire(await this.c.stats(this.ns));
          break;
        case "outage":
          await outage(a["ms"] as number);
          return;
        case "with_lease": {
          const p = this.c.withLease(this.req(a), async (lease) => {
            await new Promise((r) => setTimeout(r, st.work_ms ?? 0));
            assert.equal(lease.signal.aborted, false, `${name}: the lease was lost during the work`);
            for (const [i, d] of (st.during ?? []).entries()) await this.step(`${name}, during ${i + 1} (${d.call})`, d);
            if (st.throw) throw workFailed;
          });
          if (st.throw) {
            await assert.rejects(p, (e) => e === workFailed, `${name}: withLease must pass the work's error on`);
            return;
          }
          await p;
          return;
        }
        default:
          assert.fail(`${name}: unknown call ${st.call}`);
      }
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      err = e;
    }
    const elapsed = Date.now() - start;
    if (st.want_error) {
      assert.ok(err instanceof LeashError, `${name}: got ${String(err)} ${JSON.stringify(got)}, want error ${st.want_error.code}`);
      assert.equal(err.status, st.want_error.status, name);
      assert.equal(err.code, st.want_error.code, name);
      retryAfterS = err.retryAfterMs === undefined ? undefined : err.retryAfterMs / 1000;
    } else if (err !== undefined) {
      throw err;
    }
    for (const [k, v] of Object.entries(st.want ?? {})) assert.deepEqual(got[k], v, `${name}: ${k} in ${JSON.stringify(got)}`);
    if (st.retry_after_s) {
      assert.ok(retryAfterS !== undefined && retryAfterS >= st.retry_after_s[0] && retryAfterS <= st.retry_after_s[1], `${name}: Retry-After ${retryAfterS}`);
    }
    if (st.min_elapsed_ms) assert.ok(elapsed >= st.min_elapsed_ms, `${name}: took ${elapsed} ms, want at least ${st.min_elapsed_ms}`);
  }
}

for (const [i, sc] of file.scenarios.entries()) {
  test(`scenario: ${sc.name}`, async () => {
    const c = new Leash({ url: sc.server === "redis" ? redisUrl : url, apiKey: keys[sc.as ?? "scale"] });
    const r = new Run(c, `ts-${i}`);
    for (const [j, st] of sc.steps.entries()) await r.step(`step ${j + 1} (${st.call})`, st);
  });
}

test("withLease refuses with LeaseDeniedError when every slot is held, and runs nothing", async () => {
  const c = new Leash({ url, apiKey: keys["scale"] });
  const held = await c.acquire({ namespace: "ts-denied", key: "k", limit: 1, windowMs: 60000 });
  let ran = false;
  await assert.rejects(
    c.withLease({ namespace: "ts-denied", key: "k", limit: 1, windowMs: 60000 }, () => {
      ran = true;
    }),
    (e) => e instanceof LeaseDeniedError && e.active === 1 && e.limit === 1 && e.resetMs > 0,
  );
  assert.equal(ran, false);
  await c.release(held.leaseId!);
});
