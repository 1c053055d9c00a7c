// The README's examples are files that run: each block below must appear in README.md verbatim,
// fenced, as the file is (dev-env type-checks the TypeScript ones; examples.test.mjs runs them).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import { ROOT } from "./servers.mjs";

const readme = readFileSync(join(ROOT, "README.md"), "utf8");

for (const [path, fence] of [
  ["bindings-node/examples/quickstart.ts", "ts"],
  ["bindings-node/examples/server.ts", "ts"],
  ["bindings-node/examples/stdio.ts", "ts"],
  ["core/examples/stdio_client.rs", "rust"],
  ["bindings-python/examples/stdio_client.py", "python"],
]) {
  test(`the README shows ${path} as it is`, () => {
    const example = readFileSync(join(ROOT, path), "utf8");
    assert.ok(readme.includes("```" + fence + "\n" + example + "```"), `README.md lacks ${path} verbatim`);
  });
}
