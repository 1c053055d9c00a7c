// A TypeScript server with one resumable tool, for test/resume.test.mjs: `count` counts `steps`
// steps of `stepMs` each, saving a checkpoint after each, and resumes from it when the server
// runs it again after a restart (with `confirm`, it asks whether to finish once counted); `sleep`
// is not resumable. With `workers` it is a front-end that only accepts, leaving the work to other
// such servers (workers) on the same PostgreSQL store.
//   node test/resumable-server.mjs PORT STORE [local|workers]
import http from "node:http";

import { McpServer } from "@modelcontextprotocol/server";
import * as z from "zod";

import { TasksServer, currentTask } from "../dist/server.js";
import { configureOtel } from "./otel-sdk.mjs";

// The application's own OpenTelemetry SDK, when the trace tests name an OTLP endpoint.
await configureOtel();
const [port, store, execution] = [Number(process.argv[2]), process.argv[3] ?? "memory://", process.argv[4] ?? "local"];
const tasks = await TasksServer.open({
  store,
  execution,
  // A dead worker's task moves on within a second or two, not 15 s.
  workerLeaseMs: 1000,
  tools: {
    count: { mode: "required", pollIntervalMs: 100, maxAttempts: 3, backoffMs: 200 },
    sleep: { mode: "required", pollIntervalMs: 100 },
  },
});
const handler = tasks.handler(() => {
  const server = new McpServer({ name: "mcp-tasks-resumable", version: "0.1.0" });
  server.registerTool(
    "count",
    { inputSchema: z.object({ steps: z.number().default(10), stepMs: z.number().default(100), confirm: z.boolean().default(false) }) },
    async ({ steps, stepMs, confirm }, ctx) => {
      const task = currentTask(ctx);
      const start = task.savedCheckpoint?.done ?? 0;
      for (let done = start; done < steps; done++) {
        await new Promise((resolve) => setTimeout(resolve, stepMs));
        await task.checkpoint({ done: done + 1 });
        await task.setStatus(`step ${done + 1} of ${steps} (attempt ${task.attempt}, pid ${process.pid})`);
      }
      if (confirm) {
        const answers = await task.requestInput({
          finish: {
            method: "elicitation/create",
            params: {
              mode: "form",
              message: "Counted. Finish?",
              requestedSchema: { type: "object", properties: { confirm: { type: "boolean" } }, required: ["confirm"] },
            },
          },
        });
        if (answers.finish?.action !== "accept" || answers.finish?.content?.confirm !== true) {
          return { content: [{ type: "text", text: `stopped at ${steps} in attempt ${task.attempt}` }] };
        }
      }
      return { content: [{ type: "text", text: `counted to ${steps} in attempt ${task.attempt}, resumed from step ${start}` }] };
    },
  );
  server.registerTool("sleep", { inputSchema: z.object({ seconds: z.number().default(60) }) }, async ({ seconds }) => {
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    return { content: [{ type: "text", text: "slept" }] };
  });
  return server;
});
http.createServer(handler.node).listen(port, "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${port}/mcp`));
