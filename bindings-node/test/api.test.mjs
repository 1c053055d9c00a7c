// The Node package against the API manifest (tests/api/manifest.json): every listed type has every
// listed member, spelled lowerCamelCase, on live objects from the Rust fixture host; TasksClient
// accepts every client option (an unknown one is refused by core); the error classes are the
// manifest's.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import * as pkg from "../dist/index.js";
import { ROOT, rustHost } from "./servers.mjs";

const manifest = JSON.parse(readFileSync(join(ROOT, "tests", "api", "manifest.json"), "utf8"));
const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
const ours = (spec) => (spec.languages ?? ["typescript"]).includes("typescript");
const host = await rustHost();
after(() => host.stop());

test("every type has every member", async () => {
  const client = new pkg.TasksClient({ url: host.url, store: "memory://" });
  const immediate = await client.callTool("greet", { name: "api" });
  const task = await client.callTool("slow_compute", { seconds: 0.1 });
  const created = { resultType: "task", taskId: "t", status: "working", createdAt: "2026-09-01T12:00:00.000Z", lastUpdatedAt: "2026-09-01T12:00:00.000Z", ttlMs: null };
  const samples = {
    TasksClient: [client],
    Execution: [immediate, task],
    TaskExecution: [task.task],
    InputRequest: [{ taskId: null, key: "k", method: "elicitation/create", params: {} }],
    TaskDriver: [new pkg.protocol.TaskDriver(created, 0)],
  };
  const missing = [];
  for (const [name, spec] of Object.entries(manifest.types)) {
    if (!ours(spec)) continue;
    assert.ok(samples[name], `no sample of ${name}`);
    for (const sample of samples[name]) {
      const statics = name === "TaskDriver" ? pkg.protocol.TaskDriver : {};
      for (const member of spec.members.map(camel)) {
        if (!(member in sample) && !(member in statics)) missing.push(`${name}.${member}`);
      }
    }
  }
  assert.deepEqual(missing, [], `missing or misnamed: ${missing}`);
  await task.result();
});

test("the client takes every option, and core refuses any other", async () => {
  const options = Object.fromEntries(manifest.client_options.map((o) => [camel(o), undefined]));
  const typed = readFileSync(join(ROOT, "bindings-node", "ts", "index.ts"), "utf8");
  const block = typed.slice(typed.indexOf("export interface TasksClientOptions"), typed.indexOf("/** Options of one `callTool`"));
  for (const name of Object.keys(options)) assert.match(block, new RegExp(`\\b${name}\\??:`), `TasksClientOptions.${name}`);
  const full = { url: host.url, store: "memory://", headers: { "x-test": "1" }, clientName: "api", clientVersion: "1", notifications: false, defaultPollMs: 50, minPollMs: 50, maxInputRounds: 2 };
  const execution = await new pkg.TasksClient(full).callTool("greet", {});
  assert.equal(execution.kind, "immediate");
});

test("functions and error classes", () => {
  for (const [name, spec] of Object.entries(manifest.functions)) {
    if (ours(spec)) assert.equal(typeof pkg.protocol[camel(name)], "function", name);
  }
  assert.deepEqual(Object.keys(pkg.ERROR_CLASSES).sort(), [...manifest.error_classes].sort());
});
