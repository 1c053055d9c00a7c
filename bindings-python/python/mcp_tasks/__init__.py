"""mcp-tasks: the MCP tasks extension (``io.modelcontextprotocol/tasks``) for mcp 2.x, on a
durable Rust core."""

from ._native import EXTENSION_ID, PROTOCOL_VERSION, __version__
from .errors import (
    HeaderMismatchError,
    InternalError,
    InvalidParamsError,
    McpTaskError,
    MethodNotFoundError,
    MissingCapabilityError,
    TaskNotFoundError,
)
from .client import Execution, Outcome, TaskExecution, TasksClient, TasksClientExtension
from .server import CurrentTask, TaskConfig, TasksExtension, current_task, default_principal

__all__ = [
    "CurrentTask",
    "EXTENSION_ID",
    "Execution",
    "Outcome",
    "TaskExecution",
    "TasksClient",
    "TasksClientExtension",
    "PROTOCOL_VERSION",
    "HeaderMismatchError",
    "InternalError",
    "InvalidParamsError",
    "McpTaskError",
    "MethodNotFoundError",
    "MissingCapabilityError",
    "TaskConfig",
    "TaskNotFoundError",
    "TasksExtension",
    "__version__",
    "current_task",
    "default_principal",
]
