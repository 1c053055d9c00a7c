import { TasksClient } from "mcp-tasks";

const token = process.env.MCP_TOKEN ?? "";
const url = process.argv[2] ?? "http://127.0.0.1:8080/mcp";
const client = new TasksClient({ url, headers: { Authorization: `Bearer ${token}` } })
  .onInputRequest(async ({ method, params }) => ({ action: "accept", content: { confirm: true } }));
for (const task of await client.resumeAll()) console.log("picked up", task.taskId, await task.result());
const execution = await client.callTool("build_report", { quarter: "Q3" }, { signal: AbortSignal.timeout(600_000) });
for await (const state of execution.updates()) console.log(state.status, state.statusMessage ?? "");
console.log(await execution.value()); // { content: [...] }, or throws TaskCancelledError, ...
