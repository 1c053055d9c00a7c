// Replays the shared JSON vectors (tests/vectors, format in its README) against an McpServer of
// @modelcontextprotocol/server 2.x with mcp-tasks/server over loopback HTTP, with the engine's
// manual clock and sequential ids, validating every message against the vendored 2026-07-28
// and tasks schemas (tests/schema). What this runner does not check is listed, with its reason,
// in tests/vectors/skip.json under the runner "node-server".
import { test, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import Ajv2020 from "ajv/dist/2020.js";
import { McpServer, ProtocolError } from "@modelcontextprotocol/server";
import * as z from "zod";

import { TasksServer, currentTask } from "../dist/server.js";
import { ROOT, freePort } from "./servers.mjs";

const RUNNER = "node-server";
const VECTORS = join(ROOT, "tests", "vectors");
const SCHEMAS = join(ROOT, "tests", "schema"); // vendored; source and version in its README
// The default a replayer declares (tests/vectors/README.md): the extension, and form elicitation
// so a task's work may ask.
const TASKS_CAPS = { extensions: { "io.modelcontextprotocol/tasks": {} }, elicitation: {} };

const listed = JSON.parse(readFileSync(join(VECTORS, "skip.json"), "utf8"));
const skips = Object.fromEntries(listed.skips.filter((s) => s.runner === RUNNER).map((s) => [s.vector, s.reason]));
const unchecked = {};
for (const entry of listed.unchecked_steps ?? []) {
  if (entry.runner !== RUNNER) continue;
  for (const step of entry.steps) (unchecked[entry.vector] ??= {})[step] = entry.reason;
}
const normalizations = new Set((listed.normalize ?? []).filter((n) => n.runner === RUNNER).map((n) => n.what));
const files = readdirSync(VECTORS).filter((f) => f.endsWith(".json") && f !== "skip.json").sort();

// -- matching and schemas (the same rules as core/tests/vectors.rs) -----------------------------

function matches(expected, actual, path, diffs) {
  if (expected === "@any") return;
  if (isObject(expected) && isObject(actual)) {
    for (const [key, value] of Object.entries(expected)) {
      if (key in actual) matches(value, actual[key], `${path}/${key}`, diffs);
      else diffs.push(`${path}/${key}: missing`);
    }
    for (const key of Object.keys(actual)) if (!(key in expected)) diffs.push(`${path}/${key}: unexpected ${JSON.stringify(actual[key])}`);
  } else if (Array.isArray(expected) && Array.isArray(actual) && expected.length === actual.length) {
    expected.forEach((e, i) => matches(e, actual[i], `${path}/${i}`, diffs));
  } else if (JSON.stringify(expected) !== JSON.stringify(actual)) {
    diffs.push(`${path}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

function assertMatches(where, expected, actual) {
  const diffs = [];
  matches(expected, actual, "", diffs);
  assert.deepEqual(diffs, [], `${where}\nactual: ${JSON.stringify(actual)}`);
}

/** The normalizations skip.json lists for this runner, each a narrow named rewrite. */
function normalize(expected, message) {
  if (!isObject(message)) return message;
  const key = "io.modelcontextprotocol/serverInfo";
  const meta = message.result?._meta;
  if (normalizations.has("serverInfo-meta") && isObject(meta) && key in meta && !(key in (expected?.result?._meta ?? {}))) {
    const { [key]: _stamp, ...rest } = meta;
    const { _meta: _all, ...result } = message.result;
    message = { ...message, result: Object.keys(rest).length > 0 ? { ...result, _meta: rest } : result };
  }
  return message;
}

const ERROR_DEFS = {
  [-32700]: "ParseError",
  [-32600]: "InvalidRequestError",
  [-32601]: "MethodNotFoundError",
  [-32602]: "InvalidParamsError",
  [-32603]: "InternalError",
  [-32020]: "HeaderMismatchError",
  [-32021]: "MissingRequiredClientCapabilityError",
  [-32022]: "UnsupportedProtocolVersionError",
};

class Schemas {
  constructor() {
    this.core = JSON.parse(readFileSync(join(SCHEMAS, "core-2026-07-28", "schema.json"), "utf8"));
    this.ext = JSON.parse(readFileSync(join(SCHEMAS, "ext-tasks-draft", "schema.json"), "utf8"));
    this.ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
    this.cache = new Map();
  }

  check(ext, name, value) {
    const key = `${ext}:${name}`;
    let validate = this.cache.get(key);
    if (validate === undefined) {
      const doc = ext ? this.ext : this.core;
      assert.ok(name in doc.$defs, `schema has no $defs/${name}`);
      validate = this.ajv.compile({ $defs: doc.$defs, $ref: `#/$defs/${name}` });
      this.cache.set(key, validate);
    }
    assert.ok(validate(value), `not a valid ${name}: ${JSON.stringify(validate.errors)}\n${JSON.stringify(value)}`);
  }

  checkResponse(method, message) {
    if (message === null) return;
    if ("error" in message) {
      this.check(false, "JSONRPCErrorResponse", message);
      const name = ERROR_DEFS[message.error.code] ?? "Error";
      const whole = "error" in (this.core.$defs[name].properties ?? {});
      this.check(false, name, whole ? message : message.error);
      return;
    }
    this.check(false, "JSONRPCResultResponse", message);
    const result = message.result;
    if (method === "tools/call") {
      const name = { task: "CreateTaskResult", input_required: "InputRequiredResult" }[result.resultType] ?? "CallToolResult";
      this.check(name === "CreateTaskResult", name, result);
    } else if (method === "tasks/get") {
      this.check(true, "GetTaskResult", result);
      if (result.status === "completed") this.check(false, "CallToolResult", result.result);
    } else if (method === "tasks/update" || method === "tasks/cancel") {
      this.check(true, method === "tasks/update" ? "UpdateTaskResult" : "CancelTaskResult", result);
    } else {
      this.check(false, "Result", result);
    }
  }

  checkListenMessage(message) {
    if (message.method === "notifications/subscriptions/acknowledged") {
      this.check(false, "SubscriptionsAcknowledgedNotification", message);
    } else if (message.method === "notifications/tasks") {
      this.check(true, "TaskStatusNotification", message);
      if (message.params.status === "completed") this.check(false, "CallToolResult", message.params.result);
    } else {
      assert.equal(message.method, undefined, `unexpected notification ${message.method}`);
      this.checkResponse("subscriptions/listen", message);
    }
    const meta = (message.params ?? message.result ?? {})._meta ?? {};
    assert.equal(typeof meta["io.modelcontextprotocol/subscriptionId"], "number", JSON.stringify(message));
  }
}

const SCHEMA = new Schemas();

// -- the scripted tool set ----------------------------------------------------------------------

/** Work queues of scripted tasks by task id, and the input answers each work received. */
class Scripts {
  constructor() {
    this.queues = new Map();
    this.answers = new Map();
    // The errors the work's input requests were refused with (-32021), in order.
    this.refusals = new Map();
  }

  queue(taskId) {
    let queue = this.queues.get(taskId);
    if (queue === undefined) {
      queue = { items: [], waiting: undefined };
      this.queues.set(taskId, queue);
    }
    return queue;
  }

  push(taskId, item) {
    const queue = this.queue(taskId);
    if (queue.waiting !== undefined) {
      const resolve = queue.waiting;
      queue.waiting = undefined;
      resolve(item);
    } else {
      queue.items.push(item);
    }
  }

  take(taskId) {
    const queue = this.queue(taskId);
    if (queue.items.length > 0) return Promise.resolve(queue.items.shift());
    return new Promise((resolve) => (queue.waiting = resolve));
  }

  async run(ctx, substitute = {}) {
    const task = currentTask(ctx);
    assert.ok(task !== undefined, "scripted work runs as a task");
    for (;;) {
      const [kind, value] = await this.take(task.taskId);
      if (kind === "status") {
        await task.setStatus(value);
      } else if (kind === "input") {
        let answers;
        try {
          answers = await task.requestInput(value);
        } catch (error) {
          if (error?.code !== -32021) throw error;
          // Input the client cannot answer: the work goes on without it.
          const refused = this.refusals.get(task.taskId) ?? [];
          refused.push({ code: error.code, message: error.message, data: error.data });
          this.refusals.set(task.taskId, refused);
          continue;
        }
        const list = this.answers.get(task.taskId) ?? [];
        list.push(answers);
        this.answers.set(task.taskId, list);
      } else if (kind === "complete") {
        let text = JSON.stringify(value);
        for (const [old, replacement] of Object.entries(substitute)) text = text.replaceAll(old, replacement);
        return JSON.parse(text);
      } else {
        throw new ProtocolError(value.code, value.message, value.data);
      }
    }
  }
}

function bearerPrincipal({ request }) {
  const value = request.headers.get("authorization");
  return value?.startsWith("Bearer ") ? `bearer:${value.slice(7)}` : "anonymous";
}

function askUserName(call) {
  if (call.inputResponses?.user_name !== undefined && call.state === "round-1") return undefined;
  return {
    inputRequests: {
      user_name: {
        method: "elicitation/create",
        params: {
          mode: "form",
          message: "Your name?",
          requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
        },
      },
    },
    state: "round-1",
  };
}

function buildFactory(scripts) {
  const args = z.object({ x: z.number().int().optional(), n: z.number().int().optional() });
  const syncText = (tool, { x, n }) => {
    const present = Object.fromEntries(Object.entries({ x, n }).filter(([, v]) => v !== undefined));
    return { content: [{ type: "text", text: `ran ${tool} synchronously with ${JSON.stringify(present)}` }], isError: false };
  };
  const scripted = (tool) => async (params, ctx) => (currentTask(ctx) === undefined ? syncText(tool, params) : scripts.run(ctx));
  return () => {
    const server = new McpServer({ name: "mcp-tasks-test", version: "0.1.0" });
    server.registerTool("echo", { description: "Synchronous only.", inputSchema: args }, scripted("echo"));
    for (const tool of ["job", "job_required", "job_unlimited"]) {
      server.registerTool(tool, { inputSchema: args }, scripted(tool));
    }
    server.registerTool("ask_name", {}, async (ctx) => {
      const name = ctx.mcpReq.inputResponses?.user_name?.content?.name ?? "";
      return scripts.run(ctx, { "{user_name}": String(name) });
    });
    return server;
  };
}

// -- the replayer -------------------------------------------------------------------------------

/** The step's `_meta`: its `capabilities` when given, else the default. */
const envelope = (tasks, capabilities) => ({
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": capabilities ?? (tasks ? TASKS_CAPS : {}),
  "io.modelcontextprotocol/clientInfo": { name: "mcp-tasks-tests", version: "0" },
});

function standardHeaders(body, principal) {
  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": body.method,
  };
  let field = { "tools/call": "name", "prompts/get": "name" }[body.method];
  if (["tasks/get", "tasks/update", "tasks/cancel"].includes(body.method)) field = "taskId";
  const value = field ? body.params[field] : undefined;
  if (typeof value === "string") headers["mcp-name"] = value;
  if (principal != null) headers.authorization = `Bearer ${principal}`;
  return headers;
}

function applyHeaders(headers, overrides) {
  if (!overrides) return headers;
  const lower = new Set(Object.keys(overrides).map((k) => k.toLowerCase()));
  const out = Object.fromEntries(Object.entries(headers).filter(([k]) => !lower.has(k.toLowerCase())));
  for (const [k, v] of Object.entries(overrides)) if (v !== null) out[k] = v;
  return out;
}

function substitute(value, variables) {
  if (typeof value === "string") {
    for (const [name, v] of Object.entries(variables)) value = value.replaceAll("${" + name + "}", typeof v === "string" ? v : "");
    return value;
  }
  if (Array.isArray(value)) return value.map((v) => substitute(v, variables));
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, variables)]));
  return value;
}

function pointer(document, path) {
  for (const raw of path.split("/").slice(1)) {
    const part = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    document = Array.isArray(document) ? document[Number(part)] : document[part];
  }
  return document;
}

/** One HTTP/1.1 POST written by hand: the vectors send header values (surrounding blanks,
 * encoded words) that fetch and node:http refuse to send. */
function post(url, headers, body) {
  const { hostname, port, pathname } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const chunks = [];
    socket.on("data", (c) => chunks.push(c));
    socket.on("error", reject);
    socket.on("end", () => {
      const raw = Buffer.concat(chunks);
      const split = raw.indexOf("\r\n\r\n");
      const [statusLine, ...lines] = raw.subarray(0, split).toString().split("\r\n");
      const got = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).trim().toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
      let payload = raw.subarray(split + 4);
      if (got["transfer-encoding"] === "chunked") {
        const parts = [];
        for (;;) {
          const end = payload.indexOf("\r\n");
          const size = parseInt(payload.subarray(0, end).toString().split(";")[0], 16);
          if (size === 0) break;
          parts.push(payload.subarray(end + 2, end + 2 + size));
          payload = payload.subarray(end + 2 + size + 2);
        }
        payload = Buffer.concat(parts);
      }
      resolve([Number(statusLine.split(" ")[1]), got["content-type"] ?? "", payload.toString()]);
    });
    const head = [`POST ${pathname} HTTP/1.1`, `host: ${hostname}:${port}`, "connection: close"];
    for (const [k, v] of Object.entries(headers)) head.push(`${k}: ${v}`);
    head.push(`content-length: ${body.length}`);
    // No half-close: node:http ends a connection whose client has ended its side.
    socket.write(Buffer.concat([Buffer.from(head.join("\r\n") + "\r\n\r\n"), body]));
  });
}

function parseBody(contentType, text) {
  if (!text) return null;
  if (contentType.startsWith("text/event-stream")) {
    const data = text.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart());
    return JSON.parse(data[0]);
  }
  return JSON.parse(text);
}

/** An open listen stream read message by message. */
class SseStream {
  constructor(response) {
    this.reader = response.body.getReader();
    this.decoder = new TextDecoder();
    this.buffer = "";
  }

  async next() {
    for (;;) {
      const end = this.buffer.indexOf("\n\n");
      if (end >= 0) {
        const event = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart());
        if (data.length > 0) return JSON.parse(data.join("\n"));
        continue;
      }
      const { done, value } = await Promise.race([
        this.reader.read(),
        new Promise((_, reject) => setTimeout(() => reject(new Error("stream read timed out")), 10_000)),
      ]);
      if (done) return null;
      this.buffer += this.decoder.decode(value, { stream: true });
    }
  }
}

async function replay(file, store) {
  const vector = JSON.parse(readFileSync(join(VECTORS, file), "utf8"));
  const name = vector.name;
  const tasks = await TasksServer.open({
    store,
    defaultTtlMs: 60_000,
    defaultPollIntervalMs: 1_000,
    purgeGraceMs: 10_000,
    maxBodyBytes: 65_536,
    clockStartMs: vector.start_ms,
    idPrefix: "task",
    principal: bearerPrincipal,
    tools: {
      job: { mode: "optional", pollIntervalMs: 500 },
      job_required: { mode: "required", ttlMs: 5_000, pollIntervalMs: 250 },
      job_unlimited: { mode: "optional", ttlMs: null },
      ask_name: { mode: "required", prepare: askUserName },
    },
  });
  const scripts = new Scripts();
  const handler = tasks.handler(buildFactory(scripts));
  const server = http.createServer(handler.node);
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${port}/mcp`;
  const owners = {};
  const variables = {};
  const streams = {};
  const failures = [];
  const skipped = unchecked[name] ?? {};
  let nextId = 1;

  /** The task's committed state, read in-process through the fetch face (no id is used up). */
  const read = async (owner, taskId) => {
    const body = { jsonrpc: "2.0", id: 0, method: "tasks/get", params: { taskId, _meta: envelope(true) } };
    const headers = standardHeaders(body, owner.startsWith("bearer:") ? owner.slice(7) : null);
    const response = await handler.fetch(new Request(url, { method: "POST", headers, body: JSON.stringify(body) }));
    return (await response.json()).result;
  };
  const waitFor = async (owner, taskId, done) => {
    for (let i = 0; i < 1000; i++) {
      const state = await read(owner, taskId);
      if (state !== undefined && done(state)) return;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(`${name}: ${taskId} never reached the expected state`);
  };

  const check = (where, status, expect, method, message, index) => {
    if (index in skipped) {
      console.log(`${where}: not checked (${skipped[index]})`);
      return;
    }
    try {
      SCHEMA.checkResponse(method, message);
      assert.equal(status, expect.status, `${where}: HTTP ${status} ${JSON.stringify(message)}`);
      assertMatches(where, expect.body, normalize(expect.body, message));
    } catch (error) {
      failures.push(error.message);
    }
  };

  try {
    for (const [index, raw] of vector.steps.entries()) {
      const where = `${name} step ${index}`;
      const step = substitute(raw, variables);
      const declared = step.tasks ?? true;
      const principal = step.principal;
      if (step.send) {
        const method = step.send.method;
        const params = { ...(step.send.params ?? {}) };
        params._meta ??= envelope(declared, step.capabilities);
        const body = { jsonrpc: "2.0", id: nextId++, method, params };
        const headers = applyHeaders(standardHeaders(body, principal), step.headers);
        const [status, contentType, text] = await post(url, headers, Buffer.from(JSON.stringify(body)));
        const message = parseBody(contentType, text);
        check(where, status, step.expect, method, message, index);
        const result = message?.result ?? {};
        if (method === "tools/call" && result.resultType === "task") owners[result.taskId] = principal ? `bearer:${principal}` : "anonymous";
        for (const [v, ptr] of Object.entries(step.capture ?? {})) variables[v] = pointer(message, ptr);
      } else if (step.send_raw !== undefined) {
        const content = typeof step.send_raw === "string" ? step.send_raw : step.send_raw.repeat.repeat(step.send_raw.times);
        const headers = applyHeaders({ "content-type": "application/json", accept: "application/json, text/event-stream" }, step.headers);
        const [status, contentType, text] = await post(url, headers, Buffer.from(content));
        check(where, status, step.expect, "", parseBody(contentType, text), index);
      } else if (step.advance_ms !== undefined) {
        tasks.advanceClock(step.advance_ms);
      } else if (step.work) {
        const { task: taskId, ...work } = step.work;
        const owner = owners[taskId];
        const state = await read(owner, taskId);
        if (state === undefined || ["completed", "failed", "cancelled"].includes(state.status)) continue; // the work ended
        if ("status" in work) {
          scripts.push(taskId, ["status", work.status]);
          await waitFor(owner, taskId, (t) => t.statusMessage === work.status);
        } else if ("input" in work && "refused" in work) {
          // The work's request is refused and nothing changes: it goes on.
          const before = (scripts.refusals.get(taskId) ?? []).length;
          scripts.push(taskId, ["input", work.input]);
          for (let i = 0; i < 1000 && (scripts.refusals.get(taskId) ?? []).length <= before; i++) {
            await new Promise((r) => setTimeout(r, 5));
          }
          assertMatches(where, work.refused, (scripts.refusals.get(taskId) ?? [])[before]);
        } else if ("input" in work) {
          scripts.push(taskId, ["input", work.input]);
          await waitFor(owner, taskId, (t) => t.status === "input_required");
        } else if ("complete" in work || "fail" in work) {
          scripts.push(taskId, "complete" in work ? ["complete", work.complete] : ["fail", work.fail]);
          await waitFor(owner, taskId, (t) => t.status !== "working");
        } else {
          throw new Error(`${where}: unknown work ${JSON.stringify(work)}`);
        }
      } else if (step.sweep) {
        const [expired, purged] = await tasks.sweep();
        assert.deepEqual({ expired, purged }, step.sweep, where);
      } else if (step.answers) {
        const expected = step.answers.expect;
        for (let i = 0; i < 1000 && (scripts.answers.get(step.answers.task) ?? []).length < expected.length; i++) {
          await new Promise((r) => setTimeout(r, 5));
        }
        assertMatches(where, expected, scripts.answers.get(step.answers.task) ?? []);
      } else if (step.listen) {
        const params = { notifications: step.listen.notifications, _meta: envelope(declared) };
        const body = { jsonrpc: "2.0", id: nextId++, method: "subscriptions/listen", params };
        const response = await fetch(url, { method: "POST", headers: standardHeaders(body, principal), body: JSON.stringify(body) });
        assert.equal(response.status, step.expect.status, where);
        assert.ok(response.headers.get("content-type").startsWith("text/event-stream"), where);
        streams[step.listen.stream] = new SseStream(response);
      } else if (step.events) {
        const stream = streams[step.events.stream];
        for (const expected of step.events.expect) {
          const message = await stream.next();
          assert.ok(message !== null, `${where}: stream ended`);
          SCHEMA.checkListenMessage(message);
          assertMatches(where, expected, normalize(expected, message));
        }
        if (step.events.end) assert.equal(await stream.next(), null, `${where}: stream should end`);
      } else {
        throw new Error(`${where}: unknown step ${JSON.stringify(step)}`);
      }
    }
  } finally {
    for (const stream of Object.values(streams)) await stream.reader.cancel().catch(() => undefined);
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await handler.close();
    tasks.close();
  }
  assert.deepEqual(failures, [], failures.join("\n"));
}

test("the skip list names real vectors and steps", () => {
  const names = new Set(files.map((f) => f.replace(/\.json$/, "")));
  assert.ok(names.size >= 10, `vectors are missing from ${VECTORS}`);
  for (const vector of Object.keys(skips)) assert.ok(names.has(vector), vector);
  for (const [vector, steps] of Object.entries(unchecked)) {
    assert.ok(names.has(vector), vector);
    const count = JSON.parse(readFileSync(join(VECTORS, `${vector}.json`), "utf8")).steps.length;
    for (const step of Object.keys(steps)) assert.ok(Number(step) >= 0 && Number(step) < count, `${vector} step ${step}`);
  }
});

const dir = mkdtempSync(join(tmpdir(), "mcp-tasks-vectors-"));
for (const file of files) {
  const vector = file.replace(/\.json$/, "");
  for (const store of ["memory", "sqlite"]) {
    test(`vector ${vector} (${store})`, async (t) => {
      if (vector in skips) return t.skip(skips[vector]);
      await replay(file, store === "memory" ? "memory://" : `sqlite:///${join(dir, `${vector}.db`)}`);
    });
  }
}

after(() => undefined);
