import { McpServer } from "@modelcontextprotocol/server";
import * as z from "zod";
import { TasksServer, currentTask } from "mcp-tasks/server";
const tasks = await TasksServer.open({ tools: { build_report: { mode: "optional", pollIntervalMs: 2_000 } } });
const handler = tasks.handler(() => {
  const server = new McpServer({ name: "reports", version: "1.0.0" });
  server.registerTool("build_report", { inputSchema: z.object({ quarter: z.string() }) }, async ({ quarter }, ctx) => {
    await currentTask(ctx)?.setStatus("crunching"); // ctx.mcpReq.signal fires on tasks/cancel
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    return { content: [{ type: "text", text: `report for "${quarter}"` }] };
  });
  return server;
});
const port = Number(process.argv[2] ?? 8080);
// nodeServer(): node:http with core's bounds on connections (timeouts, a cap that sheds).
handler.nodeServer().listen(port, "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${port}/mcp`));
