"""Core answers ``tasks/*`` and creates the tasks of request-blind tools without mcp's
per-request machinery (``TasksExtension._perform``): the same status and bytes as through mcp,
and mcp's 2026-07-28 entry never reached for them; everything it must see still reaches it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import mcp.server.streamable_http_manager as manager_module
from mcp.server.mcpserver import Context, MCPServer

from mcp_tasks import TaskConfig, TasksExtension, _native, default_principal
from mcp_tasks.server import _Front

from apps.asgi import HEADERS, META, poster


def build(principal: Callable[[Any], str], http_principal: Callable[[Any], str] | None = None) -> MCPServer:
    # A manual clock and sequential ids: the two servers of a test answer byte for byte alike.
    engine = _native.Engine("memory://", clock_start_ms=1_700_000_000_000, id_prefix="t")
    tasks = TasksExtension(
        engine=engine,
        tools={"work": "optional", "aware": "optional"},
        principal=principal,
        http_principal=http_principal,
    )
    server = MCPServer("fast-path", extensions=[tasks])
    tasks.install(server)

    @server.tool()
    async def work(n: int) -> str:
        return f"done {n}"

    @server.tool()
    async def aware(ctx: Context) -> str:
        return "aware"

    return server


@contextmanager
def counting_mcp() -> Iterator[list[str]]:
    """The methods mcp's 2026-07-28 HTTP entry handled, while inside."""
    seen: list[str] = []
    original = manager_module.handle_modern_request

    async def counted(app: Any, security: Any, json_response: Any, state: Any, scope: Any, receive: Any, send: Any) -> None:
        seen.append(dict(scope["headers"]).get(b"mcp-method", b"").decode())
        await original(app, security, json_response, state, scope, receive, send)

    manager_module.handle_modern_request = counted  # type: ignore[assignment]
    try:
        yield seen
    finally:
        manager_module.handle_modern_request = original  # type: ignore[assignment]


# (method, params, Mcp-Name, extra headers): each sent to both servers, in this order.
STEPS: list[tuple[str, dict[str, Any], str, dict[str, str]]] = [
    ("tools/call", {"name": "work", "arguments": {"n": 1}}, "work", {}),
    ("tasks/get", {"taskId": "t-1"}, "t-1", {}),
    ("tools/call", {"name": "work", "arguments": {"n": "not a number"}}, "work", {}),
    ("tasks/get", {"taskId": "t-2"}, "t-2", {}),
    ("tasks/get", {"taskId": "nope"}, "nope", {}),
    ("tasks/cancel", {"taskId": "t-1"}, "t-1", {}),
    ("tasks/update", {"taskId": "t-1", "inputResponses": {"k": {}}}, "t-1", {}),
    ("tasks/get", {"taskId": "t-1"}, "wrong", {}),
    ("tools/call", {"name": "work", "arguments": {"n": 2}}, "work", {"accept": "text/html"}),
    ("tools/call", {"name": "work", "arguments": {"n": 3}}, "work", {"content-type": "text/plain"}),
    ("tools/call", {"name": "aware", "arguments": {}}, "aware", {}),
    ("tasks/get", {"taskId": "t-3"}, "t-3", {}),
]

# The steps that reach mcp at all: core's gate answers a disagreeing Mcp-Name header and a
# Content-Type that is not JSON itself, on every path.
REACH_MCP = [method for method, _, name, extra in STEPS if name != "wrong" and "content-type" not in extra]
# Of those, the ones the fast server still hands to mcp: a refusal of mcp's own transport check
# (Accept) and the tool that takes mcp's Context.
THROUGH_MCP = ["tools/call", "tools/call"]


@asynccontextmanager
async def served(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``app`` in-process, inside the app's lifespan."""
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as client,
    ):
        yield client


# The stack each app of `answers` built: the gate in front of it, or the app's own.
FRONTS: list[Any] = []


class Passing:
    """A Starlette middleware that changes nothing (an auth middleware's place in the app)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


async def answers(server: MCPServer, app_middleware: bool = False) -> list[tuple[int, Any]]:
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    if app_middleware:
        # The gate then decides inside the app, behind its middleware, instead of in front of it.
        app.add_middleware(Passing)
    out: list[tuple[int, Any]] = []
    async with served(app) as client:
        for n, (method, params, name, extra) in enumerate(STEPS):
            body = {"jsonrpc": "2.0", "id": n, "method": method, "params": {**params, "_meta": META}}
            headers = {**HEADERS, "mcp-method": method, "mcp-name": name, **extra}
            response = await client.post("/mcp", content=json.dumps(body), headers=headers)
            out.append((response.status_code, response.json() if response.content.startswith(b"{") else response.text))
            for _ in range(20):  # the tool's run finishes before the next step reads it
                await asyncio.sleep(0)
    FRONTS.append(app.middleware_stack)
    return out


async def test_core_answers_without_mcp_what_mcp_would_answer() -> None:
    with counting_mcp() as through_fast:
        fast = await answers(build(default_principal))
    assert isinstance(FRONTS[-1], _Front), "in front of the app: it has no middleware"
    with counting_mcp() as through_mcp:
        # Any other principal function may read mcp's request: every request goes through mcp.
        slow = await answers(build(lambda ctx: default_principal(ctx)))
    assert through_mcp == REACH_MCP
    assert through_fast == THROUGH_MCP
    for step, (a, b) in zip(STEPS, zip(fast, slow)):
        assert a == b, step
    statuses = [status for status, _ in fast]
    assert statuses[0] == 200 and fast[0][1]["result"]["resultType"] == "task"
    assert fast[1][1]["result"]["status"] == "completed"
    assert fast[3][1]["result"]["status"] == "completed"  # mcp's argument check: an isError result
    assert fast[3][1]["result"]["result"]["isError"] is True
    assert statuses[4] == 400 and statuses[8] == 406 and statuses[9] == 415


async def test_behind_the_apps_own_middleware_core_still_answers_alone() -> None:
    with counting_mcp() as through_fast:
        fast = await answers(build(default_principal), app_middleware=True)
    assert not isinstance(FRONTS[-1], _Front)
    with counting_mcp():
        slow = await answers(build(lambda ctx: default_principal(ctx)), app_middleware=True)
    assert through_fast == THROUGH_MCP
    assert fast == slow


def caller_header(request: Any) -> str:
    """An ``http_principal``: the caller named by a header (a gateway's, say)."""
    return "caller:" + request.headers.get("x-caller", "none")


async def test_an_http_principal_keeps_core_answering_alone_and_binds_tasks_to_it() -> None:
    with counting_mcp() as through_fast:
        fast = await answers(build(default_principal, http_principal=caller_header))
    with counting_mcp() as through_mcp:
        # The same caller read from mcp's request context, by a principal of its own.
        slow = await answers(build(lambda ctx: caller_header(ctx.request)))
    assert through_fast == THROUGH_MCP and through_mcp == REACH_MCP
    assert fast == slow

    server = build(default_principal, http_principal=caller_header)
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    with counting_mcp() as seen:
        async with served(app) as client:
            post = poster(client)

            async def send(method: str, params: dict[str, Any], name: str, caller: str) -> Any:
                return await post(method, params, name, {"x-caller": caller})

            created = await send("tools/call", {"name": "work", "arguments": {"n": 1}}, "work", "a")
            assert created["result"]["taskId"] == "t-1"
            assert "result" in await send("tasks/get", {"taskId": "t-1"}, "t-1", "a")
            other = await send("tasks/get", {"taskId": "t-1"}, "t-1", "b")
            assert other["error"]["code"] == -32602, "another caller's task is not found"
            # A tool that takes mcp's Context goes through mcp: the same caller there.
            aware = await send("tools/call", {"name": "aware", "arguments": {}}, "aware", "b")
            mine = await send("tasks/get", {"taskId": aware["result"]["taskId"]}, aware["result"]["taskId"], "b")
            theirs = await send("tasks/get", {"taskId": aware["result"]["taskId"]}, aware["result"]["taskId"], "a")
            assert "result" in mine and theirs["error"]["code"] == -32602
    assert seen == ["tools/call"], "only the tool that takes a Context reached mcp"


async def test_an_http_principal_that_raises_sends_the_request_to_mcp_which_answers_its_error() -> None:
    def broken(request: Any) -> str:
        raise RuntimeError("no caller")

    server = build(default_principal, http_principal=broken)
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    with counting_mcp() as seen:
        async with served(app) as client:
            answer = await poster(client)("tasks/get", {"taskId": "t-1"}, "t-1")
    assert seen == ["tasks/get"]
    assert answer["error"]["code"] == -32603


async def test_a_prepare_step_or_another_middleware_keeps_mcp_in_the_path() -> None:
    server = build(default_principal)
    tasks = server._extensions[0]  # type: ignore[attr-defined]

    async def prepare(params: Any, ctx: Any) -> None:
        return None

    tasks.configure("work", TaskConfig("optional", prepare=prepare))
    with counting_mcp() as seen:
        await answers(server)
    assert seen.count("tools/call") == REACH_MCP.count("tools/call") and "tasks/get" not in seen

    server = build(default_principal)

    async def passing(ctx: Any, call_next: Any) -> Any:
        return await call_next(ctx)

    server._lowlevel_server.middleware.append(passing)
    with counting_mcp() as seen:
        await answers(server)
    assert seen == REACH_MCP


async def listen_messages(server: MCPServer, created_by: str) -> tuple[list[Any], list[str]]:
    """Creates a task of ``work`` and listens for it through ``server``'s app: the messages of
    the stream (parsed), and the methods mcp's entry handled meanwhile."""
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    with counting_mcp() as seen:
        async with served(app) as client:
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "work", "arguments": {"n": 1}, "_meta": META}}
            await client.post("/mcp", content=json.dumps(call),
                              headers={**HEADERS, "mcp-method": "tools/call", "mcp-name": "work"})
            for _ in range(20):  # the tool's run finishes first: both streams start from its end
                await asyncio.sleep(0)
            listen = {"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen",
                      "params": {"notifications": {"taskIds": [created_by, "not-mine"]}, "_meta": META}}
            response = await client.post("/mcp", content=json.dumps(listen),
                                          headers={**HEADERS, "mcp-method": "subscriptions/listen"})
            assert response.headers["content-type"].startswith("text/event-stream")
    messages = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    return messages, seen


async def test_a_listen_for_tasks_streams_from_core_without_mcp() -> None:
    fast, through_fast = await listen_messages(build(default_principal), "t-1")
    slow, through_mcp = await listen_messages(build(lambda ctx: default_principal(ctx)), "t-1")
    assert "subscriptions/listen" not in through_fast and "subscriptions/listen" in through_mcp
    assert fast == slow, "the same messages as through mcp"
    assert fast[0]["method"] == "notifications/subscriptions/acknowledged"
    assert fast[0]["params"]["notifications"]["taskIds"] == ["t-1"]
    assert [m["params"]["status"] for m in fast[1:-1]] == ["completed"]
    assert fast[-1]["result"]["resultType"] == "complete"


async def test_closing_a_core_listen_ends_its_waiting_next() -> None:
    engine = _native.Engine("memory://", id_prefix="t")
    server = _native.Server(engine, "optional")
    _, task = await engine.create_task("", "tool")  # the default principal's, never finished
    listen = {"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
              "params": {"notifications": {"taskIds": ["t-1"]}, "_meta": META}}
    headers = [(k, v) for k, v in {**HEADERS, "mcp-method": "subscriptions/listen"}.items()]
    routed = server.gate("POST", headers, json.dumps(listen).encode())
    assert isinstance(routed, _native.Routed) and routed.listen
    refusal, stream = await routed.open_listen("")
    assert refusal is None and stream is not None
    assert b"notifications/subscriptions/acknowledged" in stream.ack
    assert b'"status":"working"' in (await stream.next() or b""), "the current state first"
    waiting = asyncio.ensure_future(stream.next())
    await asyncio.sleep(0.05)
    assert not waiting.done(), "no change yet"
    stream.close()  # the client went away
    assert await asyncio.wait_for(waiting, 10) is None
    assert await stream.next() is None, "and stays closed"
    del task
