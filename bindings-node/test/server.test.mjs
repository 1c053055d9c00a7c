// mcp-tasks/server: an McpServer of @modelcontextprotocol/server 2.x with task tools, served
// in-process over loopback HTTP and driven with raw JSON-RPC, so every wire answer is checked.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { McpServer, ProtocolError, inputRequired } from "@modelcontextprotocol/server";
import * as z from "zod";

import { METRICS_CONTENT_TYPE, TasksServer, currentTask } from "../dist/server.js";
import { EXTENSION_ID, PROTOCOL_VERSION, QuotaExceededError, TasksClient } from "../dist/index.js";
import { nodeServer, freePort } from "./servers.mjs";

/** A JSON-RPC client speaking the stateless 2026-07-28 wire with or without the extension. */
function rpc(url, { declare = true, authorization = "Bearer alice" } = {}) {
  let next = 0;
  const meta = () => ({
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientCapabilities": declare
      ? { extensions: { [EXTENSION_ID]: {} }, elicitation: { form: {} } }
      : { elicitation: { form: {} } },
  });
  const post = async (method, params = {}, name = undefined) => {
    const headers = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": PROTOCOL_VERSION,
      "mcp-method": method,
      authorization,
    };
    const named = name ?? params.name ?? params.taskId;
    if (named !== undefined) headers["mcp-name"] = named;
    const body = JSON.stringify({ jsonrpc: "2.0", id: ++next, method, params: { ...params, _meta: meta() } });
    return fetch(url, { method: "POST", headers, body });
  };
  const call = async (method, params, name) => {
    const response = await post(method, params, name);
    const text = await response.text();
    const line = text.startsWith("event:") ? text.split("\n").find((l) => l.startsWith("data: ")).slice(6) : text;
    return { status: response.status, ...JSON.parse(line) };
  };
  return { post, call };
}

async function until(read, done, { tries = 400, ms = 25 } = {}) {
  for (let i = 0; i < tries; i++) {
    const value = await read();
    if (done(value)) return value;
    await new Promise((r) => setTimeout(r, ms));
  }
  throw new Error("condition never reached");
}

const getTask = (client, taskId) => client.call("tasks/get", { taskId });
const finished = (answer) => ["completed", "failed", "cancelled"].includes(answer.result?.status);

describe("an McpServer with task tools", () => {
  let tasks;
  let handler;
  let server;
  let url;
  const seen = { aborted: [], sdkAborted: [], principals: [] };

  before(async () => {
    tasks = await TasksServer.open({
      store: "memory://",
      tools: {
        sleepy: { mode: "optional", pollIntervalMs: 50 },
        ask: "required",
        boom: "optional",
        refuse: "optional",
        refused: { mode: "required", prepare: () => { throw new ProtocolError(-32602, "no, not now"); } },
      },
    });
    handler = tasks.handler(() => {
      const s = new McpServer({ name: "under-test", version: "1.0.0" });
      s.registerTool("sleepy", { inputSchema: z.object({ ms: z.number() }) }, async ({ ms }, ctx) => {
        const task = currentTask(ctx);
        if (task !== undefined) {
          seen.principals.push(task.principal);
          await task.setStatus("sleeping");
          task.signal.addEventListener("abort", () => seen.aborted.push(task.taskId));
          ctx.mcpReq.signal.addEventListener("abort", () => seen.sdkAborted.push(task.taskId));
        }
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, ms);
          task?.signal.addEventListener("abort", () => (clearTimeout(timer), resolve()));
        });
        return { content: [{ type: "text", text: task === undefined ? "slept (no task)" : `slept in ${task.taskId}` }] };
      });
      s.registerTool("ask", {}, async (ctx) => {
        const answers = await currentTask(ctx).requestInput({
          color: { method: "elicitation/create", params: { mode: "form", message: "Color?", requestedSchema: { type: "object", properties: { c: { type: "string" } } } } },
        });
        return { content: [{ type: "text", text: `color ${answers.color.content.c}` }] };
      });
      s.registerTool("boom", {}, async () => {
        throw new Error("plain failure");
      });
      s.registerTool("refuse", {}, async () => {
        throw new ProtocolError(-32099, "refused at the protocol level", { why: "test" });
      });
      s.registerTool("refused", {}, async () => ({ content: [] }));
      s.registerResource("readme", "file:///readme", { mimeType: "text/plain" }, async (uri) => ({
        contents: [{ uri: uri.href, text: "read me" }],
      }));
      return s;
    });
    server = http.createServer(handler.node);
    const port = await freePort();
    await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${port}/mcp`;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await handler.close();
    await tasks.drain();
    tasks.close();
  });

  test("a task is polled to its result, and its status message is seen", async () => {
    const client = rpc(url);
    const created = await client.call("tools/call", { name: "sleepy", arguments: { ms: 200 } });
    assert.equal(created.result.resultType, "task", JSON.stringify(created));
    const taskId = created.result.taskId ?? created.result.task?.taskId;
    assert.ok(taskId);
    const working = await until(() => getTask(client, taskId), (a) => a.result?.statusMessage === "sleeping");
    assert.equal(working.result.status, "working");
    const done = await until(() => getTask(client, taskId), finished);
    assert.equal(done.result.status, "completed");
    assert.equal(done.result.result.content[0].text, `slept in ${taskId}`);
    assert.equal(done.result.result.resultType, "complete");
    assert.equal(seen.principals.at(-1), "anonymous");
  });

  test("a non-declaring client gets a plain result from the SDK", async () => {
    const answer = await rpc(url, { declare: false }).call("tools/call", { name: "sleepy", arguments: { ms: 1 } });
    assert.equal(answer.result.resultType, "complete");
    assert.equal(answer.result.content[0].text, "slept (no task)");
  });

  test("tasks/cancel reaches the tool's AbortSignal and the SDK's", async () => {
    const client = rpc(url);
    const created = await client.call("tools/call", { name: "sleepy", arguments: { ms: 30_000 } });
    const taskId = created.result.taskId ?? created.result.task?.taskId;
    await until(() => getTask(client, taskId), (a) => a.result?.statusMessage === "sleeping");
    const cancelled = await client.call("tasks/cancel", { taskId });
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled));
    await until(async () => seen.aborted, (ids) => ids.includes(taskId));
    await until(async () => seen.sdkAborted, (ids) => ids.includes(taskId));
    assert.equal((await getTask(client, taskId)).result.status, "cancelled");
  });

  test("a task's input request is answered later through tasks/update", async () => {
    const client = rpc(url);
    const created = await client.call("tools/call", { name: "ask", arguments: {} });
    const taskId = created.result.taskId ?? created.result.task?.taskId;
    const asking = await until(() => getTask(client, taskId), (a) => a.result?.status === "input_required");
    assert.deepEqual(Object.keys(asking.result.inputRequests), ["color"]);
    await new Promise((r) => setTimeout(r, 100));
    const ack = await client.call("tasks/update", { taskId, inputResponses: { color: { action: "accept", content: { c: "teal" } } } });
    assert.equal(ack.status, 200, JSON.stringify(ack));
    const done = await until(() => getTask(client, taskId), finished);
    assert.equal(done.result.result.content[0].text, "color teal");
  });

  test("a thrown ProtocolError fails the task; a thrown Error completes it as a tool error", async () => {
    const client = rpc(url);
    const refuse = await client.call("tools/call", { name: "refuse", arguments: {} });
    const failed = await until(() => getTask(client, refuse.result.taskId), finished);
    assert.equal(failed.result.status, "failed");
    assert.deepEqual(failed.result.error, { code: -32099, message: "refused at the protocol level", data: { why: "test" } });
    const boom = await client.call("tools/call", { name: "boom", arguments: {} });
    const completed = await until(() => getTask(client, boom.result.taskId), finished);
    assert.equal(completed.result.status, "completed");
    assert.equal(completed.result.result.isError, true);
    assert.equal(completed.result.result.content[0].text, "plain failure");
  });

  test("a prepare that throws refuses the call before any task exists", async () => {
    const answer = await rpc(url).call("tools/call", { name: "refused", arguments: {} });
    assert.deepEqual(answer.error, { code: -32602, message: "no, not now" });
  });

  test("another principal's task is -32602, as an unknown one", async () => {
    const alice = rpc(url, { authorization: "Bearer alice" });
    const created = await alice.call("tools/call", { name: "sleepy", arguments: { ms: 1 } });
    const taskId = created.result.taskId;
    const bob = rpc(url);
    // The default principal comes from the auth info; a fetch face caller passes its own.
    const local = await TasksServer.open({ store: "memory://", tools: { sleepy: "optional" } });
    const other = local.handler(() => new McpServer({ name: "x", version: "1" }));
    const foreign = await other.fetch(
      new Request(url, {
        method: "POST",
        headers: { "content-type": "application/json", "mcp-protocol-version": PROTOCOL_VERSION, "mcp-method": "tasks/get", "mcp-name": taskId },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tasks/get", params: { taskId, _meta: { "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION, "io.modelcontextprotocol/clientCapabilities": { extensions: { [EXTENSION_ID]: {} } } } } }),
      }),
      { authInfo: { token: "t", clientId: "bob", scopes: [] } },
    );
    assert.equal((await foreign.json()).error.code, -32602);
    local.close();
    assert.equal((await bob.call("tasks/get", { taskId: "no-such-task" })).error.code, -32602);
  });

  test("the SDK still serves discovery (advertising the extension), tools/list and resources", async () => {
    const client = rpc(url);
    const discover = await client.call("server/discover", {});
    assert.deepEqual(discover.result.capabilities.extensions[EXTENSION_ID], {});
    const tools = await client.call("tools/list", {});
    assert.deepEqual(tools.result.tools.map((t) => t.name).sort(), ["ask", "boom", "refuse", "refused", "sleepy"]);
    const read = await client.call("resources/read", { uri: "file:///readme" }, "file:///readme");
    assert.equal(read.result.contents[0].text, "read me");
  });

  test("a listen for taskIds streams notifications/tasks with the full task", async () => {
    const client = rpc(url);
    const created = await client.call("tools/call", { name: "sleepy", arguments: { ms: 150 } });
    const taskId = created.result.taskId;
    const response = await client.post("subscriptions/listen", { notifications: { taskIds: [taskId] } });
    assert.equal(response.headers.get("content-type"), "text/event-stream");
    const text = await response.text();
    const messages = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
    assert.equal(messages[0].method, "notifications/subscriptions/acknowledged");
    const states = messages.filter((m) => m.method === "notifications/tasks").map((m) => m.params);
    assert.equal(states.at(-1).status, "completed");
    assert.equal(states.at(-1).taskId, taskId);
    assert.equal(states.at(-1).result.content[0].text, `slept in ${taskId}`);
    assert.ok(messages.at(-1).result, "the stream ends with the listen's result");
  });

  test("a listen whose client goes away lets its subscription go, before its task changes", async () => {
    const client = rpc(url);
    const created = await client.call("tools/call", { name: "sleepy", arguments: { ms: 60_000 } });
    const taskId = created.result.taskId;
    const streams = () => Number(/^mcp_tasks_listen_streams (\d+)$/m.exec(tasks.metrics())?.[1]);
    const before = streams();
    const response = await client.post("subscriptions/listen", { notifications: { taskIds: [taskId] } });
    const reader = response.body.getReader();
    await reader.read(); // the acknowledgement: the stream is open
    assert.equal(streams(), before + 1);
    await reader.cancel(); // the client goes away; the task keeps sleeping
    await until(async () => streams(), (n) => n === before);
    assert.equal((await getTask(client, taskId)).result.status, "working");
    await client.call("tasks/cancel", { taskId });
  });

  test("an Express-style body parser's parsed body is served", async () => {
    const port = await freePort();
    const parsed = http.createServer(async (req, res) => {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      req.body = JSON.parse(Buffer.concat(chunks).toString());
      await handler.node(req, res);
    });
    await new Promise((resolve) => parsed.listen(port, "127.0.0.1", resolve));
    try {
      const answer = await rpc(`http://127.0.0.1:${port}/mcp`).call("tools/call", { name: "sleepy", arguments: { ms: 1 } });
      assert.equal(answer.result.resultType, "task");
    } finally {
      parsed.closeAllConnections();
      await new Promise((resolve) => parsed.close(resolve));
    }
  });
});

describe("the TypeScript server killed with SIGKILL", () => {
  test("restarts on its SQLite file answering every acknowledged task, none left working", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-tasks-ts-server-"));
    const store = `sqlite:///${join(dir, "tasks.db")}`;
    const port = await freePort();
    const first = await nodeServer(store, port);
    const client = rpc(first.url);
    const acknowledged = [];
    for (let i = 0; i < 5; i++) {
      const quick = await client.call("tools/call", { name: "slow_compute", arguments: { seconds: 0, label: `q${i}` } });
      const slow = await client.call("tools/call", { name: "slow_compute", arguments: { seconds: 60, label: `s${i}` } });
      acknowledged.push(quick.result.taskId, slow.result.taskId);
    }
    // The quick ones finish before the kill; the slow ones are still working.
    await until(() => getTask(client, acknowledged[8]), finished);
    first.stop();
    await new Promise((r) => setTimeout(r, 200));
    const second = await nodeServer(store, port);
    try {
      const states = {};
      for (const taskId of acknowledged) {
        const answer = await getTask(rpc(second.url), taskId);
        assert.ok(answer.result, `${taskId}: ${JSON.stringify(answer)}`);
        states[taskId] = answer.result.status;
      }
      assert.deepEqual(
        acknowledged.map((id) => states[id]),
        acknowledged.map((_, i) => (i % 2 === 0 ? "completed" : "failed")),
      );
    } finally {
      second.stop();
    }
  });
});

describe("TypeScript workers sharing a PostgreSQL store", () => {
  const url = process.env.MCP_TASKS_PG_URL;

  test("a task made on one worker is read and cancelled through another", { skip: url === undefined && "no PostgreSQL (tests/run-all starts one)" }, async () => {
    const aborted = [];
    const worker = async () => {
      const tasks = await TasksServer.open({ store: url, tools: { wait: "optional" } });
      const handler = tasks.handler(() => {
        const s = new McpServer({ name: "worker", version: "1.0.0" });
        s.registerTool("wait", {}, async (ctx) => {
          const task = currentTask(ctx);
          await new Promise((resolve) => task.signal.addEventListener("abort", resolve));
          aborted.push(task.taskId);
          return { content: [] };
        });
        return s;
      });
      const server = http.createServer(handler.node);
      const port = await freePort();
      await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
      return { tasks, handler, server, url: `http://127.0.0.1:${port}/mcp` };
    };
    const [first, second] = [await worker(), await worker()];
    try {
      const created = await rpc(first.url).call("tools/call", { name: "wait", arguments: {} });
      const taskId = created.result.taskId;
      assert.equal((await getTask(rpc(second.url), taskId)).result.status, "working");
      const cancelled = await rpc(second.url).call("tasks/cancel", { taskId });
      assert.equal(cancelled.status, 200, JSON.stringify(cancelled));
      // The cancel reaches the work on the first worker through the store's change feed.
      await until(async () => aborted, (ids) => ids.includes(taskId), { tries: 200, ms: 25 });
      assert.equal((await getTask(rpc(first.url), taskId)).result.status, "cancelled");
    } finally {
      for (const w of [first, second]) {
        w.server.closeAllConnections();
        await new Promise((resolve) => w.server.close(resolve));
        await w.handler.close();
        await w.tasks.drain();
        w.tasks.close();
      }
    }
  });
});

test("a cap on live tasks answers the call beyond it with -32010", async () => {
  const tasks = await TasksServer.open({ store: "memory://", tools: { nap: "required" }, maxLiveTasksPerPrincipal: 1 });
  const handler = tasks.handler(() => {
    const server = new McpServer({ name: "quota", version: "1.0.0" });
    server.registerTool("nap", { description: "Sleeps." }, async () => {
      await new Promise((r) => setTimeout(r, 300));
      return { content: [{ type: "text", text: "rested" }] };
    });
    return server;
  });
  const listening = http.createServer(handler.node);
  await new Promise((r) => listening.listen(0, "127.0.0.1", r));
  try {
    const client = new TasksClient({ url: `http://127.0.0.1:${listening.address().port}/mcp`, store: "memory://" });
    const first = await client.callTool("nap", {});
    await assert.rejects(client.callTool("nap", {}), (error) => {
      assert.ok(error instanceof QuotaExceededError, String(error));
      assert.equal(error.code, -32010);
      assert.deepEqual(error.data, { reason: "principal_quota", limit: 1 });
      return true;
    });
    assert.equal((await first.value()).content[0].text, "rested");
    assert.equal((await (await client.callTool("nap", {})).value()).content[0].text, "rested");
    await client.close();
  } finally {
    listening.close();
    await tasks.close();
  }
});

test("metrics() gives core's Prometheus text for the tasks this server ran", async () => {
  const tasks = await TasksServer.open({ store: "memory://", tools: { nap: "required" } });
  const handler = tasks.handler(() => {
    const server = new McpServer({ name: "metrics", version: "1.0.0" });
    server.registerTool("nap", { description: "Answers at once." }, async () => ({ content: [{ type: "text", text: "ok" }] }));
    return server;
  });
  try {
    const created = await handler.fetch(
      new Request("http://127.0.0.1/mcp", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-protocol-version": PROTOCOL_VERSION,
          "mcp-method": "tools/call",
          "mcp-name": "nap",
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: {
            name: "nap",
            arguments: {},
            _meta: {
              "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
              "io.modelcontextprotocol/clientCapabilities": { extensions: { [EXTENSION_ID]: {} } },
            },
          },
        }),
      }),
    );
    assert.equal((await created.json()).result.resultType, "task");
    await tasks.drain();
    const text = tasks.metrics();
    assert.match(text, /^mcp_tasks_tasks_created_total\{tool="nap"\} 1$/m);
    assert.match(text, /^mcp_tasks_tasks_finished_total\{tool="nap",outcome="completed"\} 1$/m);
    assert.match(text, /^mcp_tasks_tasks_in_flight 0$/m);
    assert.ok(METRICS_CONTENT_TYPE.startsWith("application/openmetrics-text"));
  } finally {
    await tasks.close();
  }
});
