// Memory per in-flight tool call of TypeScript servers, side by side in one run (a benchmark,
// not a test; docs/BENCHMARKS.md quotes it):
//
//   bindings-node/bench/memory [--calls 3000] [--rounds 3]
//
// Each configuration runs in a fresh Node process (`--expose-gc`) on a fresh SQLite file,
// in-process through the fetch face (no sockets, so nothing of the HTTP client is counted), with the fixture tools
// (`test/fixture-server.mjs`, an `McpServer` built per exchange, as `createMcpHandler` does):
//
//   sdk    `createMcpHandler` alone: a synchronous call of `slow_compute` that sleeps;
//   sync   the same call through `mcp-tasks/server` (a client that did not declare tasks: the
//          SDK serves it);
//   task   the same call from a client that declared tasks: a task whose tool sleeps (it takes
//          the SDK's context: the SDK's dispatch on the factory's one server);
//   exchange the same with a factory that reads the request context, `(ctx) => fixtureServer()`
//          (an SDK exchange, and a server, per task);
//   plain  the same as task with `slow_compute_plain`, its twin that takes no context (its
//          callback runs directly);
//   native core's part of a task alone (`NativeServer.handle` creating tasks nobody runs).
//
// For each: the V8 heap and the RSS per call in flight, after full garbage collections, with
// `--calls` calls in flight over a warm process; and for tasks, the RSS after each of
// `--rounds` rounds (all tasks finished), to tell a high-water mark from a leak, the V8 heap then,
// and the RSS after the process has idled 20 s more.

import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    calls: { type: "string", default: "3000" },
    rounds: { type: "string", default: "3" },
    mode: { type: "string" },
  },
});
const calls = Number(args.calls);
const rounds = Number(args.rounds);
// The tool sleeps long enough for every call to be in flight when memory is read.
const SLEEP_S = 8 + calls / 500;

const caps = { extensions: { "io.modelcontextprotocol/tasks": {} } };
const envelope = (declared) => ({
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": declared ? caps : {},
  "io.modelcontextprotocol/clientInfo": { name: "mcp-tasks-bench", version: "0" },
});
const callBody = (id, declared, tool = "slow_compute") =>
  JSON.stringify({
    jsonrpc: "2.0",
    id,
    method: "tools/call",
    params: { name: tool, arguments: { seconds: SLEEP_S, label: `call${id}` }, _meta: envelope(declared) },
  });
const headers = (tool = "slow_compute") => ({
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  "mcp-protocol-version": "2026-07-28",
  "mcp-method": "tools/call",
  "mcp-name": tool,
});

/** Heap and RSS after full collections (bytes). */
function measure() {
  globalThis.gc();
  globalThis.gc();
  const { heapUsed, heapTotal, external, rss } = process.memoryUsage();
  return { heap: heapUsed, heapTotal, external, rss };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
/** How long the process idles after its last round before its RSS is read again. */
const IDLE_S = 20;

/** One configuration, in this (child) process: prints one JSON line. */
async function child(mode) {
  // The default store, in a fresh file: finished tasks leave memory (on `memory://` they stay
  // until purged, which would read as growth across rounds).
  const dir = mkdtempSync(join(tmpdir(), "mcp-tasks-memory-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  const store = `sqlite://${join(dir, "tasks.db")}`;
  if (mode === "native") {
    const native = createRequire(import.meta.url)(join(here, "..", `mcp-tasks.${process.platform}-${process.arch}-gnu.node`));
    const server = await native.NativeServer.open(JSON.stringify({ store }), "forbidden", null, null);
    server.configure("slow_compute", "optional", "{}", false);
    const flat = Object.entries(headers()).flat();
    const held = [];
    const create = (id) => held.push(server.handle("POST", flat, Buffer.from(callBody(id, true)), "anonymous"));
    for (let i = 0; i < 100; i++) create(i);
    const before = measure();
    for (let i = 0; i < calls; i++) create(100 + i);
    const during = measure();
    if (!held.every((reply) => reply.task instanceof native.NativeTask)) throw new Error("a call did not become a task");
    console.log(JSON.stringify({ mode, before, during }));
    return;
  }
  const { createMcpHandler } = await import("@modelcontextprotocol/server");
  const { fixtureServer, openTasks } = await import("../test/fixture-server.mjs");
  const tasks = mode === "sdk" ? undefined : await openTasks(store);
  const handler =
    tasks === undefined
      ? createMcpHandler(fixtureServer, { legacy: "stateless" })
      : tasks.handler(mode === "exchange" ? (_ctx) => fixtureServer() : fixtureServer, { legacy: "stateless" });
  const declared = mode === "task" || mode === "plain" || mode === "exchange";
  const tool = mode === "plain" ? "slow_compute_plain" : "slow_compute";
  let id = 0;
  const call = async () => {
    const request = new Request("http://127.0.0.1/mcp", { method: "POST", headers: headers(tool), body: callBody(++id, declared, tool) });
    const text = await (await handler.fetch(request)).text();
    const expected = declared ? '"resultType":"task"' : "Computed call";
    if (!text.includes(expected)) throw new Error(`${mode}: unexpected answer ${text.slice(0, 200)}`);
  };
  // Warm-up: code compiled, caches and pools filled once.
  await Promise.all(Array.from({ length: 100 }, call));
  await tasks?.drain();
  const before = measure();
  const after = [];
  let during;
  for (let round = 0; round < (declared ? rounds : 1); round++) {
    const answered = Array.from({ length: calls }, call);
    // Synchronous calls answer when their tool ends; tasks answer at once and run on.
    if (declared) await Promise.all(answered);
    await sleep(2000);
    const now = measure();
    during ??= now;
    await Promise.all(answered);
    await tasks?.drain();
    after.push(measure().rss);
  }
  // Then idle, with no collection forced: what V8 gives back of its own accord (its memory
  // reducer runs when the process is idle) and what the process keeps.
  const heapAfter = measure().heap;
  await sleep(IDLE_S * 1000);
  const idle = process.memoryUsage().rss;
  console.log(JSON.stringify({ mode, before, during, after, heapAfter, idle }));
  process.exit(0);
}

if (args.mode !== undefined) {
  await child(args.mode);
} else {
  const rows = [];
  for (const mode of ["sdk", "sync", "exchange", "task", "plain", "native"]) {
    const run = spawnSync(
      process.execPath,
      ["--expose-gc", fileURLToPath(import.meta.url), "--mode", mode, "--calls", String(calls), "--rounds", String(rounds)],
      { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], timeout: 600_000 },
    );
    if (run.status !== 0) throw new Error(`${mode} exited with ${run.status}`);
    rows.push(JSON.parse(run.stdout.trim().split("\n").at(-1)));
  }
  const per = (a, b) => Math.round((b - a) / calls).toLocaleString("en-US");
  const mib = (bytes) => (bytes / 1048576).toFixed(1);
  console.log(`${calls} calls in flight; memory per call in flight (after full GCs)`);
  console.log(
    `| configuration | V8 heap per call | RSS per call | RSS warm → in flight → after each round (MiB) | V8 heap warm → after (MiB) | RSS after ${IDLE_S} s idle (MiB) |`,
  );
  console.log("|---|---|---|---|---|---|");
  const names = {
    sdk: "SDK alone (`createMcpHandler`), synchronous call",
    sync: "`mcp-tasks/server`, synchronous call (SDK serves it)",
    exchange: "`mcp-tasks/server`, task of a tool that takes ctx, factory takes ctx (an SDK exchange)",
    task: "`mcp-tasks/server`, task of a tool that takes ctx (the SDK's dispatch, one server)",
    plain: "`mcp-tasks/server`, task of a ctx-free tool (its callback run directly)",
    native: "core's part of a task (`NativeServer.handle`)",
  };
  for (const row of rows) {
    const after = row.after === undefined ? "" : ` → ${row.after.map(mib).join(" → ")}`;
    const heap = row.heapAfter === undefined ? "–" : `${mib(row.before.heap)} → ${mib(row.heapAfter)}`;
    const idle = row.idle === undefined ? "–" : mib(row.idle);
    console.log(
      `| ${names[row.mode]} | ${per(row.before.heap, row.during.heap)} B | ${per(row.before.rss, row.during.rss)} B | ${mib(row.before.rss)} → ${mib(row.during.rss)}${after} | ${heap} | ${idle} |`,
    );
  }
}
