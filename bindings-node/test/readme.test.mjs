// The README's Node examples are examples/quickstart.ts and examples/server.ts, which dev-env
// type-checks.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import { ROOT } from "./servers.mjs";

test("the README's Node example is examples/quickstart.ts", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const example = readFileSync(join(ROOT, "bindings-node", "examples", "quickstart.ts"), "utf8");
  const block = /```ts\n(import \{ TasksClient \} from "mcp-tasks";[\s\S]*?)```/.exec(readme);
  assert.ok(block, "README has the Node example");
  assert.equal(block[1], example);
});

test("the README's TypeScript server example is examples/server.ts", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const example = readFileSync(join(ROOT, "bindings-node", "examples", "server.ts"), "utf8");
  const block = /```ts\n(import http from "node:http";[\s\S]*?)```/.exec(readme);
  assert.ok(block, "README has the TypeScript server example");
  assert.equal(block[1], example);
});
