"""A client that starts its server as a child and speaks stdio to it:
``python stdio_client.py target/debug/examples/serve --stdio``."""

import asyncio
import sys

from mcp_tasks import TasksClient


async def main() -> None:
    async with TasksClient(command=sys.argv[1], args=sys.argv[2:]) as client:  # the child ends on exit
        for task in await client.resume_all():
            print("picked up", task.task_id, await task.result())
        execution = await client.call_tool("build_report", {"quarter": "Q3"})
        async for state in execution.updates():
            print(state["status"], state.get("statusMessage", ""))
        print((await execution.value()).content)


asyncio.run(main())
