"""A task whose tool cannot see the request runs without it (so the request's memory goes with
the answer), and one that can see it keeps it: the choice, and both behaving as before."""

from __future__ import annotations

import asyncio
import contextvars
import json
from typing import Any

import httpx
import pytest
from mcp.server.extension import Extension
from mcp.server.mcpserver import Context, MCPServer

from mcp_tasks import TaskConfig, TasksExtension, current_task

from apps.asgi import poster

# Set by an ASGI layer around the app: a request-free run still sees the request's context
# variables (mcp's get_access_token() reads one).
caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="nobody")


class Watching(Extension):
    """An extension after the tasks one that intercepts tools/call (it sees every run)."""

    identifier = "com.example/watching"

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        self.seen.append(params.name)
        return await call_next(ctx)


def build(*later: Extension) -> tuple[TasksExtension, MCPServer]:
    tasks = TasksExtension("memory://", tools={"plain": TaskConfig("required"), "aware": TaskConfig("required")})
    server = MCPServer("request-free", extensions=[tasks, *later])
    tasks.install(server)

    @server.tool()
    async def plain(word: str = "hi") -> str:
        task = current_task()
        assert task is not None
        await asyncio.sleep(0)
        return json.dumps({"word": word, "task": task.task_id, "caller": caller.get()})

    @server.tool()
    async def aware(ctx: Context) -> str:
        task = current_task()
        assert task is not None
        return json.dumps({"task": task.task_id, "has_request": ctx.request_context is not None})

    return tasks, server


def test_only_a_tool_blind_to_the_request_runs_without_it() -> None:
    tasks, _ = build()
    assert tasks._runs_without_request("plain")
    assert not tasks._runs_without_request("aware"), "it takes a Context"
    assert not tasks._runs_without_request("missing")
    watched, _ = build(Watching())
    assert not watched._runs_without_request("plain"), "an interceptor after ours would be skipped"


async def run(server: MCPServer, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Calls ``tool`` as a task and polls it to the end: its id, and what the tool returned."""
    app = server.streamable_http_app(stateless_http=True, json_response=True)

    async def with_caller(scope: Any, receive: Any, send: Any) -> None:
        caller.set("alice")
        await app(scope, receive, send)

    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=with_caller), base_url="http://127.0.0.1:8000") as client,
    ):
        post = poster(client)
        created = await post("tools/call", {"name": tool, "arguments": arguments}, tool)
        task_id = created["result"]["taskId"]
        for _ in range(200):
            got = (await post("tasks/get", {"taskId": task_id}, task_id))["result"]
            if got["status"] != "working":
                assert got["status"] == "completed", got
                return task_id, json.loads(got["result"]["content"][0]["text"])
            await asyncio.sleep(0.01)
    raise AssertionError("the task did not finish")


@pytest.mark.asyncio
async def test_a_request_free_run_answers_as_the_request_bound_one() -> None:
    _, server = build()
    task_id, plain = await run(server, "plain", {"word": "yo"})
    assert (plain["word"], plain["caller"], plain["task"]) == ("yo", "alice", task_id)
    task_id, aware = await run(server, "aware", {})
    assert aware == {"task": task_id, "has_request": True}, "a tool taking a Context still gets the request's"
    watching = Watching()
    _, watched = build(watching)
    await run(watched, "plain", {"word": "w"})
    assert watching.seen == ["plain"], "a later interceptor still sees the run"
