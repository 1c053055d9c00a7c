"""A tasks server on mcp's MCPServer: ``python server.py [PORT]`` (default 8080), then run a client
example (Rust, Python or Node) against ``http://127.0.0.1:PORT/mcp``."""

import asyncio
import sys

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

from mcp_tasks import TaskConfig, TasksExtension
from mcp_tasks.serving import serve


class Confirm(BaseModel):
    confirm: bool


tasks = TasksExtension("sqlite://tasks.db", tools={"build_report": TaskConfig("optional", poll_interval_ms=2000)})
server = MCPServer("reports", extensions=[tasks])
tasks.install(server)  # listen with taskIds, and core routes the extension's traffic first


@server.tool()
async def build_report(quarter: str, ctx: Context) -> str:
    answer = await ctx.elicit(f"Include drafts for {quarter}?", Confirm)  # becomes the task's inputRequests
    await asyncio.sleep(5)  # long work here; tasks/cancel cancels this coroutine
    drafts = "with" if answer.action == "accept" and answer.data.confirm else "without"
    return f'report for "{quarter}" ({drafts} drafts)'


app = server.streamable_http_app(stateless_http=True)

if __name__ == "__main__":
    # uvicorn with core's bounds on connections: header, body and idle timeouts, a cap that sheds.
    serve(app, "127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8080)
