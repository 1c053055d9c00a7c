// Does a finished task leave anything behind in the JavaScript heap? Run with --expose-gc:
//   node --expose-gc test/heap-check.mjs [ROUNDS] [WARMUP] [IN_FLIGHT]
// Serves an McpServer with task tools on the default store (SQLite, a fresh file) over
// loopback HTTP and drives rounds of five tasks, one down each way a task ends: completed,
// completed as a tool error (a thrown Error), failed (a thrown ProtocolError), cancelled
// through tasks/cancel (the tool waiting on its AbortSignal), and completed after an input
// request answered through tasks/update. It reads the heap after a full collection once the
// warm-up rounds are done and again after the measured rounds. Then it starts IN_FLIGHT `wait`
// tasks and reads the heap with them all running. It prints one JSON line (bytes):
// {"tasks", "before", "after", "perTask", "inFlight", "perInFlightTask"}. test/leak.test.mjs
// runs it; docs/BENCHMARKS.md quotes it.
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { McpServer, ProtocolError } from "@modelcontextprotocol/server";

import { TasksServer, currentTask } from "../dist/server.js";
import { callDeclaring } from "./servers.mjs";

const [rounds, warmup, inFlight] = [1500, 300, 2000].map((fallback, i) => Number(process.argv[2 + i] ?? fallback));
const LANES = 16;

const dir = mkdtempSync(join(tmpdir(), "mcp-tasks-heap-"));
const tasks = await TasksServer.open({
  store: `sqlite:///${join(dir, "tasks.db")}`,
  tools: { ok: "required", boom: "required", refuse: "required", wait: "required", ask: "required" },
});
const handler = tasks.handler(() => {
  const s = new McpServer({ name: "heap-check", version: "1.0.0" });
  s.registerTool("ok", {}, async () => ({ content: [{ type: "text", text: "ok" }] }));
  s.registerTool("boom", {}, async () => {
    throw new Error("plain failure");
  });
  s.registerTool("refuse", {}, async () => {
    throw new ProtocolError(-32099, "refused");
  });
  s.registerTool("wait", {}, async (ctx) => {
    const { signal } = currentTask(ctx);
    // A cancel may land before the tool starts: an aborted signal fires no more events.
    await new Promise((resolve) => (signal.aborted ? resolve() : signal.addEventListener("abort", resolve, { once: true })));
    return { content: [] };
  });
  s.registerTool("ask", {}, async (ctx) => {
    const answers = await currentTask(ctx).requestInput({
      pick: { method: "elicitation/create", params: { mode: "form", message: "Pick?", requestedSchema: { type: "object", properties: {} } } },
    });
    return { content: [{ type: "text", text: answers.pick.action }] };
  });
  return s;
});
const server = http.createServer(handler.node);
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${server.address().port}/mcp`;

async function call(method, params) {
  const answer = await callDeclaring(url, method, params);
  if (answer.error !== undefined) throw new Error(`${method}: ${JSON.stringify(answer.error)}`);
  return answer.result;
}
const create = async (tool) => (await call("tools/call", { name: tool, arguments: {} })).taskId;
const get = (taskId) => call("tasks/get", { taskId });
async function until(taskId, done) {
  for (let i = 0; i < 2000; i++) {
    const task = await get(taskId);
    if (done(task.status)) return task;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`task ${taskId} never reached the awaited status`);
}
const terminal = (status) => ["completed", "failed", "cancelled"].includes(status);

/** One task down each way a task ends; throws unless each ends as it should. */
async function round() {
  const expect = async (taskId, status) => {
    const task = await until(taskId, terminal);
    if (task.status !== status) throw new Error(`task ${taskId} ended ${task.status}, not ${status}`);
  };
  const waiting = await create("wait");
  await call("tasks/cancel", { taskId: waiting });
  const asking = await create("ask");
  await until(asking, (status) => status === "input_required");
  await call("tasks/update", { taskId: asking, inputResponses: { pick: { action: "decline" } } });
  await Promise.all([
    create("ok").then((id) => expect(id, "completed")),
    create("boom").then((id) => expect(id, "completed")),
    create("refuse").then((id) => expect(id, "failed")),
    expect(waiting, "cancelled"),
    expect(asking, "completed"),
  ]);
}

async function drive(count) {
  let left = count;
  const lane = async () => {
    while (left-- > 0) await round();
  };
  await Promise.all(Array.from({ length: LANES }, lane));
}

/** Heap in use after full collections; the least of a few readings, as a collection may leave
 * a little floating garbage behind. */
async function heap() {
  let least = Infinity;
  for (let i = 0; i < 3; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    globalThis.gc();
    globalThis.gc();
    least = Math.min(least, process.memoryUsage().heapUsed);
  }
  return least;
}

await drive(warmup);
const before = await heap();
await drive(rounds);
const after = await heap();
const count = rounds * 5;
// Tasks in flight: each holds its run (the SDK's dispatch of its call: the tool takes ctx) until cancelled.
const running = [];
for (let i = 0; i < inFlight; i += LANES) {
  running.push(...(await Promise.all(Array.from({ length: Math.min(LANES, inFlight - i) }, () => create("wait")))));
}
const busy = await heap();
for (const taskId of running) await call("tasks/cancel", { taskId });
const perInFlightTask = (busy - after) / inFlight;
console.log(JSON.stringify({ tasks: count, before, after, perTask: (after - before) / count, inFlight, perInFlightTask }));
server.closeAllConnections();
await new Promise((resolve) => server.close(resolve));
await handler.close();
await tasks.drain();
tasks.close();
rmSync(dir, { recursive: true, force: true });
