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


def poster(client: httpx.AsyncClient) -> Callable[..., Awaitable[dict[str, Any]]]:
    """``post(method, params, name, headers=None)``: one request through ``client`` to ``/mcp``
    (``name`` is the ``Mcp-Name`` header: the tool or the task id; ``headers`` adds more), its
    JSON answer."""

    async def post(method: str, params: dict[str, Any], name: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
        sent = {**HEADERS, "mcp-method": method, "mcp-name": name, **(headers or {})}
        answer = await client.post("/mcp", content=json.dumps(body), headers=sent)
        return answer.json()  # type: ignore[no-any-return]

    return post
