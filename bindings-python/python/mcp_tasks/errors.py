"""Exceptions raised by mcp-tasks: one class per row of core's ``ERROR_CLASSES`` (the same names
in Python, TypeScript and Swift; ``tests/test_errors.py`` keeps this module and the table equal).

Every class subclasses :class:`McpTaskError`, itself an ``mcp`` ``MCPError`` (so code that catches
``MCPError`` keeps working), and the Python builtin that fits, so ``except LookupError`` still
catches an unknown task. Each carries the JSON-RPC ``code`` (-32603 for task outcomes, which have
none), the ``message`` and the ``data``; errors with causes (a transport failure) chain them as
``__cause__``."""

from __future__ import annotations

from typing import Any, ClassVar

from mcp.shared.exceptions import MCPError


class McpTaskError(MCPError):
    """Any error from a tasks server or from this library; carries code, message and data."""

    #: The JSON-RPC code of the class (``None`` for the root and task outcomes).
    CODE: ClassVar[int | None] = None

    def __init__(self, code: int | None = None, message: str = "", data: Any = None) -> None:
        if code is None:
            code = self.CODE if self.CODE is not None else -32603
        super().__init__(code, message, data)

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """The JSON-RPC error object."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(McpTaskError, ValueError):
    """-32700: the message was not valid JSON."""

    CODE = -32700


class InvalidRequestError(McpTaskError, ValueError):
    """-32600: the message was not a JSON-RPC request object, or the request was refused."""

    CODE = -32600


class RequestTooLargeError(InvalidRequestError):
    """-32600 (HTTP 413): the request body was over the server's limit."""

    CODE = -32600


class MethodNotFoundError(McpTaskError, LookupError):
    """-32601: the server does not serve the method."""

    CODE = -32601


class InvalidParamsError(McpTaskError, ValueError):
    """-32602: missing or malformed params, something over a size limit, or a misuse of this library."""

    CODE = -32602


class TaskNotFoundError(InvalidParamsError, LookupError):
    """-32602 on tasks/*: the task id is unknown, purged, or another principal's."""

    CODE = -32602


class HeaderMismatchError(McpTaskError, ValueError):
    """-32020: a standard Mcp-* header was missing, repeated or disagreed with the body."""

    CODE = -32020


class MissingCapabilityError(McpTaskError):
    """-32021: the request did not declare a client capability it needs (data.requiredCapabilities)."""

    CODE = -32021


class UnsupportedVersionError(McpTaskError, ValueError):
    """-32022: the server does not speak the request's protocol version (data.supported)."""

    CODE = -32022


class InternalError(McpTaskError, RuntimeError):
    """-32603 or a code this library does not know: a server fault, or a store failure."""

    CODE = -32603


class QuotaExceededError(McpTaskError):
    """-32010: the server's cap on live tasks, the caller's or in total, is reached (data.reason, data.limit)."""

    CODE = -32010


class TransportError(InternalError, ConnectionError):
    """The request could not be sent or its answer not read (the cause chain says why)."""

    CODE = -32603


class TaskCancelledError(McpTaskError):
    """The task ended cancelled (a result was expected)."""


class TaskGoneError(TaskNotFoundError):
    """The server no longer knows a task this client followed (purged or never there)."""

    CODE = -32602


class TaskExpiredError(McpTaskError, TimeoutError):
    """The task's ttlMs passed before it finished."""


__all__ = [
    "HeaderMismatchError",
    "InternalError",
    "InvalidParamsError",
    "InvalidRequestError",
    "McpTaskError",
    "MethodNotFoundError",
    "MissingCapabilityError",
    "ParseError",
    "QuotaExceededError",
    "RequestTooLargeError",
    "TaskCancelledError",
    "TaskExpiredError",
    "TaskGoneError",
    "TaskNotFoundError",
    "TransportError",
    "UnsupportedVersionError",
]
