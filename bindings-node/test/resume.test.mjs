// Resumable tools on the TypeScript server: killed with SIGKILL mid-run, the server restarted on
// the same SQLite file runs the task again as attempt 2 from its checkpoint, through the SDK as
// the first call did, while a plain task fails with the clear message; and on PostgreSQL a
// front-end that only accepts (`execution: "workers"`) with two worker servers, the one running
// the task killed, the other finishing it.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, test } from "node:test";

import { ROOT, callDeclaring, freePort } from "./servers.mjs";

async function serve(store, port, execution = "local") {
  const script = join(ROOT, "bindings-node", "test", "resumable-server.mjs");
  const args = [script, String(port), store, execution];
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
  const url = await new Promise((resolve, reject) => {
    child.on("exit", (code) => reject(new Error(`the server exited with ${code}`)));
    createInterface({ input: child.stdout }).on("line", (line) => {
      const match = /listening on (\S+)/.exec(line);
      if (match) resolve(match[1]);
    });
  });
  return { url, child, kill: () => new Promise((resolve) => (child.once("exit", resolve), child.kill("SIGKILL"))) };
}

async function call(url, method, params) {
  return (await callDeclaring(url, method, params)).result;
}

async function until(url, taskId, done, seconds = 30) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const task = await call(url, "tasks/get", { taskId });
    if (done(task)) return task;
    assert.ok(Date.now() < deadline, `${taskId} never got there: ${JSON.stringify(task)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const step = (task) => Number(/^step (\d+)/.exec(task.statusMessage ?? "")?.[1] ?? 0);

describe("a resumable tool on the TypeScript server", () => {
  test("killed with SIGKILL mid-run, the restarted server finishes it from its checkpoint", async () => {
    const store = `sqlite:///${join(mkdtempSync(join(tmpdir(), "mcp-tasks-ts-resume-")), "tasks.db")}`;
    const port = await freePort();
    const first = await serve(store, port);
    const counting = (await call(first.url, "tools/call", { name: "count", arguments: { steps: 30, stepMs: 100 } })).taskId;
    const plain = (await call(first.url, "tools/call", { name: "sleep", arguments: { seconds: 60 } })).taskId;
    const before = await until(first.url, counting, (t) => step(t) >= 3);
    assert.match(before.statusMessage, new RegExp(`pid ${first.child.pid}\\)`));
    await first.kill();

    const second = await serve(store, port);
    try {
      const failed = await until(second.url, plain, (t) => t.status !== "working");
      assert.equal(failed.status, "failed");
      assert.equal(failed.error.data.reason, "server_restarted");
      const done = await until(second.url, counting, (t) => t.status !== "working");
      assert.equal(done.status, "completed", JSON.stringify(done));
      const text = done.result.content[0].text;
      assert.match(text, /^counted to 30 in attempt 2, resumed from step \d+$/);
      assert.ok(Number(text.split(" ").at(-1)) >= step(before), text);
    } finally {
      await second.kill();
    }
  });
});

describe("a TypeScript front-end and two TypeScript workers on PostgreSQL", () => {
  const base = process.env.MCP_TASKS_PG_URL;
  test("the worker running a task is killed mid-tool, the other finishes it", { skip: base === undefined && "no PostgreSQL (tests/run-all starts one)" }, async () => {
    const name = `mcp_tasks_ts_workers_${process.pid}`;
    const psql = spawn("psql", [base, "-q", "-c", `DROP DATABASE IF EXISTS ${name}`, "-c", `CREATE DATABASE ${name}`], { stdio: "inherit" });
    await new Promise((resolve, reject) => psql.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`psql ${code}`)))));
    const store = `${base.slice(0, base.lastIndexOf("/"))}/${name}`;
    const front = await serve(store, await freePort(), "workers");
    const workers = [await serve(store, await freePort()), await serve(store, await freePort())];
    try {
      const counting = (await call(front.url, "tools/call", { name: "count", arguments: { steps: 40, stepMs: 100 } })).taskId;
      const running = await until(front.url, counting, (t) => step(t) >= 3);
      const runner = Number(/pid (\d+)\)/.exec(running.statusMessage)[1]);
      assert.notEqual(runner, front.child.pid, "the front-end runs no tool code");
      const doomed = workers.find((w) => w.child.pid === runner);
      assert.ok(doomed, "one of the workers runs it");
      await doomed.kill();
      // Its lease (1 s here) lapses, the other worker's sweep releases the task, and it claims
      // it.
      const done = await until(front.url, counting, (t) => t.status !== "working", 60);
      assert.equal(done.status, "completed", JSON.stringify(done));
      assert.match(done.result.content[0].text, /^counted to 40 in attempt 2, resumed from step \d+$/);
    } finally {
      for (const server of [front, ...workers]) {
        if (server.child.exitCode === null && server.child.signalCode === null) await server.kill();
      }
    }
  });
});
