"""Requests to an MCPServer's ASGI app in-process, on the 2026-07-28 wire, for tests that drive a
server without a socket: the standard headers, the ``_meta`` envelope declaring the tasks
extension, and a ``post`` that sends one JSON-RPC request and returns the answer."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}


def poster(client: httpx.AsyncClient) -> Callable[[str, dict[str, Any], str], Awaitable[dict[str, Any]]]:
    """``post(method, params, name)``: one request through ``client`` to ``/mcp`` (``name`` is the
    ``Mcp-Name`` header: the tool or the task id), its JSON answer."""

    async def post(method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
        answer = await client.post("/mcp", content=json.dumps(body), headers={**HEADERS, "mcp-method": method, "mcp-name": name})
        return answer.json()  # type: ignore[no-any-return]

    return post
