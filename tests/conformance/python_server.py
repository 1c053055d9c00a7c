"""The conformance fixture tools on plain mcp 2.x MCPServer + mcp_tasks.TasksExtension.

``python python_server.py PORT [STORE]`` serves 127.0.0.1:PORT/mcp (stateless Streamable HTTP)
until killed; ``python python_server.py --stdio [STORE]`` serves the same tools over stdio until
its stdin closes. STORE defaults to ``memory://``.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult, TextContent
from pydantic import BaseModel
from starlette.requests import Request

from mcp_tasks import TaskConfig, TasksExtension
from mcp_tasks.serving import serve


class Confirm(BaseModel):
    confirm: bool


class Name(BaseModel):
    name: str


async def ask_user_name(params: Any, ctx: Any) -> Any:
    """The MRTR round of test_tool_with_task: ask for user_name before any task exists."""
    answers = params.input_responses or {}
    if "user_name" in answers:
        return None
    return InputRequiredResult(
        input_requests={
            "user_name": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "What is your name?",
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                },
            }
        },
        request_state="round-1",
    )


def authorization_principal(request: Request) -> str:
    """The Rust fixture host's principal (its default): a hash of the Authorization header, so a
    task created with one header is another caller's task for a request with another. A test
    fixture without real auth; a deployment uses mcp's auth (the extension's default). Given as
    ``http_principal`` (it reads only the HTTP request), so core still answers the extension's
    requests without mcp's per-request machinery, as it does with the default."""
    value = request.headers.get("authorization")
    return "anonymous" if value is None else "auth:" + hashlib.sha256(value.encode()).hexdigest()


# The longest slow_compute sleeps (a day): a longer one is refused with the tool error the Rust and
# TypeScript fixtures give (asyncio's timer would overflow on seconds = 1e308). The tools keep
# `-> str`: MCPServer refuses CallToolResult in a union, and passes a returned one through as it is.
MAX_SLEEP_SECONDS = 86_400


def too_long(seconds: float) -> CallToolResult | None:
    if seconds <= MAX_SLEEP_SECONDS:
        return None
    text = f"seconds must be at most {MAX_SLEEP_SECONDS}"
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def build(store: str) -> MCPServer:
    tasks = TasksExtension(
        store,
        http_principal=authorization_principal,
        tools={
            "slow_compute": TaskConfig("optional", poll_interval_ms=200),
            "slow_compute_ctx": TaskConfig("optional", poll_interval_ms=200),
            "failing_job": TaskConfig("required", poll_interval_ms=200),
            "protocol_error_job": TaskConfig("optional", poll_interval_ms=200),
            "confirm_delete": TaskConfig("optional", poll_interval_ms=200),
            "multi_input": TaskConfig("optional", poll_interval_ms=200),
            "test_tool_with_task": TaskConfig("required", poll_interval_ms=200, prepare=ask_user_name),
        },
    )
    server = MCPServer("mcp-tasks-python-fixtures", extensions=[tasks])
    tasks.install(server)

    @server.tool()
    def greet(name: str = "World") -> str:
        """Greets synchronously; never a task."""
        return f"Hello, {name}!"

    @server.tool()
    async def slow_compute(seconds: float = 1.0, label: str = "job") -> str:
        """Sleeps `seconds` then answers."""
        if refused := too_long(seconds):
            return refused  # type: ignore[return-value]  # MCPServer passes a CallToolResult through
        await asyncio.sleep(max(seconds, 0.0))
        return f"Computed {label} in {seconds}s"

    @server.tool()
    async def slow_compute_ctx(ctx: Context, seconds: float = 1.0, label: str = "job") -> str:
        """slow_compute for a tool that takes mcp's Context: its task runs inside mcp's call chain,
        with its request (`tests/reliability/listeners.py python --tool slow_compute_ctx`)."""
        if refused := too_long(seconds):
            return refused  # type: ignore[return-value]  # MCPServer passes a CallToolResult through
        await asyncio.sleep(max(seconds, 0.0))
        return f"Computed {label} in {seconds}s"

    @server.tool()
    async def failing_job() -> CallToolResult:
        """Always ends in a tool-level error."""
        await asyncio.sleep(1.0)
        return CallToolResult(content=[TextContent(type="text", text="failing_job always fails")], is_error=True)

    @server.tool()
    async def protocol_error_job() -> str:
        """Ends with a JSON-RPC error."""
        await asyncio.sleep(0.2)
        raise MCPError(-32603, "protocol_error_job failed at the protocol level")

    @server.tool()
    async def confirm_delete(filename: str, ctx: Context) -> str:
        """Asks for one confirmation."""
        answer = await ctx.elicit(f"Delete {filename}?", Confirm)
        confirmed = answer.action == "accept" and answer.data.confirm
        return f"Deleted {filename}" if confirmed else f"Kept {filename}"

    @server.tool()
    async def multi_input(ctx: Context) -> str:
        """Asks two questions at once."""
        first, second = await asyncio.gather(ctx.elicit("First answer?", Name), ctx.elicit("Second answer?", Name))
        names = [a.data.name if a.action == "accept" else "" for a in (first, second)]
        return "Got " + " and ".join(names)

    @server.tool()
    async def test_tool_with_task(ctx: Context) -> str:
        """Uses the user_name gathered in the MRTR round."""
        answer = (ctx.input_responses or {}).get("user_name")
        content = getattr(answer, "content", None) or (answer or {}).get("content", {}) if answer else {}
        name = content.get("name", "stranger") if isinstance(content, dict) else "stranger"
        await asyncio.sleep(0.2)
        return f"Hello, {name}! Your task is done."

    return server


def main() -> None:
    # The application's own OpenTelemetry SDK, when the trace tests name an OTLP endpoint.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "otel"))
    from app_sdk import configure

    configure()
    store = sys.argv[2] if len(sys.argv) > 2 else "memory://"
    if sys.argv[1] == "--stdio":
        # stdout is the protocol channel: nothing else may be printed there.
        build(store).run("stdio")
        return
    port = int(sys.argv[1])
    app = build(store).streamable_http_app(stateless_http=True, json_response=True)
    print(f"listening on http://127.0.0.1:{port}/mcp", flush=True)
    # What users get from mcp_tasks.serve: uvicorn with core's bounds on connections.
    serve(app, "127.0.0.1", port, log_level="warning")


if __name__ == "__main__":
    main()
