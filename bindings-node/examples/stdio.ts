import { TasksClient } from "mcp-tasks";

// node stdio.ts target/debug/examples/serve --stdio
const [command, ...args] = process.argv.slice(2);
const client = new TasksClient({ command, args });
for (const task of await client.resumeAll()) console.log("picked up", task.taskId, await task.result());
const execution = await client.callTool("build_report", { quarter: "Q3" });
for await (const state of execution.updates()) console.log(state.status, state.statusMessage ?? "");
console.log(await execution.value());
await client.close(); // the child's stdin closes and it exits
