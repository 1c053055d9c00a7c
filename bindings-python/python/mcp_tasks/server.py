"""The tasks extension for plain ``mcp`` 2.x ``MCPServer`` (SEP-2663, MCP 2026-07-28).

``TasksExtension`` advertises ``io.modelcontextprotocol/tasks``, intercepts ``tools/call`` by
per-tool mode, creates each task durably through the Rust engine *before* answering with the
``CreateTaskResult``, runs the tool in the background through ``call_next``, and serves
``tasks/get``, ``tasks/update`` and ``tasks/cancel``. Inside a task, the tool's ``ctx.elicit``
(and sampling / roots requests) become the task's ``inputRequests``, resumed by ``tasks/update``;
``tasks/cancel`` cancels the running coroutine.

A tool configured with ``max_attempts`` is resumable: its task is stored with its call, and when
the process running it dies the task runs again (attempt 2, 3, ...) instead of failing, from the
checkpoint its code saved with ``current_task().checkpoint(...)``. ``execution="workers"`` makes
a front-end that only accepts tasks; ``python -m mcp_tasks worker module:server`` runs them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY, SERVER_INFO_META_KEY, CallToolRequestParams, RequestParams
from mcp_types.methods import is_input_required
from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.routing import Route

try:  # mcp 2.3.0's transport checks, repeated where core performs a request without mcp
    from mcp.server._otel import OpenTelemetryMiddleware
    from mcp.server.request_state import RequestStateBoundary
    from mcp.server.streamable_http import check_accept_headers
    from mcp.server.transport_security import TransportSecurityMiddleware
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - another mcp: every request goes through it
    TransportSecurityMiddleware = None  # type: ignore[assignment,misc]

from . import _native, _otel

EXTENSION_ID: str = _native.EXTENSION_ID

_log = logging.getLogger("mcp_tasks")

Mode = Literal["forbidden", "optional", "required"]
Execution = Literal["local", "workers"]
Prepare = Callable[[CallToolRequestParams, ServerRequestContext[Any, Any]], Awaitable[Any]]
PrincipalFn = Callable[[ServerRequestContext[Any, Any]], str]
HttpPrincipalFn = Callable[[Request], str]


@dataclass(frozen=True)
class TaskConfig:
    """How one tool runs as a task.

    ``mode``: ``forbidden`` never makes a task; ``optional`` makes one for a client that declared
    the extension on the request and runs synchronously otherwise; ``required`` answers -32021
    to a non-declaring client. ``ttl_ms`` is the task lifetime (``None`` = unlimited, ``"default"``
    = the extension's default). ``prepare`` runs before any task exists and may return an MRTR
    ``InputRequiredResult`` (a model or dict) to answer synchronously; ``None`` proceeds.
    ``max_attempts`` makes the tool resumable: when the process running its task dies, the task
    runs again, up to that many attempts in all, waiting ``backoff_ms`` (core's default when
    ``None``) before the second and twice as long before each later one. Execution is at least
    once, so the tool must be idempotent; completion stays exactly once.
    """

    mode: Mode = "optional"
    ttl_ms: int | None | Literal["default"] = "default"
    poll_interval_ms: int | None = None
    prepare: Prepare | None = None
    max_attempts: int | None = None
    backoff_ms: int | None = None

    def _options(self) -> dict[str, Any]:
        """The task options as the native engine takes them (``create_task``, ``enqueue_task``,
        ``Routed.create``): ``ttl_ms=None`` is the engine's default, ``unlimited_ttl`` none."""
        ttl = self.ttl_ms
        return {
            "ttl_ms": None if ttl in ("default", None) else ttl,
            "unlimited_ttl": ttl is None,
            "poll_interval_ms": self.poll_interval_ms,
            "max_attempts": self.max_attempts,
            "backoff_ms": self.backoff_ms,
        }


class _AnyParams(RequestParams):
    """Accepts any ``tasks/*`` params: the core dispatcher checks them (from ``ctx.params``), so
    a malformed request gets the same error from this server as from the Rust host."""

    model_config = ConfigDict(extra="allow")


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]


class _Gate:
    """The ASGI wrapper of :meth:`TasksExtension.gate`."""

    def __init__(self, extension: TasksExtension, app: ASGIApp) -> None:
        self._extension = extension
        self._server = extension._server
        self._app = app
        self._limit = self._server.max_body_bytes
        # Set by install() for the app it builds (None for a hand-mounted one): mcp's transport
        # checks, which a request core performs itself must pass as they would in mcp.
        self.transport: _Transport | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get(_DECIDED):  # decided in front of the app already (_Front): mcp's now
            return await self._app(scope, receive, send)
        return await self.decide(scope, receive, send, self._app)

    async def decide(self, scope: dict[str, Any], receive: Any, send: Any, fallback: ASGIApp) -> None:
        """Answers a POST core decides, or hands it (its body unchanged) to ``fallback``."""
        if scope["type"] != "http" or scope["method"] != "POST":
            return await fallback(scope, receive, send)
        chunks: list[bytes] = []
        size = 0
        more = True
        while more and size <= self._limit:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nothing to answer
                return
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        answer = self._server.gate(scope["method"], headers, None if size > self._limit else body)
        if isinstance(answer, _native.Routed) and answer.listen:
            opened = await self._extension._open_listen_early(answer, scope, self.transport)
            if opened is not None and opened[1] is not None:
                return await _send_listen(opened[1], receive, send)
            answer = None if opened is None else opened[0]
        elif isinstance(answer, _native.Routed):
            answer = await self._extension._perform(answer, scope, self.transport)
        if answer is not None:
            status, extra, payload = answer
            raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in extra]
            raw.append((b"content-length", str(len(payload)).encode("ascii")))
            await send({"type": "http.response.start", "status": status, "headers": raw})
            await send({"type": "http.response.body", "body": payload})
            return None
        scope[_DECIDED] = True
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await fallback(scope, replay, send)


# Set on a request's ASGI scope once core decided it: the gate inside the app lets it through.
_DECIDED = "mcp_tasks.decided"

_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


async def _send_listen(listen: _native.SseListen, receive: Any, send: Any) -> None:
    """Sends a listen stream core opened and framed: its acknowledgement, each state, then the
    closing result. It stops when the client goes away (an ``http.disconnect``), which would
    otherwise leave it waiting for its tasks' next change."""
    await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
    await send({"type": "http.response.body", "body": listen.ack, "more_body": True})
    # The body was read whole already: what receive() gives next is the disconnect.
    gone = asyncio.ensure_future(receive())
    gone.add_done_callback(lambda _: listen.close())
    try:
        while (event := await listen.next()) is not None:
            await send({"type": "http.response.body", "body": event, "more_body": True})
        if not gone.done():
            await send({"type": "http.response.body", "body": listen.close_event})
    finally:
        gone.cancel()
        listen.close()


class _Front:
    """The gate in front of the whole Starlette app ``install()`` builds, when nothing of the
    app's runs before its MCP route (no middleware: no auth, the only such middleware mcp adds):
    the requests core answers then skip Starlette's error and exception layers and its router
    as well; every other request goes through the app, where the gate inside lets it pass."""

    def __init__(self, gate: _Gate, path: str, app: ASGIApp) -> None:
        self._gate = gate
        self._path = path
        self._app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # Mounted under a prefix (a root_path), the app's own router matches: it goes through.
        if scope["type"] == "http" and scope["path"] == self._path and not scope.get("root_path"):
            return await self._gate.decide(scope, receive, send, self._app)
        return await self._app(scope, receive, send)


@dataclass(frozen=True)
class _Transport:
    """What mcp's 2026-07-28 HTTP entry checks before it dispatches (its session manager's
    settings): a request core performs without mcp is checked the same way first, and handed to
    mcp, which answers the refusal itself, when it fails."""

    security: TransportSecurityMiddleware
    json_response: bool

    async def admits(self, scope: dict[str, Any]) -> bool:
        request = Request(scope)
        if await self.security.validate_request(request, is_post=True) is not None:
            return False
        has_json, has_sse = check_accept_headers(request)
        return has_json and (self.json_response or has_sse)


def _headers(ctx: ServerRequestContext[Any, Any]) -> list[tuple[str, str]] | None:
    """The request's HTTP headers as pairs (repeats kept), or None off HTTP (stdio)."""
    headers = getattr(ctx.request, "headers", None)
    return None if headers is None else list(headers.items())


def _to_wire(result: Any) -> dict[str, Any]:
    if isinstance(result, BaseModel):
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(result, Mapping):
        return dict(result)
    raise TypeError(f"tool returned {type(result).__name__}, not a CallToolResult")


def default_principal(ctx: ServerRequestContext[Any, Any]) -> str:
    """The authenticated client (mcp's auth context), or ``"anonymous"`` without auth."""
    token = get_access_token()
    if token is None:
        return "anonymous"
    return f"client:{token.client_id}"


class CurrentTask:
    """The running task, as its tool code sees it (from :func:`current_task`)."""

    # One per task in flight: no per-instance dict.
    __slots__ = ("_native", "_next_key")

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

    @property
    def attempt(self) -> int:
        """This run's attempt: 1 at first, 2 or more when a resumable tool runs again after the
        process running it died."""
        return self._native.attempt

    @property
    def saved_checkpoint(self) -> Any:
        """The checkpoint saved last (by this attempt or an earlier one), or ``None``."""
        return self._native.saved_checkpoint()

    async def checkpoint(self, value: Any) -> None:
        """Saves ``value`` (JSON: a dict, list, str, number...; 64 KiB at most) durably with the
        task, for a later attempt to resume from if this one is cut short."""
        await self._native.checkpoint(value)

    async def set_status(self, message: str) -> None:
        """Sets the task's ``statusMessage`` (seen by ``tasks/get`` and listeners)."""
        await self._native.set_status_message(message)

    async def request_input(self, requests: Mapping[str, Any]) -> dict[str, Any]:
        """Moves the task to ``input_required`` with these ``InputRequests`` (key -> request)
        and returns the answers once ``tasks/update`` has answered every key.
        ``ctx.elicit`` does the same for one elicitation."""
        _otel.event("task.input_requested", len(requests))
        answers = dict(await self._native.request_input(dict(requests)))
        _otel.event("task.input_received", len(answers))
        return answers

    async def _ask(self, method: str, params: Mapping[str, Any] | None) -> Any:
        self._next_key += 1
        key = f"{method.replace('/', '.')}-{self._next_key}"
        answers = await self.request_input({key: {"method": method, "params": dict(params or {})}})
        return answers[key]


_current: contextvars.ContextVar[CurrentTask] = contextvars.ContextVar("mcp_tasks_current")
# The tools/call decision install()'s middleware made for the request being handled.
_early_dispatch: contextvars.ContextVar[str] = contextvars.ContextVar("mcp_tasks_early_dispatch")


def _client_capabilities(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any] | None:
    """The ``clientCapabilities`` of the request's ``_meta`` (MCP 2026-07-28), or ``None`` when it
    carries none (a 2025-era session's request)."""
    meta = (ctx.params or {}).get("_meta")
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, Mapping) else None
    return capabilities if isinstance(capabilities, dict) else None


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

    ``store`` is ``sqlite:///path/to/tasks.db`` (the default ``sqlite://mcp-tasks.db``, in the working
    directory: every write is in the store's redo log before it returns, so it survives the process dying; add
    ``?durability=full`` to also survive power loss, at an fsync per write),
    ``postgres://user:pass@host/db`` (shared by several server workers) or ``memory://``.
    ``tools`` maps tool names to a :class:`TaskConfig` or a mode string; other tools use
    ``default_mode``. ``principal`` derives the caller a task is bound to from mcp's request
    context; ``http_principal``, when given, derives it instead from the HTTP request (a
    Starlette ``Request``: its headers, client, and ``scope``) of every request that comes over
    HTTP, which lets core answer the extension's requests without mcp's per-request machinery
    (a ``principal`` of its own sends every request through mcp, which it may read). ``engine``
    replaces the store and default settings with an engine built by the caller (tests build one
    with a manual clock and sequential ids). ``max_live_tasks_per_principal`` and
    ``max_live_tasks`` cap the live (``working`` or ``input_required``) tasks, per caller and in
    total: a call that would create one more is answered -32010 with ``data.reason``
    ``principal_quota`` or ``server_quota`` and ``data.limit``. ``execution="workers"`` makes a
    front-end: task calls are stored with their arguments and answered, and worker processes
    (:meth:`serve_worker`, ``python -m mcp_tasks worker module:server``) on the same PostgreSQL
    store run them; with ``"local"`` (the default) this process runs them, and also resumes
    resumable tasks a dead process left. ``worker_lease_ms`` (core's default, 15 s, when
    ``None``) is how long after a worker on PostgreSQL dies its tasks are failed or resumed.
    ``request_state_key`` seals each MRTR round's ``requestState`` for the caller (``principal``)
    and the tool, inside mcp's own sealing (which binds it to mcp's auth only), so one caller
    cannot replay another's round: random per process by default; give every process serving
    one endpoint the same key.
    """

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(
        self,
        store: str = "sqlite://mcp-tasks.db",
        *,
        tools: Mapping[str, TaskConfig | Mode] | None = None,
        default_mode: Mode = "forbidden",
        default_ttl_ms: int | None | Literal["default"] = "default",
        default_poll_interval_ms: int | None = None,
        principal: PrincipalFn = default_principal,
        http_principal: HttpPrincipalFn | None = None,
        engine: _native.Engine | None = None,
        max_live_tasks_per_principal: int | None = None,
        max_live_tasks: int | None = None,
        execution: Execution = "local",
        worker_lease_ms: int | None = None,
        request_state_key: bytes | str | None = None,
    ) -> None:
        self._store = store
        self._engine = engine or _native.Engine(
            store,
            default_ttl_ms=None if default_ttl_ms in ("default", None) else default_ttl_ms,  # type: ignore[arg-type]
            unlimited_ttl=default_ttl_ms is None,
            default_poll_interval_ms=default_poll_interval_ms,
            max_live_tasks_per_principal=max_live_tasks_per_principal,
            max_live_tasks=max_live_tasks,
            worker_lease_ms=worker_lease_ms,
        )
        # Every protocol decision (envelope, headers, mode, routing, errors, listen frames) is the
        # core dispatcher's; this class adapts it to mcp.
        key = request_state_key.encode() if isinstance(request_state_key, str) else request_state_key
        self._server = _native.Server(self._engine, default_mode, key)
        self._tools: dict[str, TaskConfig] = {}
        for name, config in (tools or {}).items():
            self.configure(name, config)
        self._default = TaskConfig(mode=default_mode)
        self._principal = principal
        self._http_principal = http_principal
        self._sdk_listen = False
        self._running: set[asyncio.Task[None]] = set()
        if execution not in ("local", "workers"):
            raise ValueError(f'execution {execution!r} is not "local" or "workers"')
        self._execution = execution
        self._mcp_server: Any = None
        self._executing = False
        # Per tool: the mcp tool object seen last, and whether core may create its tasks alone.
        self._alone: dict[str, tuple[Any, bool]] = {}

    @property
    def engine(self) -> _native.Engine:
        """The native engine (for hosts that drive tasks directly)."""
        return self._engine

    def web_app(self, *, prefix: str = "", **options: Any) -> Any:
        """The operator's web view of this extension's store as an ASGI app
        (:class:`mcp_tasks.WebApp`; ``options`` as its): mount it beside the MCP endpoint, e.g.
        Starlette's ``Mount("/tasks", app=extension.web_app(prefix="/tasks", token_file=...))``.
        A ``memory://`` store has no web view (nothing outside the engine can read it)."""
        from .web import WebApp

        return WebApp(self._store, prefix=prefix, **options)

    def metrics(self) -> str:
        """The engine's metrics in the Prometheus exposition format (OpenMetrics text; answer a
        scrape with ``mcp_tasks.METRICS_CONTENT_TYPE``). The metric names are core's, listed in
        docs/operating.md, "Metrics and logs"."""
        return self._engine.metrics_text()

    def configure(self, tool: str, config: TaskConfig | Mode) -> None:
        """Sets how ``tool`` runs as a task."""
        config = TaskConfig(mode=config) if isinstance(config, str) else config
        self._server.configure(tool, config.mode)
        self._tools[tool] = config

    def task(
        self,
        mode: Mode = "optional",
        *,
        name: str | None = None,
        ttl_ms: int | None | Literal["default"] = "default",
        poll_interval_ms: int | None = None,
        prepare: Prepare | None = None,
        max_attempts: int | None = None,
        backoff_ms: int | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator marking a tool function (register it with ``@server.tool()`` too)."""

        def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
            config = TaskConfig(mode, ttl_ms, poll_interval_ms, prepare, max_attempts, backoff_ms)
            self.configure(name or fn.__name__, config)
            return fn

        return mark

    def settings(self) -> dict[str, Any]:
        return {}

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", _AnyParams, self._tasks_method),
            MethodBinding("tasks/update", _AnyParams, self._tasks_method),
            MethodBinding("tasks/cancel", _AnyParams, self._tasks_method),
        ]

    # -- tasks/* ------------------------------------------------------------------------------

    async def _tasks_method(self, ctx: ServerRequestContext[Any, Any], params: _AnyParams | None) -> dict[str, Any]:
        # Core's errors are mcp MCPErrors (McpTaskError subclasses it): mcp answers them as they are.
        principal = self._principal_of(ctx)
        try:
            return await self._server.handle(ctx.method, ctx.params, _headers(ctx), principal)
        finally:
            # mcp's span of this request links to the task's trace (its create and runs).
            task_id = (ctx.params or {}).get("taskId")
            if isinstance(task_id, str) and _otel.recording():
                _otel.annotate(task_id)
                _otel.link(await self._engine.task_trace(principal, task_id))

    # -- install: listen and the early routing of extension traffic ---------------------------

    def install(self, server: Any) -> None:
        """Completes the extension on ``server``; call once after ``MCPServer(..., extensions=[tasks])``.

        It adds a server middleware (what an mcp ``Extension`` cannot contribute by itself) that
        hands ``tasks/*``, ``tools/call`` and ``subscriptions/listen`` to core's dispatcher *before*
        mcp validates their params with its own models, so a malformed request gets the same answer
        here as from the Rust host. It also serves ``subscriptions/listen`` with ``taskIds``
        (``notifications/tasks``), which mcp's own listen handler cannot express; a filter without
        ``taskIds`` still reaches mcp's handler.
        """
        self._mcp_server = server
        lowlevel = server._lowlevel_server
        self._sdk_listen = lowlevel.get_request_handler("subscriptions/listen") is not None
        lowlevel.middleware.append(self._route_early)
        # mcp picks its legacy (2025) transport from the MCP-Protocol-Version header alone, before
        # any middleware runs; the app streamable_http_app() builds is gated so that core answers
        # an extension request whose header is missing or disagrees with its body (see gate()).
        build = lowlevel.streamable_http_app

        def streamable_http_app(*args: Any, **kwargs: Any) -> Any:
            app = build(*args, **kwargs)
            manager = lowlevel._session_manager
            gate = _Gate(self, manager.asgi_app)
            # mcp stamps its serverInfo on the results it serializes: so does core, on the
            # CreateTaskResults it answers without mcp.
            stamp = getattr(lowlevel, "server_info_stamp", None)
            self._server.set_result_meta(None if stamp is None else {SERVER_INFO_META_KEY: stamp})
            if TransportSecurityMiddleware is not None:
                security = TransportSecurityMiddleware(getattr(manager, "security_settings", None))
                gate.transport = _Transport(security, bool(getattr(manager, "json_response", False)))
            manager.asgi_app = gate
            self._put_in_front(app, gate, manager)
            run = manager.run

            # Resumable tasks a dead process left run again as soon as the app starts.
            @contextlib.asynccontextmanager
            async def run_with_executor() -> Any:
                async with run():
                    self._start_local_executor()
                    try:
                        yield
                    finally:
                        self.stop_executor()

            manager.run = run_with_executor
            return app

        lowlevel.streamable_http_app = streamable_http_app

    @staticmethod
    def _put_in_front(app: Any, gate: _Gate, manager: Any) -> None:
        """Puts ``gate`` in front of the Starlette ``app`` (see :class:`_Front`) when, as its
        stack is built (on the first request), no middleware of the app runs before its MCP route
        (one route to mcp's ASGI app for ``manager`` itself, not wrapped for auth)."""
        build = getattr(app, "build_middleware_stack", None)
        if build is None:
            return

        def build_with_front() -> Any:
            stack = build()
            if getattr(app, "user_middleware", None) != []:
                return stack
            paths = [
                route.path
                for route in getattr(app, "routes", [])
                if isinstance(route, Route) and getattr(route.endpoint, "session_manager", None) is manager
            ]
            return _Front(gate, paths[0], stack) if len(paths) == 1 else stack

        app.build_middleware_stack = build_with_front

    def gate(self, app: ASGIApp) -> ASGIApp:
        """Wraps the ASGI app serving the MCP endpoint so core decides each POST first.

        A request core refuses (a missing, repeated or disagreeing standard header, a ``_meta``
        revision it does not speak, a malformed extension request, a body over its limit) gets
        core's answer, the same status and bytes as from the Rust host; every other request
        reaches ``app`` with its body unchanged. ``install()`` applies it to the app
        ``streamable_http_app()`` builds; call it yourself only when you mount mcp's session
        manager by hand. The app ``install()`` builds also lets core answer ``tasks/*`` and create
        the tasks of tools that run without the request on its own, without mcp's per-request
        machinery (see ``_perform``); a hand-wrapped app leaves those to mcp, which answers the same.
        """
        return _Gate(self, app)

    def _principal_of(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The caller a request through mcp is bound to: ``http_principal`` of its HTTP request
        when one is set and the request came over HTTP, else ``principal``."""
        if self._http_principal is not None and isinstance(ctx.request, Request):
            return self._http_principal(ctx.request)
        return self._principal(ctx)

    def _early_principal(self, scope: dict[str, Any]) -> str | None:
        """The caller of a request core performs without mcp (see :meth:`_may_perform`), or
        ``None`` when ``http_principal`` raised: the request then goes through mcp, which asks
        it again and answers its error as for any request."""
        if self._http_principal is None:
            return default_principal(None)  # type: ignore[arg-type]
        try:
            return self._http_principal(Request(scope))
        except Exception:
            return None

    async def _open_listen(self, ctx: ServerRequestContext[Any, Any]) -> _native.Listen | None:
        return await self._server.listen(
            ctx.request_id, ctx.params, _headers(ctx), self._principal_of(ctx), self._sdk_listen
        )

    async def _route_early(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        """The middleware of :meth:`install`: core decides the extension's traffic first."""
        method = ctx.method
        # Off the HTTP app (stdio, a hand-mounted manager) the first request starts it.
        self._start_local_executor()
        if ctx.request_id is None:
            return await call_next(ctx)
        if method.startswith("tasks/"):
            # The extension owns the tasks/ namespace: core answers every method in it, including
            # the removed tasks/list and tasks/result (-32601).
            return await self._tasks_method(ctx, None)
        if method == "tools/call":
            ctx, principal, tool = self._open_request_state(ctx)
            token = _early_dispatch.set(self._decide_tool_call(ctx))
            try:
                return self._seal_request_state(await call_next(ctx), ctx, principal, tool)
            finally:
                _early_dispatch.reset(token)
        if method == "subscriptions/listen":
            stream = await self._open_listen(ctx)
            if stream is None:
                return await call_next(ctx)
            return await self._stream(ctx, stream)
        return await call_next(ctx)

    def _open_request_state(self, ctx: ServerRequestContext[Any, Any]) -> tuple[ServerRequestContext[Any, Any], str, str]:
        """The request with the ``requestState`` an earlier round of this caller and tool sealed
        opened (mcp's boundary, outside this middleware, has already opened its own seal around
        it); a state this server never sealed for them raises -32602, as from the Rust host."""
        params = ctx.params or {}
        principal = self._principal_of(ctx)
        tool = params.get("name")
        tool = tool if isinstance(tool, str) else ""
        sealed = params.get("requestState")
        if not isinstance(sealed, str):
            return ctx, principal, tool
        state = self._server.open_state(principal, tool, sealed)
        return dataclasses.replace(ctx, params={**params, "requestState": state}), principal, tool

    def _seal_request_state(self, result: Any, ctx: ServerRequestContext[Any, Any], principal: str, tool: str) -> Any:
        """An MRTR round's result with its ``requestState`` sealed for this caller and tool.
        A round asking for input the request's client did not declare it can answer raises
        ``MissingCapabilityError`` (-32021), core's rule, as from the other servers."""
        if not is_input_required(result):
            return result
        capabilities = _client_capabilities(ctx)
        if capabilities is not None:
            if isinstance(result, Mapping):
                requests = result.get("inputRequests")
            else:
                requests = result.model_dump(by_alias=True, mode="json", exclude_none=True).get("inputRequests")
            if isinstance(requests, Mapping):
                self._server.check_input_requests(capabilities, dict(requests))
        state = result.get("requestState") if isinstance(result, Mapping) else result.request_state
        if not isinstance(state, str):
            return result
        sealed = self._server.seal_state(principal, tool, state)
        if isinstance(result, Mapping):
            return {**result, "requestState": sealed}
        return result.model_copy(update={"request_state": sealed})

    def _decide_tool_call(self, ctx: ServerRequestContext[Any, Any]) -> str:
        # Core refuses a tool mcp does not serve, as the Rust host does (-32602, HTTP 400),
        # instead of mcp's isError result.
        return self._server.tool_call(ctx.params or {}, _headers(ctx), ctx.protocol_version, self._sdk_serves)

    def _sdk_serves(self, tool: str) -> bool:
        """Whether mcp serves ``tool`` (True when that cannot be told: mcp then answers)."""
        server = self._mcp_server
        if server is None:
            return True
        try:
            # mcp 2.3.0's internals; another mcp that lacks them answers for itself.
            return server._tool_manager.get_tool(tool) is not None
        except AttributeError:
            return True

    async def _stream(self, ctx: ServerRequestContext[Any, Any], stream: _native.Listen) -> dict[str, Any]:
        # Core frames every message (ack, notifications/tasks, the closing result); this only sends.
        outbound = ctx.session._request_outbound  # type: ignore[attr-defined]
        message = stream.ack
        while message is not None:
            await outbound.notify(message["method"], message["params"])
            message = await stream.next()
        return stream.close_result

    # -- tools/call ----------------------------------------------------------------------------

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]],
    ) -> Any:
        # Decided once, by install()'s middleware when it runs, else here.
        dispatch = _early_dispatch.get(None) or self._decide_tool_call(ctx)
        if dispatch == "sync":
            return await call_next(ctx)
        config = self._tools.get(params.name, self._default)
        if config.prepare is not None:
            answer = await config.prepare(params, ctx)
            if answer is not None:
                return answer
        responses = _wire_responses(params)
        if self._execution == "workers":
            # A front-end: the task waits in the store for a worker (serve_worker) to run it.
            enqueued = await self._engine.enqueue_task(
                self._principal_of(ctx),
                params.name,
                params.arguments or {},
                input_responses=responses,
                client_capabilities=_client_capabilities(ctx),
                trace=_otel.task_trace(ctx.params),
                **config._options(),
            )
            _otel.annotate(enqueued.get("taskId"))
            return enqueued
        resumable = config.max_attempts is not None
        created, task = await self._engine.create_task(
            self._principal_of(ctx),
            params.name,
            # Kept with a resumable task only: a later attempt runs the call again.
            arguments=(params.arguments or {}) if resumable else None,
            input_responses=responses if resumable else None,
            # The task's input is checked against what this request declared.
            client_capabilities=_client_capabilities(ctx),
            # Its runs are parented to this request's span (or its caller's context).
            trace=_otel.task_trace(ctx.params),
            **config._options(),
        )
        if self._runs_without_request(params.name):
            # The tool cannot see the request (no Context parameter, no resolvers, no interceptor
            # after this one): it runs as a claimed task does, through mcp's own handler, and
            # the request's context (its session, decoded body and models, the ASGI request
            # cycle: most of a task's memory, measured by bench/memory) goes with the answer.
            # The runner still copies the request's context variables (the access token that
            # mcp's get_access_token() reads).
            self._spawn_without_request(params.name, params.arguments, task)
        else:
            session = ctx.session
            outbound = session._request_outbound  # type: ignore[attr-defined]
            if not isinstance(outbound, _TaskAwareOutbound):
                session._request_outbound = _TaskAwareOutbound(outbound)  # type: ignore[attr-defined]
            self._spawn(functools.partial(call_next, ctx), task, params.name)
        _otel.annotate(task.task_id)
        return created

    async def _open_listen_early(
        self, routed: _native.Routed, scope: dict[str, Any], transport: _Transport | None
    ) -> tuple[tuple[int, list[tuple[str, str]], bytes] | None, _native.SseListen | None] | None:
        """Opens a routed ``subscriptions/listen`` for tasks without mcp, when nothing of mcp's
        could have seen it (as for :meth:`_perform`): the stream to send, or the refusal to
        answer; ``None`` hands it to mcp, which streams it through its request as before.
        Without mcp's session streams in the way, each state is one ``send`` of the bytes core
        framed (at 10,100 streams, mcp's per-frame machinery was most of the server's time)."""
        if not await self._may_perform(scope, transport) or (principal := self._early_principal(scope)) is None:
            return None
        return await routed.open_listen(principal)

    async def _may_perform(self, scope: dict[str, Any], transport: _Transport | None) -> bool:
        """Whether core may perform a request without mcp: see :meth:`_perform`."""
        server = self._mcp_server
        return not (
            transport is None
            or server is None
            or (self._principal is not default_principal and self._http_principal is None)
            or not all(self._passes_by(m) for m in server._lowlevel_server.middleware)
            or not await transport.admits(scope)
        )

    async def _perform(
        self, routed: _native.Routed, scope: dict[str, Any], transport: _Transport | None
    ) -> tuple[int, list[tuple[str, str]], bytes] | None:
        """Performs a request core routed, without mcp's per-request machinery (its transport,
        models and dispatch): the reply to send, or ``None`` to hand the request to mcp.

        Only when nothing of mcp's could have seen it: the app ``install()`` built (its transport
        checks are repeated here), the default ``principal`` or an ``http_principal`` (a custom
        ``principal`` reads mcp's request),
        no server middleware besides this extension's, and, for a ``tools/call``, a local task
        of a tool that runs without the request (see ``_runs_without_request``), without a
        ``prepare`` step, an MRTR round or ``Mcp-Param-*`` headers for mcp to check. Anything
        else goes through mcp as before, and is answered the same.
        """
        if not await self._may_perform(scope, transport):
            return None
        tool = routed.tool
        if tool is None:  # tasks/get, tasks/update, tasks/cancel
            principal = self._early_principal(scope)
            return None if principal is None else await routed.perform(principal)
        config = self._tools.get(tool, self._default)
        if (
            not routed.plain
            or config.prepare is not None
            or self._execution != "local"
            or any(k.startswith(b"mcp-param-") for k, _ in scope["headers"])
            or not self._alone_tool(tool)
            # Asked last, so a call mcp answers asks it once, in mcp's path.
            or (principal := self._early_principal(scope)) is None
        ):
            return None
        reply, task, arguments = await routed.create(principal, **config._options())
        if task is not None:
            self._spawn_without_request(tool, arguments, task)
        return reply

    def _passes_by(self, middleware: Any) -> bool:
        """Whether a server middleware has nothing to do with a request core performs: this
        extension's own; mcp's ``requestState`` sealing (such a request carries no state, and
        its result none); mcp's OpenTelemetry spans while no tracer provider is set (they are
        no-ops then; with one set, mcp's spans are kept by going through mcp)."""
        if middleware == self._route_early or isinstance(middleware, RequestStateBoundary):
            return True
        return isinstance(middleware, OpenTelemetryMiddleware) and isinstance(
            _trace.get_tracer_provider(), _trace.ProxyTracerProvider
        )

    def _alone_tool(self, tool: str) -> bool:
        """Whether core may create ``tool``'s tasks without mcp seeing the request: it runs
        without the request, and its input schema marks no argument as an ``Mcp-Param-*``
        header (which mcp checks against the request's headers)."""
        lowlevel = self._mcp_server._lowlevel_server
        try:
            found = self._mcp_server._tool_manager.get_tool(tool)
        except AttributeError:
            return False
        seen = self._alone.get(tool)
        if seen is not None and seen[0] is found:
            return seen[1]
        alone = found is not None and self._runs_without_request(tool)
        if alone:
            lookup = getattr(lowlevel, "get_tool_input_schema", None)
            schema = lookup(tool) if lookup is not None else found.parameters
            alone = "x-mcp-header" not in json.dumps(schema)
        self._alone[tool] = (found, alone)
        return alone

    def _spawn_without_request(self, tool: str, arguments: dict[str, Any] | None, task: _native.TaskContext) -> None:
        """Runs ``tool`` for ``task`` through mcp's own tool handler, without a request (see
        ``_runs_without_request``). Only what that handler reads of a call to a tool without
        resolvers goes with it: not a request's ``_meta`` and answers, which would keep its
        decoded body alive."""
        slim = CallToolRequestParams(name=tool, arguments=arguments)
        self._spawn(functools.partial(self._mcp_server._handle_call_tool, None, slim), task, tool)

    def _spawn(self, work: Callable[[], Awaitable[Any]], task: _native.TaskContext, tool: str | None = None) -> None:
        """Runs a task's work in the background; tasks/cancel (or expiry) cancels it."""
        run = asyncio.ensure_future(self._run(work, task, tool))
        task.on_cancel(run.cancel)
        self._running.add(run)
        run.add_done_callback(self._running.discard)

    def _runs_without_request(self, tool: str) -> bool:
        """True when running ``tool`` through mcp's handler without the request changes nothing
        it could observe: it takes no ``Context``, resolves no parameters, and no extension
        after this one intercepts ``tools/call`` (its ``call_next`` is mcp's handler itself)."""
        server = self._mcp_server
        if server is None:
            return False
        try:
            # mcp 2.3.0's internals; another mcp that lacks them gets the request-bound run.
            found = server._tool_manager.get_tool(tool)
            if found is None or found.context_kwarg is not None or found.resolved_params:
                return False
            extensions = list(server._extensions)
        except AttributeError:
            return False
        after = extensions[extensions.index(self) + 1 :] if self in extensions else extensions
        return all(type(e).intercept_tool_call is Extension.intercept_tool_call for e in after)

    async def _run(self, work: Callable[[], Awaitable[Any]], task: _native.TaskContext, tool: str | None = None) -> None:
        # The runner's context (copied at its creation) carries the task for current_task().
        # `work` starts the tool's call when called (a partial, not a coroutine made in advance:
        # a runner cancelled before its first step would leave that coroutine never awaited).
        _current.set(CurrentTask(task))
        # The run's span (the application's OpenTelemetry, if any): the tool's own spans are its
        # children, on whichever process runs this attempt.
        with _otel.run_span(task, tool) as span:
            try:
                result = _to_wire(await work())
            except asyncio.CancelledError:
                if task.is_cancelled():
                    _otel.outcome(span, "cancelled")
                    return
                raise  # cancelled for another reason (shutdown)
            except MCPError as e:
                _otel.outcome(span, "failed", e.error.code)
                await task.fail(e.error.code, e.error.message, e.error.data)
                return
            except Exception as e:  # the work failed outside the protocol: core makes it a server fault
                _otel.outcome(span, "failed", -32603)
                await task.fail_exception(e)
                return
            _otel.outcome(span, "completed")
            await task.complete(result)

    # -- tasks that wait for a worker: resumed after a crash, or a front-end's -----------------

    def _task_tools(self) -> list[str]:
        """The tools whose tasks this process may run: every configured task tool, and every
        tool of the server when tools default to tasks."""
        names = {name for name, config in self._tools.items() if config.mode != "forbidden"}
        if self._default.mode != "forbidden" and self._mcp_server is not None:
            names.update(tool.name for tool in self._mcp_server._tool_manager.list_tools())
        return sorted(names)

    def _start_local_executor(self) -> None:
        if self._execution == "local" and not self._executing and self._mcp_server is not None:
            self.start_executor()

    def start_executor(self, server: Any = None) -> None:
        """Starts running, in this process, the tasks that wait for a worker: resumable tasks a
        dead process left, and on a worker the tasks a front-end accepted. Call it inside the
        running event loop; ``install()`` already does for an app it serves (``"local"``)."""
        if server is not None:
            self._mcp_server = server
        if self._mcp_server is None:
            raise RuntimeError("start_executor needs the MCPServer: call install(server) or pass it")
        self._engine.start_executor(self._task_tools(), self._on_claimed)
        self._executing = True

    def stop_executor(self) -> None:
        """Stops taking tasks (work already started keeps running)."""
        self._engine.stop_executor()
        self._executing = False

    async def serve_worker(self, server: Any = None) -> None:
        """Runs this process as a worker until cancelled: claims the tasks of this extension's
        tools from the store (PostgreSQL, shared with the front-ends) and runs their tool
        functions on ``server`` (the ``MCPServer``; the one ``install`` saw by default)."""
        self.start_executor(server)
        try:
            await asyncio.Event().wait()
        finally:
            self.stop_executor()

    def _on_claimed(self, task: _native.TaskContext, tool: str, call: dict[str, Any]) -> None:
        # On the event loop (core's executor schedules it there).
        run = asyncio.ensure_future(self._run_claimed(task, tool, call))
        task.on_cancel(run.cancel)
        self._running.add(run)
        run.add_done_callback(self._running.discard)
        _log.info("running task %s of %s (attempt %d)", task.task_id, tool, task.attempt)

    async def _run_claimed(self, task: _native.TaskContext, tool: str, call: dict[str, Any]) -> None:
        """A claimed task's work: the tool run as mcp runs a call, without a client request."""
        fields: dict[str, Any] = {"name": tool, "arguments": call.get("arguments") or {}}
        if call.get("input_responses"):
            fields["inputResponses"] = call["input_responses"]
        params = CallToolRequestParams.model_validate(fields)
        # mcp's own tools/call handler (argument validation, a ToolError as an isError result),
        # with no request behind it: there is no client session to ask through, so a tool run
        # this way asks with current_task().request_input, not ctx.elicit.
        await self._run(functools.partial(self._mcp_server._handle_call_tool, None, params), task, tool)


def _wire_responses(params: CallToolRequestParams) -> dict[str, Any] | None:
    """The MRTR answers a call came with, as JSON (stored with a task a worker runs)."""
    responses = getattr(params, "input_responses", None)
    if not responses:
        return None
    return {key: _to_wire(value) for key, value in responses.items()}
