// The examples of the README and docs/ run against each other as written: the Rust serve example, then the Rust,
// Python and Node client examples against it (all three at once), each with the same MCP_TOKEN,
// each in its own scratch directory with its own task-reference store. A request without a token
// is refused (401), as the serve example says. Then the same three clients against the
// TypeScript server example (examples/server.ts, an McpServer with mcp-tasks/server) and the Python
// one (bindings-python/examples/server.py, an MCPServer with TasksExtension).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

import { ROOT, freePort } from "./servers.mjs";

const scratch = mkdtempSync(join(tmpdir(), "mcp-tasks-examples-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
const examples = join(ROOT, "target", "debug", "examples");
const python = process.env.MCP_TASKS_PYTHON ?? join(ROOT, ".tools", "venv", "bin", "python");

/** Runs a command to its end (at most 60 s); resolves to its exit code and output. */
function run(command, args, options) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("exit", (code) => (clearTimeout(timer), resolve({ code, out })));
  });
}

async function startServe(command = join(examples, "serve"), args = ["127.0.0.1:0"]) {
  const child = spawn(command, args, { cwd: scratch, stdio: ["ignore", "pipe", "inherit"] });
  const url = await new Promise((resolve, reject) => {
    child.on("exit", (code) => reject(new Error(`the serve example exited with ${code}`)));
    createInterface({ input: child.stdout }).on("line", (line) => {
      const match = /listening on (\S+)/.exec(line);
      if (match) resolve(match[1]);
    });
  });
  return { url, stop: () => child.kill("SIGKILL") };
}

test("the serve example and the Rust, Python and Node client examples work together", async (t) => {
  for (const name of ["serve", "client"]) {
    assert.ok(existsSync(join(examples, name)), `no ${name} example binary: run cargo build -p mcp-tasks --examples first`);
  }
  if (!existsSync(python)) return t.skip("no Python with mcp-tasks installed");
  const serve = await startServe();
  after(() => serve.stop());

  const unauthenticated = await fetch(serve.url, { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
  const refused = await fetch(serve.url, {
    method: "POST",
    headers: { "content-type": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  });
  assert.equal(unauthenticated.status, 400, "a body that is no request is refused before auth");
  assert.equal(refused.status, 401, "no bearer token: 401");

  await runClients(serve.url, "rust-host");
});

test("the TypeScript server example serves the Rust, Python and Node client examples", async (t) => {
  assert.ok(existsSync(join(examples, "client")), "no client example binary: run cargo build -p mcp-tasks --examples first");
  if (!existsSync(python)) return t.skip("no Python with mcp-tasks installed");
  const script = join(ROOT, "bindings-node", "examples", "server.ts");
  const serve = await startServe(process.execPath, ["--experimental-strip-types", "--no-warnings", script, String(await freePort())]);
  after(() => serve.stop());
  await runClients(serve.url, "ts-server");
});

test("the Python server example serves the Rust, Python and Node client examples", async (t) => {
  assert.ok(existsSync(join(examples, "client")), "no client example binary: run cargo build -p mcp-tasks --examples first");
  if (!existsSync(python)) return t.skip("no Python with mcp-tasks installed");
  const port = await freePort();
  const dir = mkdtempSync(join(scratch, "python-server-")); // its tasks.db
  const child = spawn(python, [join(ROOT, "bindings-python", "examples", "server.py"), String(port)], { cwd: dir, stdio: "inherit" });
  after(() => child.kill("SIGKILL"));
  const url = `http://127.0.0.1:${port}/mcp`;
  // uvicorn prints its address to stderr once bound: wait for the port to answer instead (at most 30 s).
  for (let i = 0; ; i++) {
    assert.equal(child.exitCode, null, "the Python server example exited");
    const answered = await fetch(url, { method: "POST", body: "{}", headers: { "content-type": "application/json" } }).then(
      () => true,
      () => false,
    );
    if (answered) break;
    assert.ok(i < 300, "the Python server example did not answer within 30 s");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await runClients(url, "python-server");
});

test("the stdio client examples start the serve example as their child", async (t) => {
  for (const name of ["serve", "stdio_client"]) {
    assert.ok(existsSync(join(examples, name)), `no ${name} example binary: run cargo build -p mcp-tasks --examples first`);
  }
  if (!existsSync(python)) return t.skip("no Python with mcp-tasks installed");
  const server = [join(examples, "serve"), "--stdio"];
  // Each client's child opens tasks.db in the client's directory: one directory each.
  const dir = (name) => mkdtempSync(join(scratch, `stdio-${name}-`));
  const env = (store) => ({ ...process.env, MCP_TASKS_CLIENT_DB: join(scratch, `stdio-${store}`) });
  const [rust, py, node] = await Promise.all([
    run(join(examples, "stdio_client"), server, { cwd: dir("rust"), env: env("rust.db") }),
    run(python, [join(ROOT, "bindings-python", "examples", "stdio_client.py"), ...server], { cwd: dir("python"), env: env("python.db") }),
    // The Node example runs in bindings-node (to import the package by name): its child moves to
    // a scratch directory first.
    run(process.execPath, ["--experimental-strip-types", "--no-warnings", join(ROOT, "bindings-node", "examples", "stdio.ts"),
      "sh", "-c", `cd '${dir("node")}' && exec '${server[0]}' --stdio`], {
      cwd: join(ROOT, "bindings-node"),
      env: env("node.db"),
    }),
  ]);
  for (const [name, result] of [["Rust", rust], ["Python", py], ["Node", node]]) {
    assert.equal(result.code, 0, `${name} stdio client example failed:\n${result.out}`);
    assert.match(result.out, /report for \\?"Q3\\?"/, `${name} stdio client example printed no report:\n${result.out}`);
    assert.match(result.out, /working/, `${name} stdio client example saw no state:\n${result.out}`);
  }
});

/** The three client examples at once against `url`, each with its own reference store. */
async function runClients(url, prefix) {
  const env = (store) => ({ ...process.env, MCP_TOKEN: "example-token", MCP_TASKS_CLIENT_DB: join(scratch, `${prefix}-${store}`) });
  const serve = { url };
  const [rust, py, node] = await Promise.all([
    run(join(examples, "client"), [serve.url], { cwd: scratch, env: env("rust.db") }),
    run(python, [join(ROOT, "bindings-python", "examples", "client.py"), serve.url], { cwd: scratch, env: env("python.db") }),
    run(process.execPath, ["--experimental-strip-types", "--no-warnings", join("examples", "quickstart.ts"), serve.url], {
      cwd: join(ROOT, "bindings-node"),
      env: env("node.db"),
    }),
  ]);
  for (const [name, result] of [["Rust", rust], ["Python", py], ["Node", node]]) {
    assert.equal(result.code, 0, `${name} client example failed:\n${result.out}`);
    assert.match(result.out, /report for \\?"Q3\\?"/, `${name} client example printed no report:\n${result.out}`);
    assert.match(result.out, /working/, `${name} client example saw no state:\n${result.out}`);
  }
}
