// A task's trace from the TypeScript client: with the application's OpenTelemetry SDK, `callTool`
// records a client span that lasts until the outcome, and its W3C trace context (SEP-414) goes in
// `_meta` with the call and every poll and answer, so the Rust host's create, run and polls (read
// back from a real OTLP receiver, tests/otel/receiver.py) are its descendants. And the sans-IO
// TaskDriver sends a context `setTrace` gave with every request, kept across `resume`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";

import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";

import { TasksClient, protocol } from "../dist/index.js";
import { ROOT, freePort } from "./servers.mjs";

const spans = new InMemorySpanExporter();
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] }));

/** Starts `command` and resolves once it printed a line matching `ready`. */
function started(command, args, env, ready) {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  const lines = createInterface({ input: child.stdout });
  const errors = createInterface({ input: child.stderr });
  const received = [];
  const up = new Promise((resolve, reject) => {
    child.on("exit", (code) => reject(new Error(`${command} exited with ${code}`)));
    for (const stream of [lines, errors]) {
      stream.on("line", (line) => {
        if (ready.test(line)) resolve();
        if (line.startsWith("{")) received.push(JSON.parse(line));
      });
    }
  });
  return { child, received, up };
}

test("one trace holds the client's call, the create, the run and every poll and answer", async (t) => {
  const python = process.env.MCP_TASKS_PYTHON ?? join(ROOT, ".tools", "venv", "bin", "python");
  if (!existsSync(python)) return t.skip("no Python with opentelemetry-proto ($MCP_TASKS_PYTHON)");
  const receiverPort = await freePort();
  const receiver = started(python, [join(ROOT, "tests", "otel", "receiver.py"), String(receiverPort)], {}, /listening on/);
  await receiver.up;
  const binary = process.env.MCP_TASKS_FIXTURE_SERVER ?? join(ROOT, "target", "debug", "fixture-server");
  const port = await freePort();
  const host = started(binary, [String(port), "--store", "memory://"], {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiverPort}`,
    OTEL_SERVICE_NAME: "rust-host",
    OTEL_BSP_SCHEDULE_DELAY: "50",
  }, /listening on/);
  await host.up;
  try {
    const client = new TasksClient({ url: `http://127.0.0.1:${port}/mcp`, store: "memory://", notifications: false })
      .onInputRequest(async () => ({ action: "accept", content: { confirm: true } }));
    const turn = trace.getTracer("agent").startSpan("agent turn");
    const execution = await context.with(trace.setSpan(context.active(), turn), () =>
      client.callTool("confirm_delete", { filename: "secret.txt" }),
    );
    assert.equal((await execution.result()).kind, "completed");
    turn.end();
    await client.close();

    const call = spans.getFinishedSpans().find((s) => s.name === "tools/call confirm_delete");
    assert.ok(call, "the client span ended with the outcome");
    const traceId = turn.spanContext().traceId;
    assert.equal(call.spanContext().traceId, traceId);
    assert.equal(call.parentSpanContext?.spanId, turn.spanContext().spanId);
    assert.equal(call.attributes["mcp.task.id"], execution.taskId);
    assert.equal(call.attributes["task.status"], "completed");

    const ofTask = (name) =>
      receiver.received.filter((s) => s.name === name && s.attributes["mcp.task.id"] === execution.taskId);
    for (let i = 0; i < 200 && !(ofTask("task.run").length && ofTask("tasks/update").length); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const [create] = ofTask("tools/call confirm_delete");
    assert.equal(create.trace_id, traceId);
    assert.equal(create.parent_span_id, call.spanContext().spanId, "the create is the client call's child");
    const [run] = ofTask("task.run");
    assert.equal(run.parent_span_id, create.span_id, "the run is the create's child");
    const requests = [...ofTask("tasks/get"), ...ofTask("tasks/update")];
    assert.ok(requests.length >= 2);
    for (const request of requests) {
      assert.equal(request.parent_span_id, call.spanContext().spanId, `${request.name}: the client call's child`);
      assert.deepEqual(request.links, [{ trace_id: traceId, span_id: create.span_id }]);
    }
    assert.ok(!JSON.stringify(receiver.received).includes("secret.txt"), "no argument in any span");
  } finally {
    host.child.kill("SIGKILL");
    receiver.child.kill("SIGKILL");
  }
});

test("the sans-IO TaskDriver sends the context setTrace gave, and keeps it across resume", () => {
  const created = {
    resultType: "task", taskId: "t1", status: "working", createdAt: "2026-09-01T12:00:00.000Z",
    lastUpdatedAt: "2026-09-01T12:00:00.000Z", ttlMs: 60000, pollIntervalMs: 500,
  };
  const carrier = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "rojo=1" };
  const driver = new protocol.TaskDriver(created, Date.parse(created.createdAt));
  driver.setTrace(carrier);
  driver.cancel("stop");
  assert.deepEqual(driver.pollOutgoing(), { method: "tasks/cancel", params: { taskId: "t1", _meta: carrier } });
  const resumed = protocol.TaskDriver.resume(driver.state(), Date.parse(created.createdAt) + 10);
  assert.deepEqual(resumed.pollOutgoing(), { method: "tasks/cancel", params: { taskId: "t1", _meta: carrier } });
  // An invalid context is ignored: nothing is sent.
  const plain = new protocol.TaskDriver(created, Date.parse(created.createdAt));
  plain.setTrace({ traceparent: "nonsense" });
  plain.cancel("stop");
  assert.deepEqual(plain.pollOutgoing(), { method: "tasks/cancel", params: { taskId: "t1" } });
});
