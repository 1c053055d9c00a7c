"""Caps on live tasks (core's ``EngineConfig``) through ``TasksExtension``: the call beyond the
caller's cap gets -32010 (HTTP 200, as from the Rust host) and ``data.reason``, the client raises
``QuotaExceededError``, and a finished task frees its place."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from mcp.server.mcpserver import MCPServer
from test_vectors import serving

from mcp_tasks import McpTaskError, QuotaExceededError, TaskConfig, TasksClient, TasksExtension

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}


def build() -> MCPServer:
    tasks = TasksExtension("memory://", tools={"sleepy": TaskConfig("required")}, max_live_tasks_per_principal=1)
    server = MCPServer("quota", extensions=[tasks])
    tasks.install(server)

    @server.tool()
    async def sleepy(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "slept"

    return server


async def post(url: str, seconds: float) -> tuple[int, dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "sleepy", "arguments": {"seconds": seconds}, "_meta": META}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "sleepy",
               "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as http:
        response = await http.post(url, json=body, headers=headers)
    return response.status_code, response.json()


async def test_the_call_beyond_the_cap_is_refused_until_a_task_finishes() -> None:
    async with serving(build()) as url:
        status, created = await post(url, 0.5)
        assert status == 200 and created["result"]["resultType"] == "task", created
        status, refused = await post(url, 0.1)
        assert status == 200, refused
        assert refused["error"]["code"] == -32010
        assert refused["error"]["data"] == {"reason": "principal_quota", "limit": 1}
        client = TasksClient(url, store="memory://")
        with pytest.raises(QuotaExceededError) as caught:
            await client.call_tool("sleepy", {"seconds": 0.1})
        assert isinstance(caught.value, McpTaskError) and caught.value.data["reason"] == "principal_quota"
        await asyncio.sleep(0.8)  # the first task finishes: its place is free
        execution = await client.call_tool("sleepy", {"seconds": 0.1})
        assert (await execution.value()).content[0].text == "slept"  # type: ignore[union-attr]
