// Replays the shared vectors (tests/vectors) from the client side through the native protocol
// layer, as core/tests/vectors.rs does in Rust: every server answer a vector records is fed to
// classifyToolsCall and to one TaskDriver per task, which must accept it and end with an
// outcome consistent with the last state seen. (The vectors script a server; a client package
// replays the answers, not the requests.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

import { protocol, InvalidParamsError } from "../dist/index.js";
import { ROOT } from "./servers.mjs";

const dir = join(ROOT, "tests", "vectors");
const files = readdirSync(dir).filter((f) => f.endsWith(".json") && f !== "skip.json").sort();
const skips = JSON.parse(readFileSync(join(dir, "skip.json"), "utf8")).skips.filter((s) => s.runner === "node");

test("the vectors are all here", () => {
  assert.ok(files.length >= 10, `only ${files.length} vectors in ${dir}`);
  assert.deepEqual(skips, [], "the Node runner skips nothing");
});

let total = 0;
for (const file of files) {
  test(`vector ${file}`, () => {
    const vector = JSON.parse(readFileSync(join(dir, file), "utf8"));
    let now = vector.start_ms;
    const drivers = new Map();
    let checked = 0;
    for (const step of vector.steps) {
      if (step.advance_ms) now += step.advance_ms;
      if (step.events) {
        for (const message of step.events.expect) {
          if (message.method === "notifications/tasks") {
            drivers.get(message.params.taskId)?.handleNotification(now, message.params);
            checked++;
          }
        }
        continue;
      }
      if (!step.send) continue;
      const body = step.expect.body;
      const declared = step.tasks ?? true;
      const method = step.send.method;
      if (method === "tools/call" && body.result) {
        const classified = protocol.classifyToolsCall(body.result, declared);
        if (body.result.resultType === "task") {
          assert.equal(classified.kind, "task");
          drivers.set(classified.task.taskId, new protocol.TaskDriver(body.result, now));
          // The same answer to a client that did not declare the extension is refused.
          assert.throws(() => protocol.classifyToolsCall(body.result, false), InvalidParamsError);
        } else {
          assert.notEqual(classified.kind, "task");
        }
        checked++;
      } else if (method === "tasks/get" && body.result) {
        drivers.get(body.result.taskId)?.handleGet(now, body.result);
        checked++;
      } else if (method === "tasks/get" && body.error) {
        const driver = drivers.get(step.send.params.taskId);
        if (driver) {
          const known = driver.outcome() !== null;
          driver.handleGetError(now, { ...body.error, message: "from the vector" });
          if (body.error.code === -32602 && !known) assert.deepEqual(driver.outcome(), { kind: "gone" });
        }
        checked++;
      }
    }
    for (const [id, driver] of drivers) {
      let event;
      while ((event = driver.pollEvent()) !== null) {
        if (event.kind !== "finished") continue;
        const status = driver.latest().status;
        const consistent = {
          completed: status === "completed",
          failed: status === "failed",
          cancelled: status === "cancelled",
          gone: true,
          expired: true,
        }[event.outcome.kind];
        assert.ok(consistent, `${file} ${id}: outcome ${event.outcome.kind} with last status ${status}`);
      }
    }
    total += checked;
  });
}

test("the replay checked the vectors' answers", () => {
  // tools/call and tasks/get answers and task notifications (51 in the 11 vectors of this writing).
  assert.ok(total >= 50, `only ${total} messages checked`);
});

test("a TaskDriver asks for tasks/get at the server's pace", () => {
  const created = {
    resultType: "task", taskId: "t-1", status: "working", createdAt: "2026-09-01T12:00:00.000Z",
    lastUpdatedAt: "2026-09-01T12:00:00.000Z", ttlMs: 60000, pollIntervalMs: 500,
  };
  const start = Date.parse(created.createdAt);
  const driver = new protocol.TaskDriver(created, start);
  assert.equal(driver.pollOutgoing(), null);
  assert.equal(driver.pollTimeout(), start + 500);
  driver.handleTimeout(start + 500);
  assert.deepEqual(driver.pollOutgoing(), { method: "tasks/get", params: { taskId: "t-1" } });
  driver.handleGet(start + 510, { ...created, resultType: "complete", status: "completed",
    lastUpdatedAt: "2026-09-01T12:00:00.510Z", result: { content: [], resultType: "complete" } });
  const events = [];
  let event;
  while ((event = driver.pollEvent()) !== null) events.push(event.kind);
  assert.deepEqual(events, ["status", "finished"]);
  assert.equal(driver.outcome().kind, "completed");
});
