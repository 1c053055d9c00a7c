// The servers of bench/run, one per process: `node servers.mjs KIND PORT`, KIND one of
//   sqlite   McpServer + mcp-tasks/server on its default store (SQLite, a fresh file)
//   memory   the same on memory:// (not durable), to separate the store's cost from the glue's
//   ctx      the same as sqlite with a tool that takes the SDK's context, `async (ctx) => ...`
//            (its tasks run through the SDK's dispatch on the factory's one server)
//   exchange the same as ctx with a factory that reads the request context, `(ctx) => ...` (its
//            tasks run in an exchange with the SDK's handler, a server made per task)
//   baseline a hand-written in-memory tasks server on the same SDK (a Map, no durability, no
//            TTL, no checks beyond the declaration), written here only as the baseline; it
//            hands the SDK the message it parsed (`parsedBody`), as mcp-tasks/server does
// Each serves one task tool, `noop` (returns at once, declares no parameter but for `ctx`), on
// 127.0.0.1:PORT/mcp over node:http,
// and prints "listening on ..." once it accepts.
import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { McpServer, createMcpHandler } from "@modelcontextprotocol/server";

import { TasksServer } from "../dist/server.js";

const [kind, port] = process.argv.slice(2);
const POLL_MS = 50;

const answer = () => ({ content: [{ type: "text", text: "ok" }] });
const noop = kind === "ctx" || kind === "exchange" ? async (_ctx) => answer() : async () => answer();

function factory() {
  const server = new McpServer({ name: "bench", version: "1.0.0" });
  server.registerTool("noop", { description: "Returns at once." }, noop);
  server.server.registerCapabilities({ extensions: { "io.modelcontextprotocol/tasks": {} } });
  return server;
}

/** The baseline: tasks in a Map in front of the SDK's own handler, the tool run through it. */
function baseline() {
  const sdk = createMcpHandler(factory, { legacy: "reject" });
  const tasks = new Map();
  const declares = (params) =>
    params?._meta?.["io.modelcontextprotocol/clientCapabilities"]?.extensions?.["io.modelcontextprotocol/tasks"] !== undefined;
  const reply = (id, result) => Response.json({ jsonrpc: "2.0", id, result });
  return async (request) => {
    const body = await request.text();
    const message = JSON.parse(body);
    if (message.method === "tools/call" && message.params?.name === "noop" && declares(message.params)) {
      const now = new Date().toISOString();
      const task = { taskId: randomUUID(), status: "working", createdAt: now, lastUpdatedAt: now, ttlMs: 3_600_000, pollIntervalMs: POLL_MS };
      tasks.set(task.taskId, task);
      // The SDK's documented way to pass a body already parsed (it then reads no body).
      const run = new Request(request.url, { method: "POST", headers: request.headers });
      void sdk.fetch(run, { parsedBody: message }).then(async (response) => {
        const answer = await response.json();
        Object.assign(task, answer.error ? { status: "failed", error: answer.error } : { status: "completed", result: answer.result });
        task.lastUpdatedAt = new Date().toISOString();
      });
      return reply(message.id, { resultType: "task", ...task });
    }
    if (message.method === "tasks/get") {
      const task = tasks.get(message.params?.taskId);
      if (task === undefined) return Response.json({ jsonrpc: "2.0", id: message.id, error: { code: -32602, message: "unknown task" } }, { status: 400 });
      return reply(message.id, { resultType: "complete", ...task });
    }
    return sdk.fetch(new Request(request.url, { method: request.method, headers: request.headers }), { parsedBody: message });
  };
}

/** node:http in front of a fetch handler (what the baseline needs; mcp-tasks/server has its own). */
function nodeFace(fetchFace) {
  return async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const headers = new Headers();
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
    const request = new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers, body: Buffer.concat(chunks) });
    const response = await fetchFace(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  };
}

let listener;
if (kind === "baseline") {
  listener = nodeFace(baseline());
} else {
  const store = kind === "memory" ? "memory://" : `sqlite:///${join(mkdtempSync(join(tmpdir(), "mcp-tasks-bench-")), "tasks.db")}`;
  const tasks = await TasksServer.open({ store, tools: { noop: { mode: "optional", pollIntervalMs: POLL_MS } } });
  listener = tasks.handler(kind === "exchange" ? (_ctx) => factory() : factory).node;
}
http.createServer(listener).listen(Number(port), "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${port}/mcp`));
