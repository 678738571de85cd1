"""The client covers docs/openapi.yaml: every operation of clients/api.json (the document's
summary, kept current by go test ./tests/openapi) is in OPERATIONS with a method that calls
it, in Client or AdminClient and in their async forms; every field of every schema is a field
of its dataclass (SCHEMAS); every request field is a parameter of a method."""

import dataclasses
import inspect
import json
import pathlib
import unittest

import leash
from leash import _client
from tests.env import CLIENTS

API = json.loads((CLIENTS / "api.json").read_text())

# The methods that send each request schema's fields.
REQUEST_METHODS = {
    "LimitRequest": [leash.Client.limit, leash.Client.reset],
    "LeaseRequest": [leash.Client.acquire, leash.Client.lease],
    "RenewRequest": [leash.Client.renew],
    "CreateAccountRequest": [leash.AdminClient.create_account],
    "UpdateAccountRequest": [leash.AdminClient.update_account],
    "IssueKeyRequest": [leash.Client.create_key, leash.AdminClient.issue_key],
    "WebhookRequest": [leash.Client.set_webhook],
    "RuleRequest": [leash.Client.set_rule],
}
# Request fields the server accepts and ignores, so no method takes them.
IGNORED = {("RuleRequest", "namespace")}


class CoverageTest(unittest.TestCase):
    def test_every_operation_is_called(self):
        source = pathlib.Path(_client.__file__).read_text()
        for op in API["operations"]:
            mine = leash.OPERATIONS.get(op["id"])
            self.assertIsNotNone(mine, f"operation {op['id']} ({op['method']} {op['path']}) is not covered: "
                                       "add it to OPERATIONS and a method (README, \"Adding an operation\")")
            self.assertEqual(mine[:2], (op["method"], op["path"]), op["id"])
            self.assertIn(f'call("{op["id"]}"', source, f"no method calls {op['id']}")
        self.assertEqual(sorted(leash.OPERATIONS), sorted(o["id"] for o in API["operations"]))

    def test_async_clients_have_every_method(self):
        for sync, asy in ((leash.Client, leash.AsyncClient), (leash.AdminClient, leash.AsyncAdminClient)):
            for name, fn in inspect.getmembers(sync, inspect.isfunction):
                if not name.startswith("_"):
                    self.assertTrue(hasattr(asy, name), f"{asy.__name__} has no {name}")

    def test_every_field_is_covered(self):
        for schema, names in API["schemas"].items():
            cls = leash.SCHEMAS.get(schema)
            self.assertIsNotNone(cls, f"schema {schema} is not covered: add its dataclass to SCHEMAS")
            mine = {f.name for f in dataclasses.fields(cls)}
            for n in names:
                self.assertIn(n, mine, f"{schema}.{n} is not covered: add it to {cls.__name__}")

    def test_every_request_field_is_a_parameter(self):
        for schema, methods in REQUEST_METHODS.items():
            for m in methods:
                params = set(inspect.signature(m).parameters)
                for n in API["schemas"][schema]:
                    if (schema, n) not in IGNORED:
                        self.assertIn(n, params, f"{m.__qualname__} does not take {schema}.{n}")
        covered = set(REQUEST_METHODS) | {"OverrideRequest"}
        for schema in API["schemas"]:
            if schema.endswith("Request"):
                self.assertIn(schema, covered, f"request schema {schema}: add the methods that send it to REQUEST_METHODS")


if __name__ == "__main__":
    unittest.main()
