// The error classes of the package are core's ERROR_CLASSES: the same names, parents, codes and
// docs as in Python and Swift, nothing more and nothing less; a transport failure keeps its
// cause chain.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import * as pkg from "../dist/index.js";
import { ROOT } from "./servers.mjs";

const native = createRequire(import.meta.url)(
  join(ROOT, "bindings-node", `mcp-tasks.${process.platform}-${process.arch}-gnu.node`),
);
const table = JSON.parse(native.errorClasses());

test("every class of the core table is exported as described", () => {
  const exported = Object.entries(pkg).filter(([, v]) => typeof v === "function" && (v === pkg.McpTaskError || v.prototype instanceof pkg.McpTaskError));
  assert.deepEqual(exported.map(([n]) => n).sort(), table.map((row) => row.name).sort());
  assert.deepEqual(Object.keys(pkg.ERROR_CLASSES).sort(), table.map((row) => row.name).sort());
  const source = readFileSync(join(ROOT, "bindings-node", "ts", "errors.ts"), "utf8");
  for (const row of table) {
    const Class = pkg[row.name];
    if (row.parent === null) {
      assert.equal(Object.getPrototypeOf(Class), Error, "the root extends Error");
    } else {
      assert.equal(Object.getPrototypeOf(Class), pkg[row.parent], `${row.name} extends ${row.parent}`);
    }
    assert.equal(Class.CODE, row.code, `${row.name}.CODE`);
    assert.ok(source.includes(`/** ${row.doc} */\nexport class ${row.name} `), `${row.name}'s doc comment is the table's`);
  }
});

test("native errors become the class core names, with code, data and causes", async () => {
  const client = new pkg.TasksClient({ url: "http://127.0.0.1:1/mcp", store: "memory://" });
  await assert.rejects(client.callTool("anything", {}), (error) => {
    assert.ok(error instanceof pkg.TransportError, String(error));
    assert.ok(error instanceof pkg.InternalError);
    assert.equal(error.code, -32603);
    const causes = [];
    for (let cause = error.cause; cause !== undefined; cause = cause.cause) causes.push(String(cause.message));
    assert.ok(causes.some((c) => /refused/i.test(c)), causes.join(" <- "));
    return true;
  });
  await assert.rejects(new pkg.TasksClient({ url: "http://127.0.0.1:1/mcp", pollMs: 5 }).callTool("x"), pkg.InvalidParamsError);
});

test("outcomes that are no result throw their typed errors", () => {
  for (const [kind, Class] of [["cancelled", pkg.TaskCancelledError], ["gone", pkg.TaskGoneError], ["expired", pkg.TaskExpiredError]]) {
    assert.throws(() => native.outcomeResult(JSON.stringify({ kind }), "t1"), (e) => {
      const error = pkg.toError(e);
      assert.ok(error instanceof Class, `${kind}: ${error}`);
      return true;
    });
  }
  const gone = pkg.toError((() => { try { native.outcomeResult('{"kind":"gone"}', "t1"); } catch (e) { return e; } })());
  assert.ok(gone instanceof pkg.TaskNotFoundError && gone.code === -32602);
});
