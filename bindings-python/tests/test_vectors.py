"""Replays the shared JSON vectors (tests/vectors, format in its README) against plain mcp 2.3.0
``MCPServer`` + ``TasksExtension`` over loopback Streamable HTTP, with the engine's manual clock
and sequential ids, validating every message against the 2026-07-28 and tasks schemas.

Vectors this runner cannot replay are listed with their reason in tests/vectors/skip.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult, TextContent

from mcp_tasks import MissingCapabilityError, TaskConfig, TasksExtension, TaskNotFoundError, current_task
from mcp_tasks import _native

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests/vectors"
SCHEMAS = ROOT / "tests/schema"  # vendored; source and version in tests/schema/README.md
# The default a replayer declares (tests/vectors/README.md): the extension, and form elicitation
# so a task's work may ask.
TASKS_CAPS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}


def _skips() -> dict[str, str]:
    listed = json.loads((VECTORS / "skip.json").read_text())["skips"]
    return {s["vector"]: s["reason"] for s in listed if s["runner"] == "python"}


def _unchecked() -> dict[str, dict[int, str]]:
    """Steps this runner runs (so ids and state stay as the vector has them) without checking
    their expectations, by vector, with the reason from skip.json."""
    listed = json.loads((VECTORS / "skip.json").read_text()).get("unchecked_steps", [])
    out: dict[str, dict[int, str]] = defaultdict(dict)
    for entry in listed:
        if entry["runner"] == "python":
            for step in entry["steps"]:
                out[entry["vector"]][step] = entry["reason"]
    return out


def _normalizations() -> set[str]:
    listed = json.loads((VECTORS / "skip.json").read_text()).get("normalize", [])
    return {n["what"] for n in listed if n["runner"] == "python"}


def normalize(expected: Any, message: Any) -> Any:
    """Applies this runner's normalizations listed in skip.json (each with its reason) to a
    message before it is matched against ``expected``."""
    listed = _normalizations()
    if not isinstance(message, dict):
        return message
    if "serverInfo-meta" in listed:
        result = message.get("result")
        wanted = expected.get("result") if isinstance(expected, dict) else None
        if isinstance(result, dict) and isinstance(result.get("_meta"), dict):
            if not (isinstance(wanted, dict) and "io.modelcontextprotocol/serverInfo" in wanted.get("_meta", {})):
                meta = {k: v for k, v in result["_meta"].items() if k != "io.modelcontextprotocol/serverInfo"}
                result = {k: v for k, v in result.items() if k != "_meta"} | ({"_meta": meta} if meta else {})
                message = {**message, "result": result}
    if "empty-error-data" in listed:
        error = message.get("error")
        wanted = expected.get("error") if isinstance(expected, dict) else None
        if isinstance(error, dict) and error.get("data") == "" and not (isinstance(wanted, dict) and "data" in wanted):
            message = {**message, "error": {k: v for k, v in error.items() if k != "data"}}
    if "isError-default" in listed:
        message = _drop_default_is_error(expected, message)
    return message


def _drop_default_is_error(expected: Any, actual: Any) -> Any:
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = {k: _drop_default_is_error(expected.get(k), v) for k, v in actual.items()}
        if "content" in out and out.get("isError") is False and "isError" not in expected:
            del out["isError"]
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        return [_drop_default_is_error(e, a) for e, a in zip(expected, actual)] + actual[len(expected) :]
    return actual


def _vector_files() -> list[Path]:
    files = sorted(p for p in VECTORS.glob("*.json") if p.name != "skip.json")
    assert len(files) >= 10, f"vectors are missing from {VECTORS}"
    return files


# -- matching and schemas (the same rules as core/tests/vectors.rs) ------------------------------


def matches(expected: Any, actual: Any, path: str, diffs: list[str]) -> None:
    """``"@any"`` matches any present value; objects match key for key, arrays item for item."""
    if expected == "@any":
        return
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key, value in expected.items():
            if key in actual:
                matches(value, actual[key], f"{path}/{key}", diffs)
            else:
                diffs.append(f"{path}/{key}: missing")
        diffs.extend(f"{path}/{key}: unexpected {actual[key]!r}" for key in actual if key not in expected)
    elif isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for i, (e, a) in enumerate(zip(expected, actual)):
            matches(e, a, f"{path}/{i}", diffs)
    elif expected != actual or type(expected) is not type(actual):
        diffs.append(f"{path}: expected {expected!r}, got {actual!r}")


def assert_matches(where: str, expected: Any, actual: Any) -> None:
    diffs: list[str] = []
    matches(expected, actual, "", diffs)
    assert not diffs, f"{where}: {diffs}\nactual: {json.dumps(actual)}"


class Schemas:
    """Validates messages against ``$defs`` of the core and tasks schemas."""

    ERROR_DEFS = {
        -32700: "ParseError",
        -32600: "InvalidRequestError",
        -32601: "MethodNotFoundError",
        -32602: "InvalidParamsError",
        -32603: "InternalError",
        -32020: "HeaderMismatchError",
        -32021: "MissingRequiredClientCapabilityError",
        -32022: "UnsupportedProtocolVersionError",
    }

    def __init__(self) -> None:
        self.core = json.loads((SCHEMAS / "core-2026-07-28/schema.json").read_text())
        self.ext = json.loads((SCHEMAS / "ext-tasks-draft/schema.json").read_text())
        self._cache: dict[tuple[bool, str], Any] = {}

    def check(self, ext: bool, name: str, value: Any) -> None:
        validator = self._cache.get((ext, name))
        if validator is None:
            doc = self.ext if ext else self.core
            assert name in doc["$defs"], f"schema has no $defs/{name}"
            schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": doc["$defs"], "$ref": f"#/$defs/{name}"}
            validator = self._cache[(ext, name)] = jsonschema.Draft202012Validator(schema)
        errors = [f"{e.message} at {list(e.absolute_path)}" for e in validator.iter_errors(value)]
        assert not errors, f"not a valid {name}: {errors}\n{json.dumps(value)}"

    def check_response(self, method: str, message: Any) -> None:
        if message is None:
            return
        if "error" in message:
            self.check(False, "JSONRPCErrorResponse", message)
            name = self.ERROR_DEFS.get(message["error"].get("code"), "Error")
            whole = "error" in self.core["$defs"][name].get("properties", {})
            self.check(False, name, message if whole else message["error"])
            return
        self.check(False, "JSONRPCResultResponse", message)
        result = message["result"]
        kind = result.get("resultType")
        if method == "tools/call":
            name = {"task": "CreateTaskResult", "input_required": "InputRequiredResult"}.get(kind, "CallToolResult")
            self.check(name == "CreateTaskResult", name, result)
        elif method == "tasks/get":
            self.check(True, "GetTaskResult", result)
            if result.get("status") == "completed":
                self.check(False, "CallToolResult", result["result"])
        elif method in ("tasks/update", "tasks/cancel"):
            self.check(True, "UpdateTaskResult" if method == "tasks/update" else "CancelTaskResult", result)
        else:
            self.check(False, "Result", result)

    def check_listen_message(self, message: Any) -> None:
        method = message.get("method")
        if method == "notifications/subscriptions/acknowledged":
            self.check(False, "SubscriptionsAcknowledgedNotification", message)
        elif method == "notifications/tasks":
            self.check(True, "TaskStatusNotification", message)
            if message["params"].get("status") == "completed":
                self.check(False, "CallToolResult", message["params"]["result"])
        else:
            assert method is None, f"unexpected notification {method}"
            self.check_response("subscriptions/listen", message)
        meta = (message.get("params") or message.get("result") or {}).get("_meta", {})
        assert isinstance(meta.get("io.modelcontextprotocol/subscriptionId"), int), message


SCHEMA = Schemas()


# -- the scripted tool set ----------------------------------------------------------------------


class Scripts:
    """Work queues of scripted tasks by task id, and the input answers each work received."""

    def __init__(self) -> None:
        self.queues: defaultdict[str, asyncio.Queue[tuple[str, Any]]] = defaultdict(asyncio.Queue)
        self.answers: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
        # The errors the work's input requests were refused with (-32021), in order.
        self.refusals: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
        self.answered = asyncio.Condition()

    async def run(self, substitute: dict[str, str] | None = None) -> CallToolResult:
        task = current_task()
        assert task is not None
        queue = self.queues[task.task_id]
        while True:
            kind, value = await queue.get()
            if kind == "status":
                await task.set_status(value)
            elif kind == "input":
                try:
                    answers = await task.request_input(value)
                except MissingCapabilityError as e:
                    # Input the client cannot answer: the work goes on without it.
                    async with self.answered:
                        refusal = {"code": e.error.code, "message": e.error.message, "data": e.error.data}
                        self.refusals[task.task_id].append(refusal)
                        self.answered.notify_all()
                    continue
                async with self.answered:
                    self.answers[task.task_id].append(answers)
                    self.answered.notify_all()
            elif kind == "complete":
                text = json.dumps(value)
                for old, new in (substitute or {}).items():
                    text = text.replace(old, new)
                return CallToolResult.model_validate_json(text)
            else:
                raise MCPError(value["code"], value["message"], value.get("data"))

    async def wait_refusals(self, task: str, n: int) -> list[dict[str, Any]]:
        async with self.answered:
            await asyncio.wait_for(self.answered.wait_for(lambda: len(self.refusals[task]) >= n), 10)
            return list(self.refusals[task])

    async def wait_answers(self, task: str, n: int) -> list[dict[str, Any]]:
        async with self.answered:
            await asyncio.wait_for(self.answered.wait_for(lambda: len(self.answers[task]) >= n), 10)
            return list(self.answers[task])


def _sync_text(tool: str, x: int | None, n: int | None) -> CallToolResult:
    arguments = {k: v for k, v in (("x", x), ("n", n)) if v is not None}
    text = f"ran {tool} synchronously with {json.dumps(arguments, separators=(',', ':'))}"
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=False)


def bearer_principal(ctx: Any) -> str:
    """``Authorization: Bearer <name>`` names the caller (vectors use plain bearer names)."""
    headers = getattr(ctx.request, "headers", None)
    value = headers.get("authorization") if headers is not None else None
    return f"bearer:{value[7:]}" if value and value.startswith("Bearer ") else "anonymous"


async def ask_user_name(params: Any, ctx: Any) -> Any:
    answers = params.input_responses or {}
    if "user_name" in answers and params.request_state == "round-1":
        return None
    return InputRequiredResult(
        input_requests={
            "user_name": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "Your name?",
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                },
            }
        },
        request_state="round-1",
    )


def build_server(engine: _native.Engine, scripts: Scripts) -> MCPServer:
    tasks = TasksExtension(
        engine=engine,
        tools={
            "job": TaskConfig("optional", poll_interval_ms=500),
            "job_required": TaskConfig("required", ttl_ms=5_000, poll_interval_ms=250),
            "job_unlimited": TaskConfig("optional", ttl_ms=None),
            "ask_name": TaskConfig("required", prepare=ask_user_name),
        },
        principal=bearer_principal,
    )
    server = MCPServer("mcp-tasks-test", extensions=[tasks])
    tasks.install(server)

    async def scripted(tool: str, x: int | None, n: int | None) -> CallToolResult:
        if current_task() is None:
            return _sync_text(tool, x, n)
        return await scripts.run()

    @server.tool(description="Synchronous only.")
    async def echo(x: int | None = None, n: int | None = None) -> CallToolResult:
        return await scripted("echo", x, n)

    @server.tool()
    async def job(x: int | None = None, n: int | None = None) -> CallToolResult:
        return await scripted("job", x, n)

    @server.tool()
    async def job_required(x: int | None = None, n: int | None = None) -> CallToolResult:
        return await scripted("job_required", x, n)

    @server.tool()
    async def job_unlimited(x: int | None = None, n: int | None = None) -> CallToolResult:
        return await scripted("job_unlimited", x, n)

    @server.tool()
    async def ask_name(ctx: Context) -> CallToolResult:
        # The MRTR answer from the retry that created the task (mcp hands it to the tool).
        answer = (ctx.input_responses or {}).get("user_name")
        content = answer.get("content") if isinstance(answer, dict) else getattr(answer, "content", None)
        return await scripts.run({"{user_name}": str((content or {}).get("name", ""))})

    return server


# -- the replayer -------------------------------------------------------------------------------


def envelope(tasks: bool, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    """The step's ``_meta``: its ``capabilities`` when given, else the default."""
    if capabilities is None:
        capabilities = TASKS_CAPS if tasks else {}
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "mcp-tasks-tests", "version": "0"},
    }


def standard_headers(body: dict[str, Any], principal: str | None) -> dict[str, str]:
    method = body["method"]
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    field = {"tools/call": "name", "prompts/get": "name"}.get(method)
    if method in ("tasks/get", "tasks/update", "tasks/cancel"):
        field = "taskId"
    value = body["params"].get(field) if field else None
    if isinstance(value, str):
        headers["mcp-name"] = value
    if principal is not None:
        headers["authorization"] = f"Bearer {principal}"
    return headers


def apply_headers(headers: dict[str, str], overrides: dict[str, str | None] | None) -> dict[str, str]:
    out = {k: v for k, v in headers.items() if not overrides or k.lower() not in {o.lower() for o in overrides}}
    out.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return out


def substitute(value: Any, variables: dict[str, Any]) -> Any:
    if isinstance(value, str):
        for name, v in variables.items():
            value = value.replace("${" + name + "}", v if isinstance(v, str) else "")
        return value
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, variables) for k, v in value.items()}
    return value


def pointer(document: Any, path: str) -> Any:
    for part in path.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document


async def post(url: str, headers: dict[str, str], body: bytes) -> tuple[int, str, str]:
    """One HTTP/1.1 POST written by hand: the vectors send header values (surrounding blanks,
    encoded words) that httpx refuses to send. Returns status, content type and body text."""
    parsed = httpx.URL(url)
    reader, writer = await asyncio.open_connection(parsed.host, parsed.port)
    lines = [f"POST {parsed.raw_path.decode()} HTTP/1.1", f"host: {parsed.host}:{parsed.port}", "connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()] + [f"content-length: {len(body)}"]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    got = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    if got.get("transfer-encoding") == "chunked":
        chunks, rest = [], payload
        while True:
            size_text, _, rest = rest.partition(b"\r\n")
            size = int(size_text.split(b";")[0], 16)
            if size == 0:
                break
            chunks.append(rest[:size])
            rest = rest[size + 2 :]
        payload = b"".join(chunks)
    return int(status_line.split()[1]), got.get("content-type", ""), payload.decode()


def parse_body(content_type: str, text: str) -> Any:
    if not text:
        return None
    if content_type.startswith("text/event-stream"):
        data = [line[5:].lstrip(" ") for line in text.splitlines() if line.startswith("data:")]
        return json.loads(data[0])
    return json.loads(text)


class SseStream:
    """An open listen stream read message by message."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.lines = response.aiter_lines()

    async def next(self) -> Any | None:
        data: list[str] = []
        while True:
            try:
                line = await asyncio.wait_for(anext(self.lines), 10)
            except StopAsyncIteration:
                return None
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
            elif line == "" and data:
                return json.loads("\n".join(data))


@contextlib.asynccontextmanager
async def serving(server: MCPServer) -> AsyncIterator[str]:
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    runner = asyncio.create_task(uv.serve(sockets=[sock]))
    try:
        while not uv.started:
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        uv.should_exit = True
        await runner
        sock.close()


async def wait_for(engine: _native.Engine, principal: str, task: str, done: Any) -> None:
    """Waits (event-driven, through a subscription) until the task's committed state is ``done``."""
    subscription = await engine.subscribe(principal, [task])
    state = await engine.get(principal, task)
    while not done(state):
        raw = await asyncio.wait_for(subscription.next(), 10)
        assert raw is not None, f"{task} ended before {state}"
        state = raw


async def replay(path: Path, store: str) -> None:
    vector = json.loads(path.read_text())
    name = vector["name"]
    engine = _native.Engine(store, 60_000, 1_000, 10_000, clock_start_ms=vector["start_ms"], id_prefix="task")
    scripts = Scripts()
    owners: dict[str, str] = {}
    variables: dict[str, Any] = {}
    streams: dict[str, SseStream] = {}
    next_id = 1
    unchecked = _unchecked().get(name, {})
    failures: list[str] = []

    def check(where: str, status: int, expect: dict[str, Any], method: str, message: Any, index: int) -> None:
        if index in unchecked:
            print(f"{where}: not checked ({unchecked[index]})")
            return
        try:
            SCHEMA.check_response(method, message)
            assert status == expect["status"], f"{where}: HTTP {status} {message}"
            assert_matches(where, expect["body"], normalize(expect["body"], message))
        except AssertionError as e:
            failures.append(str(e))

    async with serving(build_server(engine, scripts)) as url, httpx.AsyncClient(timeout=10) as http:
        for index, step in enumerate(vector["steps"]):
            where = f"{name} step {index}"
            step = substitute(step, variables)
            tasks = step.get("tasks", True)
            principal = step.get("principal")
            if "send" in step:
                method = step["send"]["method"]
                params = dict(step["send"].get("params") or {})
                params.setdefault("_meta", envelope(tasks, step.get("capabilities")))
                body = {"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}
                next_id += 1
                headers = apply_headers(standard_headers(body, principal), step.get("headers"))
                status, content_type, text = await post(url, headers, json.dumps(body).encode())
                message = parse_body(content_type, text)
                check(where, status, step["expect"], method, message, index)
                result = (message or {}).get("result") or {}
                if method == "tools/call" and result.get("resultType") == "task":
                    owners[result["taskId"]] = f"bearer:{principal}" if principal else "anonymous"
                for var, ptr in (step.get("capture") or {}).items():
                    variables[var] = pointer(message, ptr)
            elif "send_raw" in step:
                raw = step["send_raw"]
                content = raw if isinstance(raw, str) else raw["repeat"] * raw["times"]
                headers = apply_headers(
                    {"content-type": "application/json", "accept": "application/json, text/event-stream"},
                    step.get("headers"),
                )
                status, content_type, text = await post(url, headers, content.encode())
                message = parse_body(content_type, text)
                check(where, status, step["expect"], "", message, index)
            elif "advance_ms" in step:
                engine.advance_clock(step["advance_ms"])
            elif "work" in step:
                work = step["work"]
                task = work["task"]
                owner = owners[task]
                try:
                    state = await engine.get(owner, task)
                except TaskNotFoundError:
                    continue  # purged: the work already ended
                if state["status"] in ("completed", "failed", "cancelled"):
                    continue  # "the work would have finished now"
                queue = scripts.queues[task]
                if "status" in work:
                    queue.put_nowait(("status", work["status"]))
                    await wait_for(engine, owner, task, lambda t: t.get("statusMessage") == work["status"])
                elif "input" in work and "refused" in work:
                    # The work's request is refused and nothing changes: it goes on.
                    before = len(scripts.refusals[task])
                    queue.put_nowait(("input", work["input"]))
                    got = await scripts.wait_refusals(task, before + 1)
                    assert_matches(where, work["refused"], got[before])
                elif "input" in work:
                    queue.put_nowait(("input", work["input"]))
                    await wait_for(engine, owner, task, lambda t: t["status"] == "input_required")
                elif "complete" in work or "fail" in work:
                    queue.put_nowait(("complete", work["complete"]) if "complete" in work else ("fail", work["fail"]))
                    await wait_for(engine, owner, task, lambda t: t["status"] != "working")
                else:
                    raise AssertionError(f"{where}: unknown work {work}")
            elif "sweep" in step:
                expired, purged = await engine.sweep()
                assert {"expired": expired, "purged": purged} == step["sweep"], where
            elif "answers" in step:
                expected = step["answers"]["expect"]
                got = await scripts.wait_answers(step["answers"]["task"], len(expected))
                assert_matches(where, expected, got)
            elif "listen" in step:
                listen = step["listen"]
                params = {"notifications": listen["notifications"], "_meta": envelope(tasks)}
                body = {"jsonrpc": "2.0", "id": next_id, "method": "subscriptions/listen", "params": params}
                next_id += 1
                request = http.build_request("POST", url, content=json.dumps(body), headers=standard_headers(body, principal))
                response = await http.send(request, stream=True)
                assert response.status_code == step["expect"]["status"], where
                assert response.headers["content-type"].startswith("text/event-stream"), where
                streams[listen["stream"]] = SseStream(response)
            elif "events" in step:
                stream = streams[step["events"]["stream"]]
                for expected in step["events"]["expect"]:
                    message = await stream.next()
                    assert message is not None, f"{where}: stream ended"
                    SCHEMA.check_listen_message(message)
                    assert_matches(where, expected, normalize(expected, message))
                if step["events"].get("end"):
                    assert await stream.next() is None, f"{where}: stream should end"
            else:
                raise AssertionError(f"{where}: unknown step {step}")
        for stream in streams.values():
            await stream.response.aclose()
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("path", _vector_files(), ids=lambda p: p.stem)
async def test_vector(path: Path, store: str, tmp_path: Path) -> None:
    reason = _skips().get(path.stem)
    if reason is not None:
        print(f"skipping vector {path.stem}: {reason}")
        pytest.skip(reason)
    await replay(path, "memory://" if store == "memory" else f"sqlite:///{tmp_path}/tasks.db")


def test_skip_list_names_real_vectors() -> None:
    names = {p.stem for p in _vector_files()}
    assert set(_skips()) <= names
    for vector, steps in _unchecked().items():
        assert vector in names
        count = len(json.loads((VECTORS / f"{vector}.json").read_text())["steps"])
        assert all(0 <= step < count for step in steps), vector
