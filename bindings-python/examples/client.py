import asyncio
import os
import sys

from mcp_tasks import InputRequest, TasksClient


async def answer(request: InputRequest) -> dict[str, object] | None:
    print("server asks:", request.method, request.params)
    return {"action": "accept", "content": {"confirm": True}}  # or None: answer later


async def main() -> None:
    url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080/mcp"
    token = os.environ.get("MCP_TOKEN", "")
    client = TasksClient(url, headers={"Authorization": f"Bearer {token}"}, input_handler=answer)
    for task in await client.resume_all():
        print("picked up", task.task_id, await task.result())
    execution = await client.call_tool("build_report", {"quarter": "Q3"})
    async for state in execution.updates():
        print(state["status"], state.get("statusMessage", ""))
    print((await execution.value()).content)  # or raises TaskCancelledError, TaskExpiredError, ...


asyncio.run(main())
