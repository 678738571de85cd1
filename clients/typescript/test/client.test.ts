// Every method against a real leash: the account's routes and the operators'.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Leash, LeashAdmin, LeashError, isCode } from "../src/index.js";
import { keys, unique, url } from "./env.js";

test("operators manage accounts and keys; an account manages its rules, keys, webhook and reads its usage and audit log", async () => {
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
  assert.equal(me.suspended, false);
  assert.equal((await admin.updateAccount(id, { suspended: true })).suspended, true);
  assert.equal((await c.account()).suspended, true);
  await assert.rejects(c.limit({ namespace: "api", key: "k", limit: 1, windowMs: 1000 }), (e) => isCode(e, "account_suspended"));
  await assert.rejects(c.createKey({ name: "while-suspended" }), (e) => isCode(e, "account_suspended"));
  await admin.updateAccount(id, { suspended: false });
  assert.equal((await c.account()).suspended, false);

  // The audit log: the account's own, newest first, a page at a time; an operator's view.
  const own = await c.audit({ limit: 2 });
  assert.deepEqual(own.entries.map((e) => e.action), ["account.resumed", "account.suspended"]);
  assert.equal(own.entries[0]!.actor.type, "operator");
  assert.equal(typeof own.nextCursor, "string");
  const older = await c.audit({ limit: 100, cursor: own.nextCursor! });
  const set = older.entries.find((e) => e.action === "rule.set" && e.details["window_ms"] === "1000");
  assert.ok(set, "a rule.set entry, its details under their wire names");
  assert.equal(set.actor.type, "account");
  assert.match(set.actor.keyId ?? "", /^key_/);
  assert.match(set.requestId, /.+/);
  assert.equal(older.nextCursor, null);
  assert.equal(older.entries.at(-1)!.action, "account.created");
  const ops = await admin.audit({ account: id, limit: 1 });
  assert.equal(ops.entries[0]!.id, own.entries[0]!.id);
  assert.equal((await admin.audit({ account: id, limit: 1, cursor: ops.nextCursor! })).entries[0]!.id, own.entries[1]!.id);
  await assert.rejects(admin.audit({ account: "Not An Id" }), (e) => isCode(e, "invalid_request"));
  await assert.rejects(new Leash({ url, apiKey: keys["operator"] }).audit(), (e) => isCode(e, "account_key_required"));
  await assert.rejects(new LeashAdmin({ url, apiKey: issued.key }).audit(), (e) => isCode(e, "operator_key_required"));
  assert.equal((await c.limit({ namespace: "api", key: "k", limit: 1, windowMs: 1000 })).allowed, true);

  // The wrong kind of key.
  await assert.rejects(new Leash({ url, apiKey: keys["operator"] }).account(), (e) => isCode(e, "account_key_required"));
  await assert.rejects(new LeashAdmin({ url, apiKey: issued.key }).getAccount(id), (e) => isCode(e, "operator_key_required"));

  await admin.revokeKey(id, issued.id);
  await admin.deleteAccount(id);
  await assert.rejects(admin.getAccount(id), (e) => e instanceof LeashError && e.status === 404 && e.code === "account_not_found" && !!e.requestId);
});
