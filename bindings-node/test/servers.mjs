// Starts the servers the tests talk to over loopback HTTP: the Rust fixture host
// (tests/fixtures, `fixture-server`), the Python server (mcp 2.3.0 MCPServer + TasksExtension,
// tests/conformance/python_server.py), the TypeScript server (@modelcontextprotocol/server
// McpServer + mcp-tasks/server, test/fixture-server.mjs) and an rmcp server behind mcp-tasks-rmcp
// (`rmcp-fixture-server`). All serve the same 7 fixture tools.
import { spawn } from "node:child_process";
import { Socket, createServer } from "node:net";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

import { EXTENSION_ID, PROTOCOL_VERSION } from "../dist/index.js";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

let nextId = 0;

/** One JSON-RPC request over the stateless 2026-07-28 wire as a client declaring the tasks
 * extension (`Mcp-Name` from the tool's name or the task id); resolves to the parsed answer. */
export async function callDeclaring(url, method, params) {
  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": PROTOCOL_VERSION,
    "mcp-method": method,
    "mcp-name": params.name ?? params.taskId,
  };
  const meta = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    // Form elicitation too, as mcp-tasks' clients declare: servers ask nothing undeclared.
    "io.modelcontextprotocol/clientCapabilities": { extensions: { [EXTENSION_ID]: {} }, elicitation: {} },
  };
  const body = JSON.stringify({ jsonrpc: "2.0", id: ++nextId, method, params: { ...params, _meta: meta } });
  return (await fetch(url, { method: "POST", headers, body })).json();
}

/** A free loopback port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}

async function start(command, args) {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout });
  const url = await new Promise((resolve, reject) => {
    child.on("exit", (code) => reject(new Error(`${command} exited with ${code}`)));
    lines.on("line", (line) => {
      const match = /listening on (\S+)/.exec(line);
      if (match) resolve(match[1]);
    });
  });
  // uvicorn prints before it accepts connections: wait until the port answers.
  const port = Number(new URL(url).port);
  for (let i = 0; i < 200; i++) {
    const open = await new Promise((resolve) => {
      const socket = new Socket();
      socket.once("connect", () => (socket.destroy(), resolve(true)));
      socket.once("error", () => resolve(false));
      socket.connect(port, "127.0.0.1");
    });
    if (open) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url, target: { url }, stop: () => child.kill("SIGKILL") };
}

/** The Rust fixture host (path from $MCP_TASKS_FIXTURE_SERVER, else target/debug). */
export async function rustHost() {
  const binary = process.env.MCP_TASKS_FIXTURE_SERVER ?? join(ROOT, "target", "debug", "fixture-server");
  return start(binary, [String(await freePort()), "--store", "memory://"]);
}

/** The rmcp server behind core (`rmcp-fixture-server`, beside the fixture host's binary). */
export async function rmcpServer() {
  const fixture = process.env.MCP_TASKS_FIXTURE_SERVER ?? join(ROOT, "target", "debug", "fixture-server");
  return start(join(dirname(fixture), "rmcp-fixture-server"), [String(await freePort()), "--store", "memory://"]);
}

/** The scripted server of a client vector (tests/vectors/client), beside the fixture host's
 * binary; `log()` resolves to the methods it received. */
export async function scriptedServer(vector) {
  const fixture = process.env.MCP_TASKS_FIXTURE_SERVER ?? join(ROOT, "target", "debug", "fixture-server");
  const server = await start(join(dirname(fixture), "scripted-server"), [vector]);
  const log = async () => (await (await fetch(server.url.replace(/\/mcp$/, "/log"))).json()).map((m) => m.method);
  return { ...server, log };
}

/** The Python server, or null when no Python with mcp-tasks is configured ($MCP_TASKS_PYTHON). */
export async function pythonServer() {
  const python = process.env.MCP_TASKS_PYTHON ?? join(ROOT, ".tools", "venv", "bin", "python");
  if (!existsSync(python)) return null;
  return start(python, [join(ROOT, "tests", "conformance", "python_server.py"), String(await freePort())]);
}

/** The TypeScript server (test/fixture-server.mjs) on `store` (default memory://). */
export async function nodeServer(store = "memory://", port = undefined) {
  const script = join(ROOT, "bindings-node", "test", "fixture-server.mjs");
  return start(process.execPath, [script, String(port ?? (await freePort())), store]);
}

/**
 * The Rust fixture host over stdio, as a client starts it: no process yet (the client spawns it
 * on its first call), `target` is the `command` and `args` for `TasksClient`, on `store`.
 */
export function rustStdio(store = "memory://") {
  const binary = process.env.MCP_TASKS_FIXTURE_SERVER ?? join(ROOT, "target", "debug", "fixture-server");
  return { stdio: true, target: { command: binary, args: ["--stdio", "--store", store] }, stop: () => {} };
}

/** The rmcp server behind core over stdio (like `rustStdio`), beside the fixture host's binary. */
export function rmcpStdio(store = "memory://") {
  const fixture = process.env.MCP_TASKS_FIXTURE_SERVER ?? join(ROOT, "target", "debug", "fixture-server");
  const binary = join(dirname(fixture), "rmcp-fixture-server");
  return { stdio: true, target: { command: binary, args: ["--stdio", "--store", store] }, stop: () => {} };
}

/** The Python server over stdio (like `rustStdio`), or null without a Python ($MCP_TASKS_PYTHON). */
export function pythonStdio(store = "memory://") {
  const python = process.env.MCP_TASKS_PYTHON ?? join(ROOT, ".tools", "venv", "bin", "python");
  if (!existsSync(python)) return null;
  const script = join(ROOT, "tests", "conformance", "python_server.py");
  return { stdio: true, target: { command: python, args: [script, "--stdio", store] }, stop: () => {} };
}
