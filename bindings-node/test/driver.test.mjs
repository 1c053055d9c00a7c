// The whole sans-IO TaskDriver of core through the Node binding: acknowledgements (a stop-mode
// cancel confirmed, Gone, answers resent after a failed update) and state/resume.
import { test } from "node:test";
import assert from "node:assert/strict";

import { protocol } from "../dist/index.js";

const created = {
  resultType: "task", taskId: "t1", status: "working", createdAt: "2026-09-01T12:00:00.000Z",
  lastUpdatedAt: "2026-09-01T12:00:00.000Z", ttlMs: 60000, pollIntervalMs: 500,
};
const t0 = Date.parse(created.createdAt);
const asking = {
  ...created, resultType: "complete", status: "input_required", lastUpdatedAt: "2026-09-01T12:00:00.010Z",
  inputRequests: { k: { method: "elicitation/create", params: { message: "ok?" } } },
};

function events(driver) {
  const out = [];
  for (let e = driver.pollEvent(); e !== null; e = driver.pollEvent()) out.push(e);
  return out;
}

test("handleAck confirms a stop-mode cancel", () => {
  const driver = new protocol.TaskDriver(created, t0);
  driver.cancel("stop");
  assert.deepEqual(driver.pollOutgoing(), { method: "tasks/cancel", params: { taskId: "t1" } });
  assert.equal(driver.outcome(), null);
  driver.handleAck(t0 + 1, "tasks/cancel", null);
  assert.deepEqual(driver.outcome(), { kind: "cancelled" });
});

test("handleAck with -32602 ends the task Gone", () => {
  const driver = new protocol.TaskDriver(created, t0);
  driver.cancel("observe");
  driver.pollOutgoing();
  driver.handleAck(t0 + 1, "tasks/cancel", { code: -32602, message: "Task not found: t1" });
  assert.deepEqual(driver.outcome(), { kind: "gone" });
});

test("answers of a failed update are sent again", () => {
  const driver = new protocol.TaskDriver(created, t0);
  driver.handleGet(t0 + 10, asking);
  assert.ok(events(driver).some((e) => e.kind === "input_requested" && e.key === "k"));
  driver.answer("k", { action: "accept", content: {} });
  const first = driver.pollOutgoing();
  assert.equal(first.method, "tasks/update");
  driver.handleAck(t0 + 20, "tasks/update", { code: -32603, message: "store down" });
  const again = driver.pollOutgoing();
  assert.deepEqual(again, first, "the same answers go out again");
  driver.handleAck(t0 + 30, "tasks/update", null);
  assert.equal(driver.pollOutgoing(), null, "nothing more once acknowledged");
});

test("state() survives a restart through TaskDriver.resume", () => {
  const driver = new protocol.TaskDriver(created, t0);
  driver.handleGet(t0 + 10, asking);
  events(driver);
  driver.answer("k", { action: "accept", content: {} });
  const state = JSON.parse(JSON.stringify(driver.state()));
  assert.equal(state.task_id, "t1");
  assert.deepEqual(state.answered_keys, ["k"]);
  const resumed = protocol.TaskDriver.resume(state, t0 + 1000);
  assert.equal(resumed.taskId, "t1");
  assert.equal(resumed.latest().status, "input_required");
  assert.throws(() => resumed.answer("k", {}), /already answered/);
});
