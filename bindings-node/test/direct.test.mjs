// The runs without an exchange (ts/direct.ts): a task of a tool whose callback declares no context
// runs its callback directly, and one of a tool that takes ctx runs through the SDK's dispatch
// on the factory's one server, when the factory declares no parameter. These tests fail when
// @modelcontextprotocol/server changes what those runs read, and check that every path ends a
// task the same way as an exchange, byte for byte, for every kind of answer a tool can give.
import { test } from "node:test";
import assert from "node:assert/strict";

import { McpServer, ProtocolError, UrlElicitationRequiredError, inputRequired, specTypeSchemas } from "@modelcontextprotocol/server";
import * as z from "zod";

import { TasksServer, currentTask } from "../dist/server.js";
import { callsExecutorOnly, declaresAtMost } from "../dist/direct.js";
import { EXTENSION_ID, PROTOCOL_VERSION } from "../dist/index.js";

const meta = {
  "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
  "io.modelcontextprotocol/clientCapabilities": { extensions: { [EXTENSION_ID]: {} } },
};

/** One JSON-RPC request to a handler's fetch face, with `headers` added to the standard ones;
 * resolves to the parsed answer. */
async function rpc(handler, method, params, name, authInfo, headers = {}) {
  const request = new Request("http://localhost/mcp", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": PROTOCOL_VERSION,
      "mcp-method": method,
      "mcp-name": name,
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: { ...params, _meta: meta } }),
  });
  return JSON.parse(await (await handler.fetch(request, authInfo === undefined ? {} : { authInfo })).text());
}

/** Creates a task of `name`, lets it run, and answers the task as `tasks/get` sees it, without
 * what differs between any two tasks (id, times). */
async function outcome(tasks, handler, name, args, authInfo) {
  const created = await rpc(handler, "tools/call", { name, arguments: args }, name, authInfo);
  assert.equal(created.result?.resultType, "task", JSON.stringify(created));
  await tasks.drain();
  const { taskId } = created.result;
  const read = await rpc(handler, "tasks/get", { taskId }, taskId, authInfo);
  const { taskId: _id, createdAt: _c, lastUpdatedAt: _u, ...rest } = read.result;
  return JSON.stringify(rest);
}

/** The tools of both servers: each answers one way a tool can; `ctx` makes every callback declare
 * a context parameter (the exchange's path), or none (the direct path). */
function register(server, withCtx) {
  const tool = (fn) => (withCtx ? (args, ctx) => fn(args, ctx) : (args) => fn(args));
  const bare = (fn) => (withCtx ? (ctx) => fn(ctx) : () => fn());
  server.registerTool("text", { description: "text" }, bare(async () => ({ content: [{ type: "text", text: "ok" }] })));
  server.registerTool(
    "typed",
    { inputSchema: { n: z.number() }, outputSchema: { v: z.number() } },
    tool(async ({ n }) => ({ structuredContent: { v: n } })),
  );
  server.registerTool(
    "badOutput",
    { inputSchema: { n: z.number() }, outputSchema: { v: z.string() } },
    tool(async ({ n }) => ({ structuredContent: { v: n } })),
  );
  server.registerTool("throws", { inputSchema: { n: z.number() } }, tool(async () => { throw new Error("it broke"); }));
  server.registerTool(
    "refuses",
    { inputSchema: { n: z.number() } },
    tool(async () => { throw new ProtocolError(-32602, "not that", { why: "test" }); }),
  );
  server.registerTool("malformed", { inputSchema: { n: z.number() } }, tool(async () => ({ content: "not a list" })));
  server.registerTool("nonObject", { inputSchema: { n: z.number() }, outputSchema: z.number() }, tool(async ({ n }) => ({ structuredContent: n })));
  server.registerTool("noContent", { inputSchema: { n: z.number() } }, tool(async () => ({ structuredContent: { a: 1 }, _meta: { x: 1 }, extra: true })));
  server.registerTool("asksEmpty", { inputSchema: { n: z.number() } }, tool(async () => inputRequired({ inputRequests: {} })));
  server.registerTool("urlError", { inputSchema: { n: z.number() } }, tool(async () => {
    throw new UrlElicitationRequiredError([{ mode: "url", elicitationId: "e1", url: "https://example.com", message: "go" }]);
  }));
  const gone = server.registerTool("disabled", { description: "off" }, bare(async () => ({ content: [] })));
  gone.disable();
}

const CASES = [
  ["text", {}],
  ["typed", { n: 3 }],
  ["typed", { n: "three" }],
  ["typed", {}],
  ["badOutput", { n: 1 }],
  ["throws", { n: 1 }],
  ["refuses", { n: 1 }],
  ["malformed", { n: 1 }],
  ["nonObject", { n: 4 }],
  ["noContent", { n: 1 }],
  ["asksEmpty", { n: 1 }],
  ["urlError", { n: 1 }],
  ["disabled", {}],
  ["unregistered", {}],
];

async function open(factory) {
  const tools = Object.fromEntries(CASES.map(([name]) => [name, "optional"]));
  const tasks = await TasksServer.open({ store: "memory://", tools });
  return { tasks, handler: tasks.handler(factory) };
}

test("the SDK still has what the direct run reads", () => {
  const server = new McpServer({ name: "probe", version: "1.0.0" });
  server.registerTool("t", { inputSchema: { n: z.number() } }, async () => ({ content: [] }));
  const registry = server._registeredTools;
  assert.equal(typeof registry, "object", "McpServer._registeredTools");
  assert.equal(typeof registry.t.handler, "function", "a registered tool's handler");
  assert.ok("inputSchema" in registry.t && "enabled" in registry.t && "scopeChallenge" in registry.t);
  assert.ok("outputSchemaJson" in registry.t);
  for (const step of ["validateToolInput", "executeToolHandler", "validateToolOutput", "createToolError"]) {
    assert.equal(typeof server[step], "function", `McpServer.${step}`);
  }
  assert.equal(server.validateToolInput.length, 3, "validateToolInput(tool, args, name)");
  assert.equal(server.validateToolOutput.length, 3, "validateToolOutput(tool, result, name)");
  assert.equal(server.executeToolHandler.length, 3, "executeToolHandler(tool, args, ctx)");
  assert.ok("_negotiatedProtocolVersion" in server.server, "Server._negotiatedProtocolVersion");
  assert.equal(typeof server.server.projectCallToolResult, "function");
  assert.equal(typeof server.toolInputSchemaJson, "function");
  assert.equal(typeof specTypeSchemas.CallToolResult["~standard"].validate, "function");
});

test("a task ends the same way on every path, for every kind of answer", async () => {
  const made = { direct: 0, dispatch: 0, exchange: 0 };
  const server = (path, withCtx) => {
    made[path]++;
    const s = new McpServer({ name: "same", version: "1.0.0" });
    register(s, withCtx);
    return s;
  };
  // ctx-free tools on a factory without parameters: their callbacks run directly.
  const direct = await open(() => server("direct", false));
  // Tools that take ctx on such a factory: the SDK's dispatch on its one server.
  const dispatch = await open(() => server("dispatch", true));
  // Tools that take ctx on a factory that reads the request context: an exchange per task.
  const exchange = await open((_ctx) => server("exchange", true));
  try {
    for (const [name, args] of CASES) {
      const expected = await outcome(exchange.tasks, exchange.handler, name, args);
      assert.equal(await outcome(direct.tasks, direct.handler, name, args), expected, `direct: ${name} ${JSON.stringify(args)}`);
      assert.equal(await outcome(dispatch.tasks, dispatch.handler, name, args), expected, `dispatch: ${name} ${JSON.stringify(args)}`);
    }
    // One server ran every task of the first two (the disabled and unregistered tools went
    // through the exchange, which makes one each); the exchange made at least one per task.
    assert.equal(made.direct, 1 + 2);
    assert.equal(made.dispatch, 1 + 2);
    assert.ok(made.exchange >= CASES.length, `${made.exchange} servers made for the exchanges`);
    // The SDK's executeToolHandler still only calls the tool's executor, so the direct run
    // calls that itself; a subclass that overrides it keeps it.
    assert.equal(callsExecutorOnly(new McpServer({ name: "plain", version: "1" })), true);
    class Custom extends McpServer {
      async executeToolHandler(tool, args, ctx) {
        return super.executeToolHandler(tool, args, ctx);
      }
    }
    assert.equal(callsExecutorOnly(new Custom({ name: "custom", version: "1" })), false);
  } finally {
    direct.tasks.close();
    dispatch.tasks.close();
    exchange.tasks.close();
  }
});

test("a factory that reads the request gets each task's caller, and tools that take ctx keep the exchange", async () => {
  const seen = [];
  const tasks = await TasksServer.open({ store: "memory://", tools: { whoami: "optional", own: "optional" } });
  const handler = tasks.handler((ctx) => {
    const server = new McpServer({ name: "per-caller", version: "1.0.0" });
    const caller = ctx.authInfo?.clientId ?? "nobody";
    server.registerTool("whoami", { description: "the caller" }, async () => {
      seen.push(caller);
      return { content: [{ type: "text", text: caller }] };
    });
    server.registerTool("own", { description: "its task" }, async (c) => ({
      content: [{ type: "text", text: String(currentTask(c)?.taskId !== undefined && c.http?.req instanceof Request) }],
    }));
    return server;
  });
  try {
    const auth = (clientId) => ({ token: clientId, clientId, scopes: [] });
    const alice = await outcome(tasks, handler, "whoami", {}, auth("alice"));
    const bob = await outcome(tasks, handler, "whoami", {}, auth("bob"));
    assert.match(alice, /"text":"alice"/);
    assert.match(bob, /"text":"bob"/);
    assert.deepEqual(seen, ["alice", "bob"]);
    assert.match(await outcome(tasks, handler, "own", {}), /"text":"true"/);
  } finally {
    tasks.close();
  }
});

test("a callback's declared parameters are read from its source", () => {
  assert.equal(declaresAtMost(async () => 1, 0), true);
  assert.equal(declaresAtMost(async (args) => args, 1), true);
  assert.equal(declaresAtMost(async (args) => args, 0), false);
  assert.equal(declaresAtMost(async ({ a, b }) => a + b, 1), true);
  assert.equal(declaresAtMost(async ({ a = [1, 2] } = {}) => a, 1), true);
  assert.equal(declaresAtMost(async (args, ctx = undefined) => ctx, 1), false, "a default value still declares ctx");
  assert.equal(declaresAtMost(async (...all) => all, 1), false, "a rest parameter may read ctx");
  assert.equal(declaresAtMost(async function (args) { return arguments[1]; }, 1), false, "arguments may read ctx");
  assert.equal(declaresAtMost(async function named(args) { return args; }, 1), true);
  assert.equal(declaresAtMost((x) => x, 1), true);
  assert.equal(declaresAtMost(x => x, 0), false);
  const object = { async method(args) { return args; } };
  assert.equal(declaresAtMost(object.method, 1), true);
  assert.equal(declaresAtMost(((a) => a).bind(null), 1), false, "a bound function's source cannot be read");
  assert.equal(declaresAtMost("not a function", 1), false);
});

test("a cancelled ctx-free task stays cancelled while its callback runs on, and the run ends with it", async () => {
  let release;
  const released = new Promise((resolve) => (release = resolve));
  let ended = false;
  const tasks = await TasksServer.open({ store: "memory://", tools: { nap: "optional" } });
  const handler = tasks.handler(() => {
    const server = new McpServer({ name: "nap", version: "1.0.0" });
    server.registerTool("nap", { description: "waits to be let go" }, async () => {
      await released;
      ended = true;
      return { content: [{ type: "text", text: "woke" }] };
    });
    return server;
  });
  try {
    const created = await rpc(handler, "tools/call", { name: "nap", arguments: {} }, "nap");
    const { taskId } = created.result;
    const cancelled = await rpc(handler, "tasks/cancel", { taskId }, taskId);
    assert.equal(cancelled.result?.resultType, "complete", JSON.stringify(cancelled));
    assert.equal((await rpc(handler, "tasks/get", { taskId }, taskId)).result.status, "cancelled");
    assert.equal(tasks.running, 1, "the callback cannot see the cancel: it runs on");
    release();
    await tasks.drain();
    assert.equal(ended, true);
    const read = await rpc(handler, "tasks/get", { taskId }, taskId);
    assert.equal(read.result.status, "cancelled", "a terminal state never changes");
    assert.equal(read.result.result, undefined);
  } finally {
    tasks.close();
  }
});

test("a principal function reads one request header without a Request being built", async () => {
  const seen = [];
  const tasks = await TasksServer.open({
    store: "memory://",
    tools: { echo: "optional" },
    principal: ({ header }) => {
      seen.push([header("X-Caller"), header("x-caller"), header("x-absent")]);
      return header("x-caller") ?? "anonymous";
    },
  });
  const handler = tasks.handler(() => {
    const server = new McpServer({ name: "echo", version: "1.0.0" });
    server.registerTool("echo", { description: "echo" }, async () => ({ content: [] }));
    return server;
  });
  try {
    const created = await rpc(handler, "tools/call", { name: "echo", arguments: {} }, "echo", undefined, { "x-caller": "carol" });
    assert.equal(created.result?.resultType, "task");
    assert.deepEqual(seen, [["carol", "carol", undefined]]);
    // The task is carol's: an anonymous caller does not see it.
    const { taskId } = created.result;
    const foreign = await rpc(handler, "tasks/get", { taskId }, taskId);
    assert.equal(foreign.error?.code, -32602);
  } finally {
    await tasks.drain();
    tasks.close();
  }
});

test("a factory that throws fails the task it was asked for, and is asked again for the next", async () => {
  let calls = 0;
  const tasks = await TasksServer.open({ store: "memory://", tools: { text: "optional" } });
  const handler = tasks.handler(() => {
    calls++;
    if (calls === 1) throw new Error("not ready yet");
    const server = new McpServer({ name: "flaky", version: "1.0.0" });
    server.registerTool("text", { description: "text" }, async () => ({ content: [{ type: "text", text: "ok" }] }));
    return server;
  });
  try {
    const first = await outcome(tasks, handler, "text", {});
    assert.match(first, /"status":"failed"/);
    assert.match(first, /not ready yet/);
    const second = await outcome(tasks, handler, "text", {});
    assert.match(second, /"status":"completed"/);
    assert.equal(calls, 2);
  } finally {
    tasks.close();
  }
});
