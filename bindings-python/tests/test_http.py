"""TasksExtension on a real mcp 2.3.0 MCPServer over loopback Streamable HTTP."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/conformance/python_server.py"), str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert "listening on" in proc.stdout.readline()
    endpoint = f"http://127.0.0.1:{port}/mcp"
    for _ in range(200):  # ready once uvicorn accepts connections
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            break
        except OSError:
            time.sleep(0.05)
    yield endpoint
    proc.kill()
    proc.wait()


_ids = iter(range(1, 1_000_000))


def call(url: str, method: str, params: dict[str, Any], caps: dict[str, Any] | None = TASKS, headers: dict[str, str] | None = None) -> dict[str, Any]:
    params = {**params, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps or {},
        "io.modelcontextprotocol/clientInfo": {"name": "pytest", "version": "0"},
    }}
    name = params.get("taskId") or params.get("name")
    sent = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if isinstance(name, str):
        sent["Mcp-Name"] = name
    sent.update(headers or {})
    response = httpx.post(url, json={"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}, headers=sent, timeout=10)
    return response.json()


def assert_ack(response: dict[str, Any]) -> None:
    """An empty ack: resultType complete and no task fields (mcp stamps serverInfo _meta)."""
    result = response["result"]
    assert result["resultType"] == "complete"
    assert not {"taskId", "status", "result", "error", "inputRequests"} & result.keys()


def wait_for(url: str, task_id: str, *statuses: str) -> dict[str, Any]:
    for _ in range(400):
        task = call(url, "tasks/get", {"taskId": task_id})["result"]
        if task["status"] in statuses:
            return task
        time.sleep(0.025)
    raise AssertionError(f"{task_id} never reached {statuses}: {task}")


def test_task_then_completed_result(url: str) -> None:
    created = call(url, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.2, "label": "x"}})["result"]
    assert created["resultType"] == "task" and "result" not in created
    task = wait_for(url, created["taskId"], "completed")
    assert task["result"]["content"][0]["text"] == "Computed x in 0.2s"
    assert task["result"]["resultType"] == "complete"


def test_non_declaring_client_runs_synchronously_or_gets_32021(url: str) -> None:
    plain = call(url, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}}, caps={})
    assert "taskId" not in plain["result"]
    required = call(url, "tools/call", {"name": "failing_job", "arguments": {}}, caps={})
    assert required["error"]["code"] == -32021
    assert required["error"]["data"]["requiredCapabilities"]["extensions"] == {"io.modelcontextprotocol/tasks": {}}
    gated = call(url, "tasks/get", {"taskId": "x"}, caps={})
    assert gated["error"]["code"] == -32021


def test_elicitation_inside_a_task_is_answered_by_tasks_update(url: str) -> None:
    created = call(url, "tools/call", {"name": "confirm_delete", "arguments": {"filename": "a.txt"}})["result"]
    task = wait_for(url, created["taskId"], "input_required")
    [(key, request)] = task["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    ack = call(url, "tasks/update", {"taskId": created["taskId"], "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}})
    assert_ack(ack)
    done = wait_for(url, created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "Deleted a.txt"


def test_cancel_stops_the_coroutine_and_stays_cancelled(url: str) -> None:
    created = call(url, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 1.0}})["result"]
    assert_ack(call(url, "tasks/cancel", {"taskId": created["taskId"]}))
    assert wait_for(url, created["taskId"], "cancelled")["status"] == "cancelled"
    time.sleep(1.2)
    assert call(url, "tasks/get", {"taskId": created["taskId"]})["result"]["status"] == "cancelled"


def test_protocol_error_fails_and_tool_error_completes(url: str) -> None:
    failed = call(url, "tools/call", {"name": "protocol_error_job", "arguments": {}})["result"]
    task = wait_for(url, failed["taskId"], "failed", "completed")
    assert task["status"] == "failed" and task["error"]["code"] == -32603
    tool_error = call(url, "tools/call", {"name": "failing_job", "arguments": {}})["result"]
    task = wait_for(url, tool_error["taskId"], "failed", "completed")
    assert task["status"] == "completed" and task["result"]["isError"] is True


def test_mcp_name_must_match_the_task_id(url: str) -> None:
    created = call(url, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}})["result"]
    wrong = call(url, "tasks/get", {"taskId": created["taskId"]}, headers={"Mcp-Name": "not-it"})
    assert wrong["error"]["code"] == -32020
    unknown = call(url, "tasks/get", {"taskId": "no-such-task"})
    assert unknown["error"]["code"] == -32602


def test_listen_streams_task_notifications(url: str) -> None:
    created = call(url, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.3, "label": "n"}})["result"]
    params = {"notifications": {"taskIds": [created["taskId"], "not-mine"]}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": TASKS,
    }}
    body = {"jsonrpc": "2.0", "id": 77, "method": "subscriptions/listen", "params": params}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}
    messages: list[dict[str, Any]] = []
    with httpx.stream("POST", url, json=body, headers=headers, timeout=10) as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                messages.append(json.loads(line[5:]))
                if "result" in messages[-1]:
                    break
    assert messages[0]["method"] == "notifications/subscriptions/acknowledged"
    assert messages[0]["params"]["notifications"]["taskIds"] == [created["taskId"]]
    statuses = [m["params"]["status"] for m in messages if m.get("method") == "notifications/tasks"]
    assert statuses[-1] == "completed" and statuses[0] == "working"
    assert all(m.get("params", m.get("result", {}))["_meta"]["io.modelcontextprotocol/subscriptionId"] == 77 for m in messages)
    assert messages[-1]["result"]["resultType"] == "complete"
    refused = call(url, "subscriptions/listen", {"notifications": {"taskIds": [created["taskId"]]}}, caps={})
    assert refused["error"]["code"] == -32021
