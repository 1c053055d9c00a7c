"""Exceptions raised by mcp-tasks. Each carries the JSON-RPC ``code`` the protocol assigns and
subclasses the Python builtin that fits, so ``except LookupError`` still catches an unknown task."""

from __future__ import annotations

import json
from typing import Any


class McpTaskError(Exception):
    """Base of every mcp-tasks error: a JSON-RPC ``code``, a ``message`` and optional ``data``."""

    code: int
    message: str
    data: Any

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = json.loads(data) if isinstance(data, str) else data

    def to_dict(self) -> dict[str, Any]:
        """The JSON-RPC error object."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class InvalidParamsError(McpTaskError, ValueError):
    """-32602: missing or malformed params, or something over a size limit."""


class TaskNotFoundError(InvalidParamsError, LookupError):
    """-32602: the task id is unknown, purged, or another principal's."""


class MissingCapabilityError(McpTaskError):
    """-32021: the request did not declare a client capability it needs."""


class HeaderMismatchError(McpTaskError, ValueError):
    """-32020: an Mcp-* header disagrees with the body."""


class MethodNotFoundError(McpTaskError, LookupError):
    """-32601: no such method."""


class InternalError(McpTaskError, RuntimeError):
    """-32603: the server failed (store unavailable, work ended without a result, ...)."""


__all__ = [
    "HeaderMismatchError",
    "InternalError",
    "InvalidParamsError",
    "McpTaskError",
    "MethodNotFoundError",
    "MissingCapabilityError",
    "TaskNotFoundError",
]
