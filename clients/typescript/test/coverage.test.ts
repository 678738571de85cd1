// The client covers docs/openapi.yaml: every operation of clients/api.json (the document's
// summary, kept current by go test ./tests/openapi) has its entry in OPERATIONS and a method
// that calls it, and every field of every schema is in FIELDS, which the compiler checks
// against the types.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { FIELDS, OPERATIONS } from "../src/index.js";
import { clientsDir, clientsFile } from "./env.js";

interface Summary {
  operations: { id: string; method: string; path: string }[];
  schemas: Record<string, string[]>;
}
const api = clientsFile<Summary>("api.json");

test("every operation of the document has its entry in OPERATIONS and a method that calls it", () => {
  const source = readFileSync(`${clientsDir}/typescript/src/client.ts`, "utf8");
  const table = OPERATIONS as Record<string, { method: string; path: string }>;
  for (const op of api.operations) {
    const mine = table[op.id];
    assert.ok(mine, `operation ${op.id} (${op.method} ${op.path}) is not covered: add it to OPERATIONS and a method (README, "Adding an operation")`);
    assert.equal(mine.method, op.method, op.id);
    assert.equal(mine.path, op.path, op.id);
    assert.ok(source.includes(`this.call("${op.id}"`), `no method calls ${op.id}`);
  }
  assert.deepEqual(Object.keys(table).sort(), api.operations.map((o) => o.id).sort(), "OPERATIONS names an operation the document does not have");
});

test("every field of every schema of the document is in FIELDS", () => {
  const fields = FIELDS as Record<string, readonly string[]>;
  for (const [schema, names] of Object.entries(api.schemas)) {
    const mine = fields[schema];
    assert.ok(mine, `schema ${schema} is not covered: add its type and its FIELDS entry`);
    for (const n of names) assert.ok(mine.includes(n), `${schema}.${n} is not covered: add it to the type and to FIELDS`);
  }
});
