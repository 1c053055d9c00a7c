// A finished task leaves nothing behind in the JavaScript heap: test/heap-check.mjs (in a
// process of its own, started with --expose-gc) drives 7,500 tasks down every way a task ends
// on the default SQLite store and reads the heap after full collections before and after.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

test("finished tasks do not grow the heap (completed, tool error, failed, cancelled, input answered)", async () => {
  const output = await new Promise((resolve, reject) => {
    execFile(process.execPath, ["--expose-gc", join(here, "heap-check.mjs"), "1500", "300", "500"], { timeout: 180_000 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout),
    );
  });
  const measured = JSON.parse(output.trim().split("\n").at(-1));
  assert.equal(measured.tasks, 7500);
  // A task's record or its run kept alive would be a kilobyte or more each; a collection's
  // leftovers measured within ±10 B per task over this many.
  assert.ok(measured.perTask < 256, `the heap grew by ${measured.perTask.toFixed(1)} B per finished task: ${output}`);
  // The in-flight reading is a figure (docs/BENCHMARKS.md's), not a check; it must at least be a reading.
  assert.ok(measured.perInFlightTask > 0, output);
});
