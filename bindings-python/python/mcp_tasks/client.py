"""A client for tasks servers, driven by the Rust core: polls at the server's pace, switches to
``subscriptions/listen`` notifications when offered, answers input requests, cancels, persists task
references (SQLite by default) and re-attaches after a restart.

The face is the same in every language (``tests/api/manifest.json`` lists it): ``TasksClient``
with core's ``ClientOptions``, ``call_tool`` returning an :class:`Execution` that has ``result``,
``updates``, ``cancel`` and ``answer`` whatever its kind, one input-handler signature
(:class:`InputRequest` in, a response or ``None`` out), and typed :class:`Outcome` s."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_REQUEST,
    CallToolResult,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitResult,
    ErrorData,
    ListRootsResult,
    Request,
    Result,
    SamplingCapability,
)
from pydantic import BaseModel, TypeAdapter

from . import _native
from .errors import InvalidParamsError, McpTaskError

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

CancelMode = Literal["stop", "observe"]


@dataclass(frozen=True)
class InputRequest:
    """One input request for the input handler: the asking task (``None`` for an MRTR round before
    any task), the ``key`` to answer, and the request's ``method`` and ``params``."""

    task_id: str | None
    key: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)


InputHandler = Callable[[InputRequest], Awaitable[Mapping[str, Any] | BaseModel | None]]
"""``async (request) -> response | None``: ``None`` leaves the request open for ``answer()``. The
response is a result object: a dict, or a pydantic model such as ``mcp_types.ElicitResult``. A
handler that raises, or answers anything else, ends the call at once with that failure as the
``__cause__`` of the ``InternalError`` it raises (a task is cancelled, best effort). A plain
function returning the response works too."""

_HANDLER_FAILED = "input_handler_failed"


class _HandlerFailures:
    """What the input handler raised, by ``(task_id, key)``, until the error it caused is raised
    (then it becomes that error's ``__cause__``). Bounded: a failure whose outcome nobody takes
    is forgotten after ``LIMIT`` later ones."""

    LIMIT = 256

    def __init__(self) -> None:
        self._raised: dict[tuple[str | None, str], BaseException] = {}

    def keep(self, task_id: str | None, key: str, error: BaseException) -> None:
        self._raised[(task_id, key)] = error
        while len(self._raised) > self.LIMIT:
            self._raised.pop(next(iter(self._raised)))

    def chain(self, error: McpTaskError) -> McpTaskError:
        """``error`` with what the handler raised as its ``__cause__``, when it is the error a
        failing handler caused (``data.reason`` ``input_handler_failed``)."""
        data = error.data if isinstance(error.data, dict) else {}
        if data.get("reason") == _HANDLER_FAILED:
            raised = self._raised.pop((data.get("taskId"), str(data.get("key"))), None)
            if raised is not None:
                error.__cause__ = raised
        return error


def _check_handler(handler: object) -> None:
    """Refuses, when it is registered, a handler that cannot be called with one request."""
    if handler is None:
        return
    if not callable(handler):
        raise TypeError(f"input_handler must be callable, not {type(handler).__name__}")
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):  # a callable without a signature (a C function): try it
        return
    try:
        signature.bind(object())
    except TypeError as e:
        name = getattr(handler, "__qualname__", repr(handler))
        raise TypeError(
            f"input_handler must take one argument, the InputRequest: {name}{signature} cannot ({e})"
        ) from None


@dataclass(frozen=True)
class Outcome:
    """How a call ended: ``kind`` is completed, failed, cancelled, gone or expired. ``result`` is
    the ``CallToolResult`` of a completed call (a tool error too: ``is_error``), ``error`` the
    JSON-RPC error object of a failed task. :meth:`unwrap` returns the result or raises the typed
    error (``TaskCancelledError``, ``TaskGoneError``, ``TaskExpiredError``, or the failed task's
    error class)."""

    kind: Literal["completed", "failed", "cancelled", "gone", "expired"]
    result: CallToolResult | None = None
    error: dict[str, Any] | None = None
    task_id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    failures: _HandlerFailures | None = field(default=None, repr=False, compare=False)

    def unwrap(self) -> CallToolResult:
        """The ``CallToolResult``, or raises the typed error core names for this outcome (with
        what a failing input handler raised as its ``__cause__``)."""
        try:
            result = _native.outcome_result(self.raw, self.task_id or "")
        except McpTaskError as e:
            raise self.failures.chain(e) if self.failures is not None else e
        return CallToolResult.model_validate(result)


def _outcome(data: dict[str, Any], task_id: str | None, failures: _HandlerFailures | None = None) -> Outcome:
    result = data.get("result")
    return Outcome(
        kind=data["kind"],
        result=CallToolResult.model_validate(result) if result is not None else None,
        error=data.get("error"),
        task_id=task_id,
        raw=data,
        failures=failures,
    )


class TaskExecution:
    """A task being followed."""

    def __init__(
        self, native: _native.TaskExecution, failures: _HandlerFailures | None = None, span: Any = None
    ) -> None:
        self._native = native
        self._failures = failures
        # The call's OpenTelemetry client span (when the application has the OpenTelemetry API):
        # it lasts until the outcome is read.
        self._span = span

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
        outcome = _outcome(await self._native.result(), self.task_id, self._failures)
        code = outcome.error.get("code") if outcome.error else None
        _end_span(self._span, outcome.kind, code)
        self._span = None
        return outcome

    async def value(self) -> CallToolResult:
        """The ``CallToolResult``, or raises the typed error for a failed, cancelled, gone or expired
        task (``TaskCancelledError``, ...); marks the outcome delivered, as :meth:`result` does."""
        return (await self.result()).unwrap()

    def cancel(self, mode: CancelMode = "stop") -> None:
        """Sends ``tasks/cancel``; ``observe`` keeps following until the task is terminal."""
        self._native.cancel(mode)

    async def answer(self, key: str, response: Mapping[str, Any]) -> None:
        """Answers input request ``key`` (sent with ``tasks/update``); a key the server never asked,
        one already answered, or a finished task raises ``InvalidParamsError``."""
        await self._native.answer(key, dict(response))


class Execution:
    """What a ``tools/call`` became: ``kind`` ``"immediate"`` (the server answered at once) or
    ``"task"``. Both kinds have ``result``, ``updates``, ``cancel`` and ``answer``; an immediate
    execution has no updates, nothing to cancel, and nothing to answer."""

    def __init__(self, immediate: dict[str, Any] | None, task: TaskExecution | None) -> None:
        self.kind: Literal["immediate", "task"] = "task" if task is not None else "immediate"
        self.immediate = immediate
        self.task = task

    @property
    def task_id(self) -> str | None:
        return self.task.task_id if self.task is not None else None

    async def result(self) -> Outcome:
        if self.task is not None:
            return await self.task.result()
        return _outcome({"kind": "completed", "result": self.immediate}, None)

    async def value(self) -> CallToolResult:
        """The ``CallToolResult``, or raises the typed error for a failed, cancelled, gone or
        expired task."""
        return (await self.result()).unwrap()

    async def updates(self) -> AsyncIterator[dict[str, Any]]:
        if self.task is not None:
            async for state in self.task.updates():
                yield state

    def cancel(self, mode: CancelMode = "stop") -> None:
        if self.task is not None:
            self.task.cancel(mode)

    async def answer(self, key: str, response: Mapping[str, Any]) -> None:
        if self.task is None:
            raise InvalidParamsError(None, f"input key {key!r} was not requested: the call answered at once")
        await self.task.answer(key, response)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _wrap(
    handler: InputHandler | None, failures: _HandlerFailures
) -> Callable[[dict[str, Any]], Awaitable[Any]] | None:
    _check_handler(handler)
    if handler is None:
        return None

    async def callback(request: dict[str, Any]) -> Any:
        task_id, key = request["taskId"], request["key"]
        try:
            answer: Any = handler(InputRequest(task_id, key, request["method"], request.get("params") or {}))
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as e:
            failures.keep(task_id, key, e)
            raise
        if isinstance(answer, BaseModel):
            return answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        # Core checks the shape: anything but a mapping (or None) fails the call, naming it.
        return dict(answer) if isinstance(answer, Mapping) else answer

    return callback


class TasksClient:
    """A tasks client for one server (MCP 2026-07-28): a Streamable HTTP endpoint (``url``), or a
    stdio server it starts as its child (``command``).

    The keyword arguments are core's ``ClientOptions`` (absent ones take core's defaults):
    ``headers`` sent with every HTTP request; for stdio, ``args``, ``env`` (added to the inherited
    environment), ``cwd`` and ``stderr`` (``"inherit"``, ``"capture"`` to quote it in the error
    when the child exits, or ``"discard"``); ``store`` ``sqlite:///path``, ``memory://``, or None
    for the default SQLite file (``$MCP_TASKS_CLIENT_DB`` or the XDG data dir); ``client_name`` and
    ``client_version`` for ``clientInfo``; ``notifications`` (listen when offered, default True);
    ``default_poll_ms`` (1000) and ``min_poll_ms`` (100); ``max_input_rounds`` (8 MRTR rounds);
    ``capabilities``, the client capabilities every request declares besides the extension
    (default ``{"elicitation": {}}``, form elicitation). ``input_handler`` answers elicitation,
    sampling and roots requests: servers ask only for what a request declares, so name in
    ``capabilities`` what it answers (``{"elicitation": {}, "sampling": {}, "roots": {}}``).
    Create the client inside the event loop that should run it.

    A stdio child starts on the first call, again on the next call after it died (its listens are
    re-sent), and ends on :meth:`close` (or ``async with``): stdin closed, then SIGTERM, then
    SIGKILL. Tasks it left unfinished are reported failed by its next start when its store is a
    file.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        command: str | None = None,
        args: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: Literal["inherit", "capture", "discard"] | None = None,
        store: str | None = None,
        client_name: str | None = None,
        client_version: str | None = None,
        notifications: bool | None = None,
        default_poll_ms: int | None = None,
        min_poll_ms: int | None = None,
        max_input_rounds: int | None = None,
        capabilities: Mapping[str, Any] | None = None,
        input_handler: InputHandler | None = None,
        _transport: tuple[Any, str] | None = None,
    ) -> None:
        given = {
            "url": url,
            "command": command,
            "args": list(args) if args is not None else None,
            "env": dict(env) if env is not None else None,
            "cwd": os.fspath(cwd) if cwd is not None else None,
            "stderr": stderr,
            "store": store,
            "client_name": client_name,
            "client_version": client_version,
            "notifications": notifications,
            "default_poll_ms": default_poll_ms,
            "min_poll_ms": min_poll_ms,
            "max_input_rounds": max_input_rounds,
            # Core refuses anything but an object, with its own words.
            "capabilities": dict(capabilities) if isinstance(capabilities, Mapping) else capabilities,
        }
        options: dict[str, Any] = {_camel(k): v for k, v in given.items() if v is not None}
        if headers:
            options["headers"] = list(headers.items())
        self._failures = _HandlerFailures()
        self._native = _native.Client(options, _wrap(input_handler, self._failures), _transport)

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> Execution:
        """Calls a tool; MRTR rounds are answered by the input handler and retried.

        Where the application has the OpenTelemetry API, the call gets a client span (a child of
        the current span) lasting until the task's outcome is read, and its W3C trace context
        goes with the call and every request about its task (SEP-414)."""
        span, carrier = _client_span(name)
        try:
            kind, body, task = await self._native.call_tool(name, dict(arguments or {}), carrier)
        except McpTaskError as e:
            _end_span(span, None, e.code)
            raise self._failures.chain(e)
        if kind == "task" and task is not None:
            if span is not None:
                span.set_attribute("mcp.task.id", task.task_id)
            return Execution(immediate=None, task=TaskExecution(task, self._failures, span))
        _end_span(span, "completed")
        return Execution(immediate=body, task=None)

    async def _follow(self, created: dict[str, Any], tool: str) -> TaskExecution:
        return TaskExecution(await self._native.follow(created, tool, {}), self._failures)

    async def resume_all(self) -> list[TaskExecution]:
        """Re-attaches to every task of this endpoint whose outcome was not delivered yet."""
        return [TaskExecution(t, self._failures) for t in await self._native.resume_all()]

    async def close(self) -> None:
        """Stops following every task (their references stay for :meth:`resume_all`) and closes
        the transport: a stdio child ends. Later calls raise ``TransportError``."""
        await self._native.close()

    async def __aenter__(self) -> TasksClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _SessionTransport:
    """Core's transport over an ``mcp.ClientSession``: each request the Rust driver sends goes
    through the session, whatever its transport (stdio included). The session has no listen for
    task ids, so tasks are polled."""

    def __init__(self) -> None:
        self.session: ClientSession | None = None

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.session is None:
            raise RuntimeError("no mcp session yet: call a tool through mcp.Client first, or attach() one")
        try:
            result = await self.session.send_request(_TaskRequest(method=method, params=params), _ANY_RESULT)
        except MCPError as e:
            return {"error": e.error.model_dump(by_alias=True, mode="json", exclude_none=True)}
        return {"result": result}


class _TaskRequest(Request[dict[str, Any], str]):
    """A ``tasks/*`` request as mcp's session sends it (``Mcp-Name`` from ``taskId`` over HTTP)."""

    name_param = "taskId"


_ANY_RESULT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


class CreateTaskResult(Result):
    """The flat ``CreateTaskResult`` (``resultType: "task"``) as mcp's client sees it."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    # JSON has one number type: a server may write 60000.0. Core reads the numbers (rounding a
    # fraction up, refusing a negative one by name); these only let them through, as written
    # (pydantic's smart union keeps an int an int and a float a float).
    ttl_ms: int | float | None
    poll_interval_ms: int | float | None = None


OnCancel = Literal["cancel", "detach"]


class TasksClientExtension(ClientExtension):
    """Makes ``mcp.Client.call_tool`` transparent for task results: the client declares the
    extension, and a ``CreateTaskResult`` is followed to its outcome by the Rust client, then
    returned as the ``CallToolResult``.

    - Without ``url``, tasks are followed through the ``mcp.Client`` session that received them,
      whatever its transport (stdio included), by polling; ``endpoint`` names that server in the
      durable task references (default ``session:`` and the server's name). With ``url`` (and
      ``headers``), the Rust client reaches the endpoint over its own HTTP connections and
      listens for ``notifications/tasks`` when offered.
    - A failed task raises its error's class (an ``McpTaskError``, itself an ``MCPError``); a
      cancelled, gone or expired task raises ``TaskCancelledError``, ``TaskGoneError`` or
      ``TaskExpiredError``.
    - ``on_task(execution)`` is called with the :class:`TaskExecution` as soon as a call becomes
      a task (its id, ``updates()``, ``cancel()``, ``answer()``); :attr:`running` holds the tasks
      being awaited.
    - Cancelling the coroutine awaiting ``call_tool`` (``on_cancel="cancel"``, the default) sends
      ``tasks/cancel`` and waits up to ``cancel_timeout`` seconds for the server to acknowledge,
      so the task neither runs on nor reappears in a later ``resume_all()``. With
      ``on_cancel="detach"`` the task keeps running and its reference stays for ``resume_all()``.

    - With an ``input_handler``, pass :meth:`callbacks` to ``mcp.Client`` too, so it declares
      (and answers through the handler) what the handler answers: mcp declares no elicitation
      without its callback, and servers ask only for input a request declares.

    ``mcp.Client(server, extensions=[ext], **ext.callbacks())`` with
    ``ext = TasksClientExtension(input_handler=answer)``
    """

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(
        self,
        url: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        endpoint: str | None = None,
        store: str | None = None,
        notifications: bool | None = None,
        input_handler: InputHandler | None = None,
        capabilities: Mapping[str, Any] | None = None,
        on_task: Callable[[TaskExecution], object] | None = None,
        on_cancel: OnCancel = "cancel",
        cancel_timeout: float = 5.0,
    ) -> None:
        if on_cancel not in ("cancel", "detach"):
            raise ValueError(f"on_cancel={on_cancel!r}: use 'cancel' or 'detach'")
        _check_handler(input_handler)
        if url is None and (headers or notifications):
            raise ValueError("headers and notifications are options of a url; a session is polled")
        if capabilities is not None and not isinstance(capabilities, Mapping):
            raise TypeError(f"capabilities must be a mapping, not {type(capabilities).__name__}")
        self._options: dict[str, Any] = {"store": store, "input_handler": input_handler}
        self._capabilities = dict(capabilities) if capabilities is not None else _native.default_capabilities()
        if url is not None:
            self._options.update(headers=headers, notifications=notifications, capabilities=capabilities)
        self._url = url
        self._endpoint = endpoint
        self._session_transport = _SessionTransport()
        self._client: TasksClient | None = None
        self._on_task = on_task
        self._on_cancel = on_cancel
        self._cancel_timeout = cancel_timeout
        self.running: dict[str, TaskExecution] = {}

    def settings(self) -> dict[str, Any]:
        return {}

    def callbacks(self) -> dict[str, Any]:
        """The ``mcp.Client`` keyword arguments that make it declare, and answer through
        ``input_handler``, the input the handler answers:
        ``mcp.Client(server, extensions=[ext], **ext.callbacks())``.

        mcp declares a client capability only with its callback (``elicitation`` with an
        ``elicitation_callback``, ``sampling``, ``roots``), and a server asks only for input the
        request declares (the MRTR rule; mcp-tasks servers hold a task's input to its creating
        request's), so without these a tool's elicitation is refused. They answer the MRTR rounds
        mcp drives with the same handler (``task_id`` ``None``, ``key`` the round's key). Which
        ones: those ``capabilities`` names (default ``{"elicitation": {}}``). Empty without a
        handler."""
        handler = self._options["input_handler"]
        if handler is None:
            return {}

        async def ask(method: str, key: Any, params: BaseModel | None, model: type[BaseModel]) -> Any:
            body = params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else {}
            answer: Any = handler(InputRequest(None, str(key), method, body))
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is None:
                return ErrorData(code=INVALID_REQUEST, message=f"the input handler left {method} unanswered")
            return model.model_validate(answer.model_dump(by_alias=True) if isinstance(answer, BaseModel) else answer)

        kwargs: dict[str, Any] = {}
        if "elicitation" in self._capabilities:

            async def elicit(context: Any, params: Any) -> Any:
                return await ask("elicitation/create", context.request_id, params, ElicitResult)

            kwargs["elicitation_callback"] = elicit
        if "sampling" in self._capabilities:

            async def sample(context: Any, params: Any) -> Any:
                tools = getattr(params, "tools", None) is not None
                model = CreateMessageResultWithTools if tools else CreateMessageResult
                return await ask("sampling/createMessage", context.request_id, params, model)

            kwargs["sampling_callback"] = sample
            declared = self._capabilities.get("sampling")
            if isinstance(declared, Mapping) and declared:
                kwargs["sampling_capabilities"] = SamplingCapability.model_validate(declared)
        if "roots" in self._capabilities:

            async def roots(context: Any) -> Any:
                return await ask("roots/list", context.request_id, None, ListRootsResult)

            kwargs["list_roots_callback"] = roots
        return kwargs

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve)]

    def attach(self, session: ClientSession) -> None:
        """Follows tasks through ``session`` (no ``url``): needed before :attr:`client` is used
        without a call, e.g. ``resume_all()`` at start (``ext.attach(client.session)``)."""
        self._session_transport.session = session

    @property
    def client(self) -> TasksClient:
        """The tasks client that follows claimed tasks (created on first use, on the running loop)."""
        if self._client is None:
            if self._url is not None:
                self._client = TasksClient(self._url, **self._options)
            else:
                self._client = TasksClient(**self._options, _transport=(self._session_transport, self._endpoint_name()))
        return self._client

    def _endpoint_name(self) -> str:
        if self._endpoint is not None:
            return self._endpoint
        session = self._session_transport.session
        info = session.server_info if session is not None else None
        return f"session:{info.name}" if info is not None else "session"

    async def _resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
        if self._url is None:
            self._session_transport.session = ctx.session
        payload = created.model_dump(by_alias=True, mode="json")
        execution = await self.client._follow(payload, ctx.tool_name)
        self.running[execution.task_id] = execution
        try:
            if self._on_task is not None:
                self._on_task(execution)
            try:
                outcome = await execution.result()
            except asyncio.CancelledError:
                if self._on_cancel == "cancel":
                    await self._cancel(execution)
                raise
            return outcome.unwrap()
        finally:
            self.running.pop(execution.task_id, None)

    async def _cancel(self, execution: TaskExecution) -> None:
        # The caller is being cancelled: ask the server to cancel too, and take the outcome (which
        # marks it delivered) once the cancel is acknowledged, within a bounded wait.
        execution.cancel("stop")
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(execution.result()), timeout=self._cancel_timeout)


__all__ = [
    "CancelMode",
    "CreateTaskResult",
    "Execution",
    "InputHandler",
    "InputRequest",
    "Outcome",
    "TaskExecution",
    "TasksClient",
    "TasksClientExtension",
]


def _client_span(tool: str) -> tuple[Any, dict[str, str] | None]:
    """The call's client span and the trace context to send, from the application's own
    OpenTelemetry API (no SDK of ours: its configured provider and propagator decide); nothing
    without the API installed."""
    try:
        from opentelemetry import propagate, trace
    except ImportError:
        return None, None
    span = trace.get_tracer("mcp_tasks").start_span(
        f"tools/call {tool}",
        kind=trace.SpanKind.CLIENT,
        attributes={
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": tool,
            "gen_ai.operation.name": "execute_tool",
        },
    )
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return span, carrier or None


def _end_span(span: Any, status: str | None, code: int | None = None) -> None:
    """Ends a client span with the task's outcome (`task.status`, and `error.type` on failure)."""
    if span is None:
        return
    if status is not None:
        span.set_attribute("task.status", status)
    if code is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", str(code))
        span.set_status(Status(StatusCode.ERROR))
    span.end()
