// The conformance fixture tools on a TypeScript `McpServer` (@modelcontextprotocol/server 2.x)
// with `mcp-tasks/server`, mounted on node:http.
//   node test/fixture-server.mjs PORT [STORE]     (STORE defaults to memory://)
// Serves 127.0.0.1:PORT/mcp until killed; prints "listening on ..." once it accepts.
import { createHash } from "node:crypto";

import { McpServer, ProtocolError, acceptedContent, inputRequired } from "@modelcontextprotocol/server";
import * as z from "zod";

import { TasksServer } from "../dist/server.js";
import { configureOtel } from "./otel-sdk.mjs";

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });

const text = (value) => ({ content: [{ type: "text", text: value }] });
// The longest slow_compute sleeps (a day): a longer one is refused, as the Rust and Python
// fixtures refuse it (setTimeout would fire at once past 2^31-1 ms, with only a warning).
const MAX_SLEEP_SECONDS = 86_400;
const tooLong = (seconds) =>
  seconds > MAX_SLEEP_SECONDS ? { ...text(`seconds must be at most ${MAX_SLEEP_SECONDS}`), isError: true } : null;

/** The Rust fixture host's principal: a hash of the Authorization header, so a task created
 * with one header is another caller's task for a request with another. A test fixture without
 * real auth; a deployment passes its auth middleware's `authInfo` (the default principal). */
function authorizationPrincipal({ header }) {
  const value = header("authorization");
  return value === undefined ? "anonymous" : `auth:${createHash("sha256").update(value).digest("hex")}`;
}

/** The MRTR round of test_tool_with_task: ask for user_name before any task exists. */
function askUserName(call) {
  if (call.inputResponses?.user_name !== undefined) {
    return undefined;
  }
  return {
    inputRequests: {
      user_name: {
        method: "elicitation/create",
        params: {
          mode: "form",
          message: "What is your name?",
          requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
        },
      },
    },
    state: "round-1",
  };
}

export function fixtureServer() {
  const server = new McpServer({ name: "mcp-tasks-node-fixtures", version: "0.1.0" });
  server.registerTool(
    "greet",
    { description: "Greets synchronously; never a task.", inputSchema: z.object({ name: z.string().default("World") }) },
    async ({ name }) => text(`Hello, ${name}!`),
  );
  server.registerTool(
    "slow_compute",
    {
      description: "Sleeps `seconds` then answers.",
      inputSchema: z.object({ seconds: z.number().default(1), label: z.string().default("job") }),
    },
    async ({ seconds, label }, ctx) => {
      const refused = tooLong(seconds);
      if (refused) return refused;
      await sleep(Math.max(seconds, 0) * 1000, ctx.mcpReq.signal);
      return text(`Computed ${label} in ${seconds}s`);
    },
  );
  // slow_compute's twin for a tool that takes no context (it runs without an SDK exchange; it
  // cannot see a cancel, so it sleeps on after one, while its task is cancelled at once):
  // `tests/reliability/load.py node --tool slow_compute_plain` measures that path.
  server.registerTool(
    "slow_compute_plain",
    {
      description: "Sleeps `seconds` then answers; takes no context.",
      inputSchema: z.object({ seconds: z.number().default(1), label: z.string().default("job") }),
    },
    async ({ seconds, label }) => {
      const refused = tooLong(seconds);
      if (refused) return refused;
      await sleep(Math.max(seconds, 0) * 1000);
      return text(`Computed ${label} in ${seconds}s`);
    },
  );
  server.registerTool("failing_job", { description: "Always ends in a tool-level error." }, async () => {
    await sleep(1000);
    return { ...text("failing_job always fails"), isError: true };
  });
  server.registerTool("protocol_error_job", { description: "Ends with a JSON-RPC error." }, async () => {
    await sleep(200);
    throw new ProtocolError(-32603, "protocol_error_job failed at the protocol level");
  });
  const confirm = z.object({ confirm: z.boolean() });
  server.registerTool(
    "confirm_delete",
    { description: "Asks for one confirmation.", inputSchema: z.object({ filename: z.string() }) },
    async ({ filename }, ctx) => {
      const responses = ctx.mcpReq.inputResponses;
      if (responses?.confirm_delete === undefined) {
        return inputRequired({
          inputRequests: { confirm_delete: inputRequired.elicit({ message: `Delete ${filename}?`, requestedSchema: confirm }) },
        });
      }
      const answer = acceptedContent(responses, "confirm_delete");
      return text(answer?.confirm === true ? `Deleted ${filename}` : `Kept ${filename}`);
    },
  );
  const name = z.object({ name: z.string() });
  server.registerTool("multi_input", { description: "Asks two questions at once." }, async (ctx) => {
    const responses = ctx.mcpReq.inputResponses;
    if (responses?.first === undefined || responses?.second === undefined) {
      return inputRequired({
        inputRequests: {
          first: inputRequired.elicit({ message: "First answer?", requestedSchema: name }),
          second: inputRequired.elicit({ message: "Second answer?", requestedSchema: name }),
        },
      });
    }
    const names = ["first", "second"].map((key) => acceptedContent(responses, key)?.name ?? "");
    return text(`Got ${names.join(" and ")}`);
  });
  server.registerTool("test_tool_with_task", { description: "Uses the user_name gathered in the MRTR round." }, async (ctx) => {
    const who = acceptedContent(ctx.mcpReq.inputResponses, "user_name")?.name ?? "stranger";
    await sleep(200);
    return text(`Hello, ${who}! Your task is done.`);
  });
  return server;
}

export async function openTasks(store) {
  return TasksServer.open({
    store,
    principal: authorizationPrincipal,
    tools: {
      slow_compute: { mode: "optional", pollIntervalMs: 200 },
      slow_compute_plain: { mode: "optional", pollIntervalMs: 200 },
      failing_job: { mode: "required", pollIntervalMs: 200 },
      protocol_error_job: { mode: "optional", pollIntervalMs: 200 },
      confirm_delete: { mode: "optional", pollIntervalMs: 200 },
      multi_input: { mode: "optional", pollIntervalMs: 200 },
      test_tool_with_task: { mode: "required", pollIntervalMs: 200, prepare: askUserName },
    },
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  // The application's own OpenTelemetry SDK, when the trace tests name an OTLP endpoint.
  await configureOtel();
  const port = Number(process.argv[2]);
  const store = process.argv[3] ?? "memory://";
  const tasks = await openTasks(store);
  const handler = tasks.handler(fixtureServer, { legacy: "stateless" });
  // The server users get from handler.nodeServer(): core's bounds on its connections.
  const server = handler.nodeServer();
  server.listen(port, "127.0.0.1", () => {
    console.log(`listening on http://127.0.0.1:${port}/mcp`);
  });
}
