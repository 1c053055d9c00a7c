"""mcp-tasks: the MCP tasks extension (``io.modelcontextprotocol/tasks``) for mcp 2.x, on a
durable Rust core."""

import atexit as _atexit

from ._native import EXTENSION_ID, METRICS_CONTENT_TYPE, PROTOCOL_VERSION, __version__
from ._native import prepare_exit
from .errors import *  # noqa: F403  (one class per row of core's ERROR_CLASSES)
from .errors import __all__ as _error_names
from .client import Execution, InputRequest, Outcome, TaskExecution, TasksClient, TasksClientExtension
from .server import CurrentTask, TaskConfig, TasksExtension, current_task, default_principal
from .web import WebApp

__all__ = [
    "CurrentTask",
    "EXTENSION_ID",
    "Execution",
    "InputRequest",
    "METRICS_CONTENT_TYPE",
    "Outcome",
    "TaskExecution",
    "TasksClient",
    "TasksClientExtension",
    "PROTOCOL_VERSION",
    "TaskConfig",
    "TasksExtension",
    "WebApp",
    "__version__",
    "current_task",
    "default_principal",
]
__all__ += _error_names

# Before the interpreter finalizes, native threads stop attaching to it (a late completion or
# callback would otherwise crash the process at exit).
_atexit.register(prepare_exit)
