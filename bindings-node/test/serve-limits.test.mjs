// `handler.nodeServer(limits)` against slow and hostile clients, with short bounds: a half-sent
// header is closed, a slow body gets the table's 408, a header section over the limit 431 (a
// JSON-RPC error read before the close, even when the client is still sending), and the cap
// sheds the oldest connection that had no request so a legitimate one is served, and a response
// whose reader stopped reading is closed after the stall bound while another is written to its
// end. Every wait is bounded; nothing asserts timing beyond that bound.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";

import { McpServer } from "@modelcontextprotocol/server";
import { DEFAULT_SERVE_LIMITS, TasksServer, createNodeServer } from "../dist/server.js";

const BOUND_MS = 10_000;
const LIMITS = {
  headerReadTimeoutMs: 300, bodyReadTimeoutMs: 300, idleTimeoutMs: 300, maxConnections: 6, maxHeaderBytes: 16 << 10,
  writeStallTimeoutMs: 300,
};
let handler;
let server;
let port;

async function listen(limits) {
  const started = handler.nodeServer(limits);
  await new Promise((resolve) => started.listen(0, "127.0.0.1", resolve));
  return started;
}

before(async () => {
  const tasks = await TasksServer.open({ store: "memory://" });
  handler = tasks.handler(() => {
    const mcp = new McpServer({ name: "limits", version: "0" });
    mcp.registerTool("echo", { description: "echo" }, async () => ({ content: [{ type: "text", text: "hi" }] }));
    return mcp;
  });
  server = await listen(LIMITS);
  port = server.address().port;
});

after(() => new Promise((resolve) => server.close(resolve)));

/** Writes `bytes`, then resolves with all the server sent until it closed the connection. */
function exchange(bytes, socket = connect(port, "127.0.0.1")) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    const timer = setTimeout(() => reject(new Error("the server did not close the connection")), BOUND_MS);
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("error", (error) => (clearTimeout(timer), reject(error)));
    socket.on("close", () => (clearTimeout(timer), resolve(Buffer.concat(chunks).toString())));
    if (bytes !== null) socket.write(bytes);
  });
}

/** `promise`, or a failure once `BOUND_MS` passed without it. */
function within(promise) {
  let timer;
  const late = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("not within the bound")), BOUND_MS)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

function call(name) {
  const body = JSON.stringify({
    jsonrpc: "2.0", id: 1, method: "tools/call",
    params: { name, arguments: {}, _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": {} } },
  });
  return `POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n` +
    `MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: ${name}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `Connection: close\r\n\r\n${body}`;
}

test("core's defaults come through", () => {
  assert.equal(DEFAULT_SERVE_LIMITS.headerReadTimeoutMs, 10_000);
  assert.ok(DEFAULT_SERVE_LIMITS.maxConnections > 0);
});

test("a half-sent header is closed, with the table's 408", async () => {
  const answer = await exchange("POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Ty");
  assert.match(answer, /^HTTP\/1.1 408/);
  assert.match(answer, /"code":-32600/);
});

test("a slow body gets 408", async () => {
  const answer = await exchange("POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{");
  assert.match(answer, /^HTTP\/1.1 408/);
});

test("a header section over the limit gets 431, read before the close", async () => {
  const socket = connect(port, "127.0.0.1");
  const answered = exchange(null, socket);
  socket.write(`POST /mcp HTTP/1.1\r\nHost: x\r\nMcp-Name: ${"x".repeat(200_000)}\r\n\r\n`);
  const answer = await answered;
  assert.match(answer, /^HTTP\/1.1 431/);
  assert.match(answer, /"code":-32600/);
});

test("at the cap, the oldest connection that had no request makes room", async () => {
  // Headers may take a minute here: only the cap can close the flood within the bound.
  const patient = await listen({ ...LIMITS, headerReadTimeoutMs: 60_000 });
  const at = patient.address().port;
  const flood = [];
  for (let i = 0; i < 6; i++) {
    const socket = connect(at, "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write("POST /mcp HTTP/1.1\r\n");
    flood.push({ socket, closed: new Promise((resolve) => socket.once("close", resolve)) });
  }
  const answer = await exchange(call("echo"), connect(at, "127.0.0.1"));
  assert.match(answer, /^HTTP\/1.1 200/);
  assert.match(answer, /"text":"hi"/);
  await flood[0].closed;
  for (const { socket } of flood) socket.destroy();
  patient.closeAllConnections();
  await new Promise((resolve) => patient.close(resolve));
});

test("a reader that stops reading is closed; another gets the whole response", async () => {
  // A chatty listen stream's stand-in: 32 MB in 16 KB chunks (more than a loopback socket's
  // buffers hold), each written after the last drained.
  const chunk = Buffer.alloc(16 << 10, "x");
  let stalledGone;
  const stalledClosed = new Promise((resolve) => (stalledGone = resolve));
  const streaming = createNodeServer(async (req, res) => {
    if (req.url === "/stalled") res.once("close", () => stalledGone(res.writableFinished));
    res.writeHead(200, { "content-type": "text/plain" });
    for (let i = 0; i < 2_048 && !res.destroyed; i++) {
      if (!res.write(chunk)) {
        await new Promise((resolve) => {
          const done = () => (res.off("drain", done), res.off("close", done), resolve());
          res.on("drain", done).on("close", done);
        });
      }
    }
    res.end();
  }, LIMITS);
  await new Promise((resolve) => streaming.listen(0, "127.0.0.1", resolve));
  const at = streaming.address().port;
  const request = (path) => `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`;
  const stalled = connect(at, "127.0.0.1");
  const held = [];
  stalled.on("data", (data) => held.push(data));
  stalled.once("data", () => stalled.pause()); // the head, then nothing read
  stalled.on("error", () => {});
  const clientSaw = new Promise((resolve) => stalled.once("close", resolve));
  stalled.write(request("/stalled"));
  const whole = await exchange(request("/read"), connect(at, "127.0.0.1"));
  assert.match(whole, /0\r\n\r\n$/, "the reader got the response to its end");
  // The server closes the stalled response unfinished (the stall bound is 300 ms)...
  assert.equal(await within(stalledClosed), false, "closed before its end was written");
  // ...and the client reads what the kernel held, then the end.
  stalled.resume();
  await within(clientSaw);
  const got = Buffer.concat(held).toString();
  assert.ok(got.length < whole.length, `${got.length} < ${whole.length}`);
  assert.doesNotMatch(got, /0\r\n\r\n$/, "it ended without the chunked body's end");
  await new Promise((resolve) => streaming.close(resolve));
});
