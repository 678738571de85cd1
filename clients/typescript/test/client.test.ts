// Every method against a real leash: the account's routes and the operators'.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Leash, LeashAdmin, LeashError, isCode } from "../src/index.js";
import { keys, unique, url } from "./env.js";

test("operators manage accounts and keys; an account manages its rules, keys, webhook and reads its usage", async () => {
  const admin = new LeashAdmin({ url, apiKey: keys["operator"] });
  const id = unique("ts").replace(/[^a-z0-9-]/g, "");
  const acct = await admin.createAccount({ id, plan: "pro" });
  assert.equal(acct.id, id);
  assert.equal(acct.source, "api");
  assert.equal(acct.keys, 0);
  await assert.rejects(admin.createAccount({ id, plan: "pro" }), (e) => isCode(e, "account_exists"));
  const issued = await admin.issueKey(id, { name: "ci" });
  assert.ok(issued.key.startsWith("lsh_"));
  assert.equal((await admin.listKeys(id)).keys.length, 1);
  const page = await admin.listAccounts({ limit: 1 });
  assert.equal(page.accounts.length, 1);
  assert.equal(typeof page.nextCursor, "string");
  assert.equal((await admin.getAccount(id)).keys, 1);

  const c = new Leash({ url, apiKey: issued.key });
  const me = await c.account();
  assert.equal(me.id, id);
  assert.equal(me.planLimits.concurrentLimit, true);

  // Rules.
  const w1 = await c.setRule("api", { algorithm: "token_bucket", limit: 5, windowMs: 1000, name: "default", overrides: [{ key: "vip", limit: 50 }] });
  assert.equal(w1.created, true);
  assert.deepEqual(w1.rule.overrides, [{ key: "vip", limit: 50 }]);
  const w2 = await c.setRule("api", { algorithm: "token_bucket", limit: 6, windowMs: 1000 });
  assert.equal(w2.created, false);
  assert.equal((await c.rules("api")).rules[0]!.limit, 6);
  assert.equal((await c.limit({ namespace: "api", key: "by-rule" })).limit, 6);
  assert.deepEqual(await c.deleteRule("api", "rate"), { deleted: true });
  assert.deepEqual(await c.deleteRule("api", "rate"), { deleted: false });
  await assert.rejects(c.limit({ namespace: "api", key: "k" }), (e) => e instanceof LeashError && e.status === 400 && e.code === "missing_limit");

  // Usage.
  const stats = await c.stats("api");
  assert.equal(stats.days.length, 30);
  assert.equal(typeof stats.month.overQuota, "boolean");
  assert.equal((await c.usage()).days.length, 30);
  assert.ok(Array.isArray((await c.namespaces()).namespaces));
  assert.equal((await admin.usage(id)).days.length, 30);

  // Keys.
  const spare = await c.createKey({ name: "spare" });
  assert.equal((await c.keys()).keys.length, 2);
  await c.revokeKey(spare.id);
  await assert.rejects(c.revokeKey(spare.id), (e) => isCode(e, "api_key_not_found"));

  // Webhook.
  assert.equal(await c.webhook(), null);
  const hook = await c.setWebhook("http://127.0.0.1:9/hook");
  assert.match(hook.secret, /^whsec_/);
  assert.equal((await c.webhook())?.url, hook.url);
  assert.match((await c.testWebhook()).eventId, /.+/);
  await c.deleteWebhook();
  assert.equal(await c.webhook(), null);

  // Suspended: decisions refused with account_suspended; resumed: served again.
  assert.equal((await admin.updateAccount(id, { suspended: true })).suspended, true);
  await assert.rejects(c.limit({ namespace: "api", key: "k", limit: 1, windowMs: 1000 }), (e) => isCode(e, "account_suspended"));
  await admin.updateAccount(id, { suspended: false });
  assert.equal((await c.limit({ namespace: "api", key: "k", limit: 1, windowMs: 1000 })).allowed, true);

  // The wrong kind of key.
  await assert.rejects(new Leash({ url, apiKey: keys["operator"] }).account(), (e) => isCode(e, "account_key_required"));
  await assert.rejects(new LeashAdmin({ url, apiKey: issued.key }).getAccount(id), (e) => isCode(e, "operator_key_required"));

  await admin.revokeKey(id, issued.id);
  await admin.deleteAccount(id);
  await assert.rejects(admin.getAccount(id), (e) => e instanceof LeashError && e.status === 404 && e.code === "account_not_found" && !!e.requestId);
});
