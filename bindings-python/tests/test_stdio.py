"""The Python client over stdio: ``TasksClient(command=...)`` starts the fixture server as its child
(the Rust host ``fixture-server --stdio``, and mcp 2.3.0 ``MCPServer`` + ``TasksExtension`` run
over stdio) and runs the case list it runs over HTTP; ``mcp.Client`` over stdio with
``TasksClientExtension()`` follows its tasks through its own session."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_client import text

from mcp_tasks import InputRequest, InvalidParamsError, TaskCancelledError, TasksClient, TransportError

ROOT = Path(__file__).resolve().parents[2]
RUST = ROOT / "target/debug/fixture-server"
PYTHON_SERVER = ROOT / "tests/conformance/python_server.py"


def server(kind: str, store: str = "memory://") -> dict[str, Any]:
    """``command`` and ``args`` starting the fixture server ``kind`` over stdio on ``store``."""
    if kind == "rust":
        if not RUST.exists():
            subprocess.run(["cargo", "build", "-q", "-p", "mcp-tasks-fixtures"], cwd=ROOT, check=True)
        return {"command": str(RUST), "args": ["--stdio", "--store", store]}
    return {"command": sys.executable, "args": [str(PYTHON_SERVER), "--stdio", store]}


@pytest.fixture(params=["rust", "python"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("notifications", [False, True])
async def test_poll_or_listen_to_completion(kind: str, notifications: bool) -> None:
    async with TasksClient(**server(kind), store="memory://", notifications=notifications) as client:
        execution = await client.call_tool("slow_compute", {"seconds": 0.3, "label": "pipe"})
        assert execution.task is not None
        states = [state["status"] async for state in execution.task.updates()]
        assert states[-1] == "completed"
        assert text((await execution.result()).result) == "Computed pipe in 0.3s"


async def test_immediate_results_and_errors(kind: str) -> None:
    async with TasksClient(**server(kind), store="memory://") as client:
        execution = await client.call_tool("greet", {"name": "Py"})
        assert execution.task is None and text(execution.immediate) == "Hello, Py!"
        # Every server refuses an unknown tool alike (the Python server too, though mcp's
        # MCPServer would answer it with a tool error: core decides first).
        with pytest.raises(InvalidParamsError) as caught:
            await client.call_tool("no_such_tool")
        assert caught.value.code == -32602
        failed = await (await client.call_tool("protocol_error_job")).result()
        assert failed.kind == "failed" and failed.error is not None and failed.error["code"] == -32603
        tool_error = await (await client.call_tool("failing_job")).result()
        assert tool_error.kind == "completed" and tool_error.result is not None and tool_error.result.is_error


async def test_input_handler_answers_elicitation_and_mrtr(kind: str) -> None:
    asked: list[str] = []

    async def answer(request: InputRequest) -> dict[str, Any]:
        asked.append(request.key)
        message = request.params["message"]
        if request.key == "user_name":
            return {"action": "accept", "content": {"name": "Ada"}}
        if message.startswith("Delete"):
            return {"action": "accept", "content": {"confirm": True}}
        return {"action": "accept", "content": {"name": message.split()[0]}}

    async with TasksClient(**server(kind), store="memory://", input_handler=answer) as client:
        assert text((await (await client.call_tool("confirm_delete", {"filename": "f"})).result()).result) == "Deleted f"
        assert text((await (await client.call_tool("multi_input")).result()).result) == "Got First and Second"
        assert "Ada" in text((await (await client.call_tool("test_tool_with_task")).result()).result)
    assert len(asked) == 4, asked  # one confirm, two parallel questions, one MRTR round


async def test_answer_later_and_cancel(kind: str) -> None:
    async with TasksClient(**server(kind), store="memory://") as client:
        execution = await client.call_tool("confirm_delete", {"filename": "g"})
        assert execution.task is not None
        async for state in execution.task.updates():
            if state["status"] == "input_required":
                [key] = state["inputRequests"]
                await execution.answer(key, {"action": "decline"})
                break
        assert text((await execution.result()).result) == "Kept g"
        slow = await client.call_tool("slow_compute", {"seconds": 30})
        slow.cancel()
        with pytest.raises(TaskCancelledError):
            await slow.value()


async def test_a_sigkilled_client_resumes_and_learns_the_work_died_with_its_child(kind: str, tmp_path: Path) -> None:
    """A client process killed with SIGKILL takes its child with it (the child's stdin closes). The
    next client restarts the server on the same SQLite file, which reports the unfinished task
    failed, and ``resume_all`` delivers that once."""
    target = server(kind, f"sqlite://{tmp_path / 'server.db'}")
    store = f"sqlite://{tmp_path / 'client.db'}"
    script = textwrap.dedent(f"""
        import asyncio
        from mcp_tasks import TasksClient
        async def main():
            client = TasksClient(command={target["command"]!r}, args={target["args"]!r}, store={store!r})
            execution = await client.call_tool("slow_compute", {{"seconds": 60}})
            print(execution.task_id, flush=True)
            await asyncio.sleep(120)
        asyncio.run(main())
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    task_id = child.stdout.readline().strip()
    assert task_id, "the child client created a task"
    child.kill()
    child.wait()
    async with TasksClient(**target, store=store) as again:
        [resumed] = await again.resume_all()
        assert resumed.task_id == task_id
        outcome = await asyncio.wait_for(resumed.result(), 30)
        assert outcome.kind == "failed" and outcome.error is not None, outcome
        assert "stopped" in outcome.error["message"] or "restart" in outcome.error["message"], outcome.error
        assert await again.resume_all() == []


async def test_options_reach_the_child_and_bad_ones_are_refused(tmp_path: Path) -> None:
    script = (
        'read line; printf \'{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete",'
        '"content":[{"type":"text","text":"%s %s"}]}}\\n\' "$GREETING" "$(pwd)"; cat >/dev/null'
    )
    async with TasksClient(
        command="sh", args=["-c", script], env={"GREETING": "hi"}, cwd=tmp_path, store="memory://"
    ) as client:
        answer = await client.call_tool("greet")
        assert text(answer.immediate) == f"hi {tmp_path.resolve()}"
    with pytest.raises(TransportError):
        await client.call_tool("greet")  # closed
    with pytest.raises(InvalidParamsError, match="not both"):
        TasksClient("http://127.0.0.1:1/mcp", command="x")
    with pytest.raises(InvalidParamsError, match="url or a stdio command"):
        TasksClient()
    with pytest.raises(InvalidParamsError, match="inherit, capture or discard"):
        TasksClient(command="x", stderr="loud")  # type: ignore[arg-type]


async def test_a_server_that_writes_junk_or_dies_is_a_clear_error() -> None:
    junk = TasksClient(command="sh", args=["-c", "read line; echo 'hello, not json'; sleep 5"], store="memory://")
    with pytest.raises(TransportError, match="not JSON-RPC: hello, not json"):
        await junk.call_tool("greet")
    await junk.close()
    dying = TasksClient(command="sh", args=["-c", "echo 'bad config' >&2; exit 3"], stderr="capture", store="memory://")
    with pytest.raises(TransportError, match="exit status: 3.*bad config"):
        await dying.call_tool("greet")


async def test_mcp_client_over_stdio_follows_tasks_through_its_session(kind: str, tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.shared.exceptions import MCPError

    from mcp_tasks import TaskExecution, TasksClientExtension

    target = server(kind)
    seen: list[TaskExecution] = []
    extension = TasksClientExtension(store=f"sqlite://{tmp_path / 'ext.db'}", on_task=seen.append)
    params = StdioServerParameters(command=target["command"], args=target["args"])
    async with Client(params, extensions=[extension]) as client:
        result = await client.call_tool("slow_compute", {"seconds": 0.2, "label": "session"})
        assert text(result) == "Computed session in 0.2s"
        assert seen and seen[0].latest()["status"] == "completed"
        plain = await client.call_tool("greet", {"name": "pipe"})
        assert text(plain) == "Hello, pipe!"
        with pytest.raises(MCPError) as failed:
            await client.call_tool("protocol_error_job", {})
        assert failed.value.code == -32603
        # Cancelled with its caller: tasks/cancel goes through the same session.
        call = asyncio.ensure_future(client.call_tool("slow_compute", {"seconds": 30}))
        while len(seen) < 3:
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert (await seen[2].result()).kind == "cancelled"
        # The server agrees (asked through the same session).
        answer = await extension._session_transport.request("tasks/get", {"taskId": seen[2].task_id})
        assert answer["result"]["status"] == "cancelled", answer
    await extension.client.close()
