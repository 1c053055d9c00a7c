"""The Python fragments of docs/ that are not whole programs: each stands here between
``docs:begin NAME`` and ``docs:end NAME``, and tests/docs/check keeps the docs' copy identical to
the region (docs/operating.md). Here each runs: the resumable tool completes as a task, with a
checkpoint per step."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import TasksExtension, current_task

from apps.asgi import poster


def resumable_server(steps: list[int]) -> MCPServer:
    tasks = TasksExtension("memory://")
    server = MCPServer("doc-snippets", extensions=[tasks])
    tasks.install(server)

    async def do_step(step: int) -> None:
        steps.append(step)
        await asyncio.sleep(0)

    # docs:begin resumable
    @tasks.task("required", max_attempts=3, backoff_ms=1_000)
    @server.tool()
    async def build_report() -> str:
        task = current_task()
        start = (task.saved_checkpoint or {}).get("done", 0)
        for step in range(start, 10):
            await do_step(step)
            await task.checkpoint({"done": step + 1})
        return f"built in attempt {task.attempt}"
    # docs:end resumable

    return server


@pytest.mark.asyncio
async def test_the_resumable_fragment_runs_as_a_task_to_its_end() -> None:
    steps: list[int] = []
    app = resumable_server(steps).streamable_http_app(stateless_http=True, json_response=True)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as client,
    ):
        post = poster(client)
        created = (await post("tools/call", {"name": "build_report", "arguments": {}}, "build_report"))["result"]
        assert created["resultType"] == "task", "the fragment makes a task-required tool"
        for _ in range(500):
            got = (await post("tasks/get", {"taskId": created["taskId"]}, created["taskId"]))["result"]
            if got["status"] != "working":
                break
            await asyncio.sleep(0.01)
    assert got["status"] == "completed", got
    assert got["result"]["content"][0]["text"] == "built in attempt 1"
    assert steps == list(range(10))
