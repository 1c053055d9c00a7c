"""The tasks extension for plain ``mcp`` 2.x ``MCPServer`` (SEP-2663, MCP 2026-07-28).

``TasksExtension`` advertises ``io.modelcontextprotocol/tasks``, intercepts ``tools/call`` by
per-tool mode, creates each task durably through the Rust engine *before* answering with the
``CreateTaskResult``, runs the tool in the background through ``call_next``, and serves
``tasks/get``, ``tasks/update`` and ``tasks/cancel``. Inside a task, the tool's ``ctx.elicit``
(and sampling / roots requests) become the task's ``inputRequests``, resumed by ``tasks/update``;
``tasks/cancel`` cancels the running coroutine.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, RequestParams, SubscriptionsListenRequestParams
from pydantic import BaseModel

from . import _native
from .errors import McpTaskError

EXTENSION_ID: str = _native.EXTENSION_ID

Mode = Literal["forbidden", "optional", "required"]
Prepare = Callable[[CallToolRequestParams, ServerRequestContext[Any, Any]], Awaitable[Any]]
PrincipalFn = Callable[[ServerRequestContext[Any, Any]], str]


@dataclass(frozen=True)
class TaskConfig:
    """How one tool runs as a task.

    ``mode``: ``forbidden`` never makes a task; ``optional`` makes one for a client that declared
    the extension on the request and runs synchronously otherwise; ``required`` answers -32021
    to a non-declaring client. ``ttl_ms`` is the task lifetime (``None`` = unlimited, ``"default"``
    = the extension's default). ``prepare`` runs before any task exists and may return an MRTR
    ``InputRequiredResult`` (a model or dict) to answer synchronously; ``None`` proceeds.
    """

    mode: Mode = "optional"
    ttl_ms: int | None | Literal["default"] = "default"
    poll_interval_ms: int | None = None
    prepare: Prepare | None = None


class TaskIdParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel`` params."""

    task_id: str


class UpdateTaskParams(RequestParams):
    """``tasks/update`` params."""

    task_id: str
    # Each response is an object (an ElicitResult, CreateMessageResult, ...): SEP-2663 InputResponses.
    input_responses: dict[str, dict[str, Any]]


def _decode_header(value: str) -> str:
    value = value.strip(" \t")
    if value.startswith("=?base64?") and value.endswith("?="):
        return base64.b64decode(value[len("=?base64?") : -2]).decode()
    return value


def _to_wire(result: Any) -> dict[str, Any]:
    if isinstance(result, BaseModel):
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(result, Mapping):
        return dict(result)
    raise TypeError(f"tool returned {type(result).__name__}, not a CallToolResult")


def _rpc_error(error: McpTaskError) -> MCPError:
    return MCPError(error.code, error.message, error.data)


def default_principal(ctx: ServerRequestContext[Any, Any]) -> str:
    """The authenticated client (mcp's auth context), or ``"anonymous"`` without auth."""
    token = get_access_token()
    if token is None:
        return "anonymous"
    return f"client:{token.client_id}"


class CurrentTask:
    """The running task, as its tool code sees it (from :func:`current_task`)."""

    def __init__(self, native: _native.TaskContext) -> None:
        self._native = native
        self._next_key = 0

    @property
    def task_id(self) -> str:
        """The task id the client polls."""
        return self._native.task_id

    @property
    def cancelled(self) -> bool:
        """True once the task was cancelled or expired (the coroutine is cancelled too)."""
        return self._native.is_cancelled()

    async def set_status(self, message: str) -> None:
        """Sets the task's ``statusMessage`` (seen by ``tasks/get`` and listeners)."""
        await self._native.set_status_message(message)

    async def request_input(self, requests: Mapping[str, Any]) -> dict[str, Any]:
        """Moves the task to ``input_required`` with these ``InputRequests`` (key -> request)
        and returns the answers once ``tasks/update`` has answered every key.
        ``ctx.elicit`` does the same for one elicitation."""
        return dict(await self._native.request_input(dict(requests)))

    async def _ask(self, method: str, params: Mapping[str, Any] | None) -> Any:
        self._next_key += 1
        key = f"{method.replace('/', '.')}-{self._next_key}"
        answers = await self.request_input({key: {"method": method, "params": dict(params or {})}})
        return answers[key]


_current: contextvars.ContextVar[CurrentTask] = contextvars.ContextVar("mcp_tasks_current")


def current_task() -> CurrentTask | None:
    """The task the calling tool code runs as, or ``None`` when it runs synchronously."""
    return _current.get(None)


class _TaskAwareOutbound:
    """Wraps a session's back-channel once. Inside a task (see :func:`current_task`) every
    server-to-client request (``elicitation/create``, ``sampling/createMessage``,
    ``roots/list``) becomes an input request of the task, answered through ``tasks/update``,
    and notifications (progress, logging) are dropped: SEP-2663 delivers none for tasks.
    Outside a task everything goes to the wrapped channel unchanged. Wrapping the session's
    channel instead of copying the session per task keeps a task's start cheap."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> Any:
        task = _current.get(None)
        if task is None:
            return await self._inner.send_raw_request(method, params, opts)
        return await task._ask(method, params)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        if _current.get(None) is None:
            await self._inner.notify(method, params, opts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class TasksExtension(Extension):
    """The ``io.modelcontextprotocol/tasks`` extension for ``MCPServer(extensions=[...])``.

    ``store`` is ``sqlite:///path/to/tasks.db`` (the default ``sqlite:///mcp-tasks.db``: every
    write is in the store's redo log before it returns, so it survives the process dying; add
    ``?durability=full`` to also survive power loss, at an fsync per write),
    ``postgres://user:pass@host/db`` (shared by several server workers) or ``memory://``.
    ``tools`` maps tool names to a :class:`TaskConfig` or a mode string; other tools use
    ``default_mode``. ``principal`` derives the caller a task is bound to. ``engine``
    replaces the store and default settings with an engine built by the caller (tests build one
    with a manual clock and sequential ids).
    """

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(
        self,
        store: str = "sqlite:///mcp-tasks.db",
        *,
        tools: Mapping[str, TaskConfig | Mode] | None = None,
        default_mode: Mode = "forbidden",
        default_ttl_ms: int | None = 3_600_000,
        default_poll_interval_ms: int = 1_000,
        principal: PrincipalFn = default_principal,
        engine: _native.Engine | None = None,
    ) -> None:
        self._engine = engine or _native.Engine(
            store, default_ttl_ms=default_ttl_ms, default_poll_interval_ms=default_poll_interval_ms
        )
        self._tools: dict[str, TaskConfig] = {}
        for name, config in (tools or {}).items():
            self.configure(name, config)
        self._default = TaskConfig(mode=default_mode)
        self._principal = principal
        self._running: set[asyncio.Task[None]] = set()

    @property
    def engine(self) -> _native.Engine:
        """The native engine (for hosts that drive tasks directly)."""
        return self._engine

    def configure(self, tool: str, config: TaskConfig | Mode) -> None:
        """Sets how ``tool`` runs as a task."""
        self._tools[tool] = TaskConfig(mode=config) if isinstance(config, str) else config

    def task(
        self,
        mode: Mode = "optional",
        *,
        name: str | None = None,
        ttl_ms: int | None | Literal["default"] = "default",
        poll_interval_ms: int | None = None,
        prepare: Prepare | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator marking a tool function (register it with ``@server.tool()`` too)."""

        def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.configure(name or fn.__name__, TaskConfig(mode, ttl_ms, poll_interval_ms, prepare))
            return fn

        return mark

    def settings(self) -> dict[str, Any]:
        return {}

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskIdParams, self._get),
            MethodBinding("tasks/update", UpdateTaskParams, self._update),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel),
        ]

    # -- tasks/* ------------------------------------------------------------------------------

    def _declared(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        capabilities = ctx.session.client_capabilities
        extensions = capabilities.extensions if capabilities else None
        return bool(extensions) and EXTENSION_ID in extensions  # type: ignore[operator]

    def _require(self, ctx: ServerRequestContext[Any, Any]) -> None:
        # mcp's own check: -32021 with data.requiredCapabilities naming the extension.
        require_client_extension(ctx, EXTENSION_ID)

    def _check_name(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
        # mcp checks Mcp-Name only for core methods; SEP-2663 adds tasks/* (Mcp-Name = taskId).
        headers = getattr(ctx.request, "headers", None)
        if headers is None:
            return
        name = headers.get("mcp-name")
        if name is None or _decode_header(name) != task_id:
            raise MCPError(-32020, f"Mcp-Name header {name!r} differs from params.taskId {task_id!r}")

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        self._require(ctx)
        self._check_name(ctx, params.task_id)
        try:
            task = await self._engine.get(self._principal(ctx), params.task_id)
        except McpTaskError as e:
            raise _rpc_error(e) from e
        return {"resultType": "complete", **task}

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> dict[str, Any]:
        self._require(ctx)
        self._check_name(ctx, params.task_id)
        try:
            await self._engine.update(self._principal(ctx), params.task_id, params.input_responses)
        except McpTaskError as e:
            raise _rpc_error(e) from e
        return {"resultType": "complete"}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        self._require(ctx)
        self._check_name(ctx, params.task_id)
        try:
            await self._engine.cancel(self._principal(ctx), params.task_id)
        except McpTaskError as e:
            raise _rpc_error(e) from e
        return {"resultType": "complete"}

    # -- subscriptions/listen -------------------------------------------------------------------

    def serve_listen(self, server: Any) -> None:
        """Serves ``notifications/tasks`` on ``server``'s ``subscriptions/listen``.

        mcp's own listen handler knows only the core event kinds and its filter has no
        ``taskIds``, and extensions may not bind spec methods, so this wraps the low-level
        handler: a filter with ``taskIds`` is served from the engine, any other goes to mcp's.
        Call once after ``MCPServer(..., extensions=[tasks])``.
        """
        lowlevel = server._lowlevel_server
        entry = lowlevel.get_request_handler("subscriptions/listen")
        inner = entry.handler if entry is not None else None

        async def listen(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
            raw = (ctx.params or {}).get("notifications")
            task_ids = raw.get("taskIds") if isinstance(raw, Mapping) else None
            if task_ids is None:
                if inner is None:
                    raise MCPError(-32601, "subscriptions/listen is not served")
                return await inner(ctx, params)
            self._require(ctx)
            if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
                raise MCPError(-32602, "notifications.taskIds must be a list of strings")
            return await self._listen_tasks(ctx, task_ids)

        params_type = entry.params_type if entry is not None else SubscriptionsListenRequestParams
        lowlevel.add_request_handler("subscriptions/listen", params_type, listen)

    async def _listen_tasks(self, ctx: ServerRequestContext[Any, Any], task_ids: list[str]) -> dict[str, Any]:
        # The ack first (only ids this caller may see), then the full DetailedTask on every change,
        # every frame stamped with the listen request's id; the stream ends gracefully once every
        # accepted task is terminal.
        meta = {"io.modelcontextprotocol/subscriptionId": ctx.request_id}
        subscription = await self._engine.subscribe(self._principal(ctx), task_ids)
        outbound = ctx.session._request_outbound  # type: ignore[attr-defined]
        await outbound.notify(
            "notifications/subscriptions/acknowledged",
            {"_meta": meta, "notifications": {"taskIds": subscription.accepted}},
        )
        while (state := await subscription.next()) is not None:
            await outbound.notify("notifications/tasks", {"_meta": meta, **state})
        return {"resultType": "complete", "_meta": meta}

    # -- tools/call ----------------------------------------------------------------------------

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]],
    ) -> Any:
        config = self._tools.get(params.name, self._default)
        declared = self._declared(ctx)
        if config.mode == "forbidden" or (config.mode == "optional" and not declared):
            return await call_next(ctx)
        if config.mode == "required" and not declared:
            self._require(ctx)
        if config.prepare is not None:
            answer = await config.prepare(params, ctx)
            if answer is not None:
                return answer
        try:
            ttl = config.ttl_ms
            created, task = await self._engine.create_task(
                self._principal(ctx),
                params.name,
                ttl_ms=None if ttl in ("default", None) else ttl,  # type: ignore[arg-type]
                unlimited_ttl=ttl is None,
                poll_interval_ms=config.poll_interval_ms,
                arguments=params.arguments,
            )
        except McpTaskError as e:
            raise _rpc_error(e) from e
        session = ctx.session
        outbound = session._request_outbound  # type: ignore[attr-defined]
        if not isinstance(outbound, _TaskAwareOutbound):
            session._request_outbound = _TaskAwareOutbound(outbound)  # type: ignore[attr-defined]
        run = asyncio.ensure_future(self._run(call_next, ctx, task))
        # tasks/cancel (or expiry) cancels the runner; the task is already terminal then.
        task.on_cancel(run.cancel)
        self._running.add(run)
        run.add_done_callback(self._running.discard)
        return created

    async def _run(
        self,
        call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]],
        ctx: ServerRequestContext[Any, Any],
        task: _native.TaskContext,
    ) -> None:
        # The runner's context (copied at its creation) carries the task for current_task().
        _current.set(CurrentTask(task))
        try:
            result = _to_wire(await call_next(ctx))
        except asyncio.CancelledError:
            if task.is_cancelled():
                return
            raise  # cancelled for another reason (shutdown)
        except MCPError as e:
            await task.fail(e.error.code, e.error.message, e.error.data)
            return
        except Exception as e:  # the work failed outside the protocol: a server fault
            await task.fail(-32603, f"tool {type(e).__name__}: {e}")
            return
        await task.complete(result)
