"""A client for tasks servers, driven by the Rust core: polls at the server's pace, switches to
``subscriptions/listen`` notifications when offered, answers input requests, cancels, persists task
references (SQLite by default) and re-attaches after a restart."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Result

from . import _native

InputHandler = Callable[[str | None, str, dict[str, Any]], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True)
class Outcome:
    """How a call ended: ``kind`` is completed, failed, cancelled, gone or expired."""

    kind: Literal["completed", "failed", "cancelled", "gone", "expired"]
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


def _outcome(data: dict[str, Any]) -> Outcome:
    return Outcome(kind=data["kind"], result=data.get("result"), error=data.get("error"))


class TaskExecution:
    """A task being followed."""

    def __init__(self, native: _native.TaskExecution) -> None:
        self._native = native

    @property
    def task_id(self) -> str:
        return self._native.task_id

    def latest(self) -> dict[str, Any]:
        """The latest state seen (a ``DetailedTask``)."""
        return self._native.latest()

    async def updates(self) -> AsyncIterator[dict[str, Any]]:
        """Each newer state, ending when the task has an outcome."""
        while (state := await self._native.next_update()) is not None:
            yield state

    async def result(self) -> Outcome:
        """Waits for the outcome (and marks it delivered, so ``resume_all`` will not repeat it)."""
        return _outcome(await self._native.result())

    def cancel(self, mode: Literal["stop", "observe"] = "stop") -> None:
        """Sends ``tasks/cancel``; ``observe`` keeps following until the task is terminal."""
        self._native.cancel(mode)

    def answer(self, key: str, response: Mapping[str, Any]) -> None:
        """Answers input request ``key`` (sent with ``tasks/update``)."""
        self._native.answer(key, dict(response))


@dataclass(frozen=True)
class Execution:
    """What a ``tools/call`` became: an immediate result or a task."""

    immediate: dict[str, Any] | None
    task: TaskExecution | None

    async def result(self) -> Outcome:
        if self.task is not None:
            return await self.task.result()
        return Outcome(kind="completed", result=self.immediate)


class TasksClient:
    """A tasks client for one Streamable HTTP endpoint (MCP 2026-07-28).

    ``store``: ``sqlite:///path``, ``memory://``, or None for the default SQLite file
    (``$MCP_TASKS_CLIENT_DB`` or the XDG data dir). ``input_handler`` answers elicitation,
    sampling and roots requests: ``async (task_id, key, request) -> response | None``; create the
    client inside the event loop that should run it.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        store: str | None = None,
        notifications: bool = True,
        default_poll_ms: int = 1000,
        min_poll_ms: int = 100,
        input_handler: InputHandler | None = None,
    ) -> None:
        callback = None
        if input_handler is not None:
            handler = input_handler

            async def callback(task_id: str | None, key: str, request: dict[str, Any]) -> dict[str, Any] | None:
                answer = await handler(task_id, key, request)
                return None if answer is None else dict(answer)

        self._native = _native.Client(
            url,
            headers=list((headers or {}).items()),
            store=store,
            notifications=notifications,
            default_poll_ms=default_poll_ms,
            min_poll_ms=min_poll_ms,
            input_handler=callback,
        )

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> Execution:
        """Calls a tool; MRTR rounds are answered by the input handler and retried."""
        kind, body, task = await self._native.call_tool(name, dict(arguments or {}))
        if kind == "task" and task is not None:
            return Execution(immediate=None, task=TaskExecution(task))
        return Execution(immediate=body, task=None)

    async def resume_all(self) -> list[TaskExecution]:
        """Re-attaches to every task of this endpoint whose outcome was not delivered yet."""
        return [TaskExecution(t) for t in await self._native.resume_all()]


class CreateTaskResult(Result):
    """The flat ``CreateTaskResult`` (``resultType: "task"``) as mcp's client sees it."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class TasksClientExtension(ClientExtension):
    """Makes ``mcp.Client.call_tool`` transparent for task results: the client declares the
    extension, and a ``CreateTaskResult`` is followed to its outcome by the Rust client (same
    endpoint ``url`` and ``headers``), then returned as the ``CallToolResult``. A failed task
    raises ``MCPError`` with its JSON-RPC error; cancelled, gone or expired tasks raise
    ``MCPError`` -32603.

    ``mcp.Client(url, extensions=[TasksClientExtension(url)])``
    """

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        store: str | None = None,
        notifications: bool = True,
        input_handler: InputHandler | None = None,
    ) -> None:
        self._options: dict[str, Any] = {
            "headers": headers,
            "store": store,
            "notifications": notifications,
            "input_handler": input_handler,
        }
        self._url = url
        self._client: TasksClient | None = None

    def settings(self) -> dict[str, Any]:
        return {}

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve)]

    @property
    def client(self) -> TasksClient:
        """The tasks client that follows claimed tasks (created on first use, on the running loop)."""
        if self._client is None:
            self._client = TasksClient(self._url, **self._options)
        return self._client

    async def _resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
        payload = created.model_dump(by_alias=True, mode="json")
        native = await self.client._native.follow(payload, ctx.tool_name, {})
        outcome = await TaskExecution(native).result()
        if outcome.kind == "completed" and outcome.result is not None:
            return CallToolResult.model_validate(outcome.result)
        if outcome.kind == "failed" and outcome.error is not None:
            raise MCPError(outcome.error["code"], outcome.error["message"], outcome.error.get("data"))
        raise MCPError(-32603, f"task {created.task_id} ended {outcome.kind}")


__all__ = [
    "CreateTaskResult",
    "Execution",
    "InputHandler",
    "Outcome",
    "TaskExecution",
    "TasksClient",
    "TasksClientExtension",
]
