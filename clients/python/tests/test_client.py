"""Every method against a real leash: the account's routes and the operators'."""

import asyncio
import re
import unittest

import leash
from tests.env import KEYS, URL, unique


class ClientTest(unittest.TestCase):
    def test_every_method(self):
        admin = leash.AdminClient(URL, KEYS["operator"])
        acct_id = re.sub(r"[^a-z0-9-]", "", unique("py"))
        a = admin.create_account(acct_id, "pro")
        self.assertEqual((a.id, a.source, a.keys, a.suspended), (acct_id, "api", 0, False))
        with self.assertRaises(leash.AccountExists):
            admin.create_account(acct_id, "pro")
        issued = admin.issue_key(acct_id, name="ci")
        self.assertTrue(issued.key.startswith("lsh_"))
        self.assertEqual(len(admin.list_keys(acct_id).keys), 1)
        page = admin.list_accounts(limit=1)
        self.assertEqual(len(page.accounts), 1)
        self.assertIsInstance(page.next_cursor, str)
        self.assertEqual(admin.get_account(acct_id).keys, 1)

        c = leash.Client(URL, issued.key)
        me = c.account()
        self.assertEqual(me.id, acct_id)
        self.assertFalse(me.suspended)
        self.assertTrue(me.plan_limits.concurrent_limit)

        # Rules.
        rule, created = c.set_rule("api", algorithm="token_bucket", limit=5, window_ms=1000, name="default",
                                   overrides=[leash.Override("vip", 50)])
        self.assertTrue(created)
        self.assertEqual(rule.overrides, [leash.Override("vip", 50)])
        _, created = c.set_rule("api", algorithm="token_bucket", limit=6, window_ms=1000)
        self.assertFalse(created)
        self.assertEqual(c.rules("api").rules[0].limit, 6)
        self.assertEqual(c.limit("api", "by-rule").limit, 6)
        self.assertTrue(c.delete_rule("api", "rate").deleted)
        self.assertFalse(c.delete_rule("api", "rate").deleted)
        with self.assertRaises(leash.MissingLimit) as cm:
            c.limit("api", "k")
        self.assertEqual(cm.exception.status, 400)

        # Usage.
        stats = c.stats("api")
        self.assertEqual(len(stats.days), 30)
        self.assertIsInstance(stats.month.over_quota, bool)
        self.assertEqual(len(c.usage().days), 30)
        self.assertIsInstance(c.namespaces().namespaces, list)
        self.assertEqual(len(admin.usage(acct_id).days), 30)

        # Keys.
        spare = c.create_key(name="spare")
        self.assertEqual(len(c.keys().keys), 2)
        c.revoke_key(spare.id)
        with self.assertRaises(leash.ApiKeyNotFound):
            c.revoke_key(spare.id)

        # Webhook.
        self.assertIsNone(c.webhook())
        hook = c.set_webhook("http://127.0.0.1:9/hook")
        self.assertTrue(hook.secret.startswith("whsec_"))
        self.assertEqual(c.webhook().url, hook.url)
        self.assertTrue(c.test_webhook().event_id)
        c.delete_webhook()
        self.assertIsNone(c.webhook())

        # Suspended, then resumed; with the async clients. The audit log stays readable.
        async def suspended():
            aadmin, ac = leash.AsyncAdminClient(URL, KEYS["operator"]), leash.AsyncClient(URL, issued.key)
            self.assertTrue((await aadmin.update_account(acct_id, suspended=True)).suspended)
            self.assertTrue((await ac.account()).suspended)
            with self.assertRaises(leash.AccountSuspended):
                await ac.limit("api", "k", limit=1, window_ms=1000)
            with self.assertRaises(leash.AccountSuspended):
                await ac.create_key(name="while-suspended")
            self.assertEqual((await ac.audit(limit=1)).entries[0].action, "account.suspended")
            self.assertEqual((await aadmin.audit(account=acct_id, limit=1)).entries[0].action, "account.suspended")
            await aadmin.update_account(acct_id, suspended=False)
            self.assertFalse((await ac.account()).suspended)
            self.assertTrue((await ac.limit("api", "k", limit=1, window_ms=1000)).allowed)

        asyncio.run(suspended())

        # The audit log: the account's own, newest first, a page at a time; an operator's view.
        own = c.audit(limit=2)
        self.assertEqual([e.action for e in own.entries], ["account.resumed", "account.suspended"])
        self.assertEqual(own.entries[0].actor.type, "operator")
        self.assertIsInstance(own.next_cursor, str)
        older = c.audit(limit=100, cursor=own.next_cursor)
        self.assertIsNone(older.next_cursor)
        self.assertEqual(older.entries[-1].action, "account.created")
        rule_set = next(e for e in older.entries if e.action == "rule.set")
        self.assertIsInstance(rule_set.actor, leash.AuditActor)
        self.assertEqual((rule_set.actor.type, rule_set.details["window_ms"]), ("account", "1000"))
        self.assertTrue(rule_set.actor.key_id.startswith("key_"))
        self.assertTrue(rule_set.request_id)
        ops = admin.audit(account=acct_id, limit=1)
        self.assertEqual(ops.entries[0].id, own.entries[0].id)
        self.assertEqual(admin.audit(account=acct_id, limit=1, cursor=ops.next_cursor).entries[0].id,
                         own.entries[1].id)
        with self.assertRaises(leash.InvalidRequest):
            admin.audit(account="Not An Id")
        with self.assertRaises(leash.AccountKeyRequired):
            leash.Client(URL, KEYS["operator"]).audit()
        with self.assertRaises(leash.OperatorKeyRequired):
            leash.AdminClient(URL, issued.key).audit()

        # The wrong kind of key.
        with self.assertRaises(leash.AccountKeyRequired):
            leash.Client(URL, KEYS["operator"]).account()
        with self.assertRaises(leash.OperatorKeyRequired):
            leash.AdminClient(URL, issued.key).get_account(acct_id)

        admin.revoke_key(acct_id, issued.id)
        admin.delete_account(acct_id)
        with self.assertRaises(leash.AccountNotFound) as cm:
            admin.get_account(acct_id)
        self.assertEqual(cm.exception.status, 404)
        self.assertTrue(cm.exception.request_id)

    def test_bad_url(self):
        with self.assertRaises(ValueError):
            leash.Client("localhost:8080")


if __name__ == "__main__":
    unittest.main()
