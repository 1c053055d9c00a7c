"""Type stubs of the private native module (checked against the built module by mypy stubtest)."""

from collections.abc import Awaitable, Callable
from typing import final

__all__ = ["Client", "EXTENSION_ID", "Engine", "PROTOCOL_VERSION", "Subscription", "TaskContext", "TaskExecution", "__version__"]
__version__: str
EXTENSION_ID: str
PROTOCOL_VERSION: str

@final
class Engine:
    """The task engine over ``sqlite:///path`` or ``memory://``."""

    def __new__(
        cls,
        store: str,
        default_ttl_ms: int | None = ...,  # 3_600_000; None is unlimited
        default_poll_interval_ms: int = 1000,
        purge_grace_ms: int = 300000,
    ) -> Engine: ...
    def create_task(
        self,
        principal: str,
        tool: str,
        ttl_ms: int | None = None,
        unlimited_ttl: bool = False,
        poll_interval_ms: int | None = None,
    ) -> Awaitable[tuple[str, TaskContext]]: ...
    def get(self, principal: str, task_id: str) -> Awaitable[str]: ...
    def update(self, principal: str, task_id: str, input_responses: str) -> Awaitable[None]: ...
    def cancel(self, principal: str, task_id: str) -> Awaitable[None]: ...
    def subscribe(self, principal: str, task_ids: list[str]) -> Awaitable[Subscription]: ...
    def check_arguments(self, arguments: str) -> None: ...

@final
class TaskContext:
    """The work's handle on its task."""

    @property
    def task_id(self) -> str: ...
    def is_cancelled(self) -> bool: ...
    def cancelled(self) -> Awaitable[None]: ...
    def set_status_message(self, message: str) -> Awaitable[None]: ...
    def request_input(self, requests: str) -> Awaitable[str]: ...
    def complete(self, result: str) -> Awaitable[bool]: ...
    def fail(self, code: int, message: str, data: str | None = None) -> Awaitable[bool]: ...

@final
class Subscription:
    """A listen subscription."""

    @property
    def accepted(self) -> list[str]: ...
    def next(self) -> Awaitable[str | None]: ...

@final
class Client:
    """The task client for one Streamable HTTP endpoint."""

    def __new__(
        cls,
        url: str,
        headers: list[tuple[str, str]] = ...,
        store: str | None = None,
        notifications: bool = True,
        default_poll_ms: int = 1000,
        min_poll_ms: int = 100,
        input_handler: Callable[[str | None, str, str], Awaitable[str | None]] | None = None,
    ) -> Client: ...
    def call_tool(self, name: str, arguments: str) -> Awaitable[tuple[str, str, TaskExecution | None]]: ...
    def resume_all(self) -> Awaitable[list[TaskExecution]]: ...

@final
class TaskExecution:
    """A task being followed."""

    @property
    def task_id(self) -> str: ...
    def latest(self) -> str: ...
    def next_update(self) -> Awaitable[str | None]: ...
    def result(self) -> Awaitable[str]: ...
    def cancel(self, mode: str = "stop") -> None: ...
    def answer(self, key: str, response: str) -> None: ...
