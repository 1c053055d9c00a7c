"""The client vectors (tests/vectors/client) through the Python clients: ``TasksClient`` polling
and listening, and ``mcp.Client`` with ``TasksClientExtension`` (through its session, polling),
each against the vector's scripted server (``scripted-server``). Each must end as the vector's
``expect`` says; a failing input handler is tried raising and answering a number. Every wait is
bounded; no timing is asserted."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp
import pytest

from mcp_tasks import InputRequest, McpTaskError, TasksClient, TasksClientExtension, errors

ROOT = Path(__file__).resolve().parents[2]
VECTORS = sorted((ROOT / "tests/vectors/client").glob("*.json"))
BOUND = 20.0


def _scripted_binary() -> Path:
    binary = ROOT / "target/debug/scripted-server"
    if not binary.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "mcp-tasks-fixtures", "--bins"], cwd=ROOT, check=True)
    return binary


class Scripted:
    def __init__(self, vector: Path) -> None:
        self.proc = subprocess.Popen([str(_scripted_binary()), str(vector)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("listening on "), line
        self.url = line.split()[-1]

    async def sent(self, expect: dict[str, Any]) -> list[str]:
        """The methods received, once every method `expect` says must come has come (the
        best-effort cancel goes out just after the outcome), or after a bound."""
        async with httpx.AsyncClient() as http:
            for _ in range(100):
                log = (await http.get(self.url.replace("/mcp", "/log"))).json()
                methods = [m["method"] for m in log]
                if all(m in methods for m in expect.get("sent", [])):
                    break
                await asyncio.sleep(0.02)
        return methods

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def scripted() -> Iterator[Any]:
    started: list[Scripted] = []

    def start(vector: Path) -> Scripted:
        server = Scripted(vector)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON with the kinds kept: 1 is not 1.0 (nor True), and -0.0 is not 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return bool(a == b)


def test_kinds_are_compared_strictly() -> None:
    assert same_json({"a": [1, 1.0, -0.0, True]}, {"a": [1, 1.0, -0.0, True]})
    assert not same_json(1, 1.0) and not same_json(-0.0, 0.0) and not same_json(1, True)


def _handler(vector: dict[str, Any], failing: str) -> Any:
    answers = vector.get("input", {})
    if answers == "@fail":
        if failing == "raises":

            async def raises(request: InputRequest) -> dict[str, Any]:
                raise LookupError(f"no answer for {request.key}")

            return raises

        async def a_number(request: InputRequest) -> Any:
            return 5

        return a_number

    async def answer(request: InputRequest) -> dict[str, Any] | None:
        return answers.get(request.key)

    return answer


def _check_error(name: str, error: BaseException, want: dict[str, Any], failing: str) -> None:
    assert type(error).__name__ == want["class"], f"{name}: {error!r}"
    assert isinstance(error, McpTaskError)
    if "code" in want:
        assert error.code == want["code"], name
    if "reason" in want:
        assert isinstance(error.data, dict) and error.data.get("reason") == want["reason"], f"{name}: {error.data}"
        if want["reason"] == "input_handler_failed" and failing == "raises":
            assert isinstance(error.__cause__, LookupError), f"{name}: the cause is {error.__cause__!r}"
    for part in want.get("contains", []):
        assert part in str(error), f"{name}: {error} does not say {part!r}"


def _check_sent(name: str, methods: list[str], expect: dict[str, Any]) -> None:
    for method in expect.get("sent", []):
        assert method in methods, f"{name}: {method} was not sent: {methods}"
    for method in expect.get("not_sent", []):
        assert method not in methods, f"{name}: {method} was sent: {methods}"
    for method, most in expect.get("most", {}).items():
        assert methods.count(method) <= most, f"{name}: {methods}"


@pytest.mark.parametrize("vector", VECTORS, ids=[v.stem for v in VECTORS])
@pytest.mark.parametrize(("notifications", "failing"), [(False, "raises"), (True, "a-number")])
async def test_tasks_client(scripted: Any, vector: Path, notifications: bool, failing: str) -> None:
    spec = json.loads(vector.read_text())
    expect = spec["expect"]
    name = f"{spec['name']} ({'listen' if notifications else 'poll'}, {failing})"
    server = scripted(vector)
    client = TasksClient(
        server.url, store="memory://", notifications=notifications, input_handler=_handler(spec, failing)
    )
    try:
        call = asyncio.wait_for(client.call_tool(spec["tool"], spec["arguments"]), BOUND)
        if "call_error" in expect:
            with pytest.raises(McpTaskError) as raised:
                await call
            _check_error(name, raised.value, expect["call_error"], failing)
        else:
            execution = await call
            assert execution.task is not None, name
            outcome = await asyncio.wait_for(execution.result(), BOUND)
            if "outcome" in expect:
                assert same_json(outcome.raw, expect["outcome"]), f"{name}: {outcome.raw}"
            if "error" in expect:
                with pytest.raises(McpTaskError) as raised:
                    outcome.unwrap()
                _check_error(name, raised.value, expect["error"], failing)
        _check_sent(name, await server.sent(expect), expect)
    finally:
        await client.close()


@pytest.mark.parametrize("vector", VECTORS, ids=[v.stem for v in VECTORS])
async def test_mcp_client_with_the_extension(scripted: Any, vector: Path) -> None:
    """Through mcp.Client's own session: the case of ~80 polls in 40 s with no end (issue 31)."""
    spec = json.loads(vector.read_text())
    expect = spec["expect"]
    name = f"{spec['name']} (mcp.Client)"
    server = scripted(vector)
    extension = TasksClientExtension(store="memory://", input_handler=_handler(spec, "raises"))
    async with mcp.Client(server.url, mode="2026-07-28", extensions=[extension]) as session:
        call = asyncio.wait_for(session.call_tool(spec["tool"], spec["arguments"]), BOUND)
        want = expect.get("call_error") or expect.get("error")
        if want is None:
            result = await call
            assert same_json(result.structured_content, expect["outcome"]["result"]["structuredContent"]), name
        else:
            with pytest.raises(McpTaskError) as raised:
                await call
            _check_error(name, raised.value, want, "raises")
    _check_sent(name, await server.sent(expect), expect)


def test_a_handler_that_cannot_take_a_request_is_refused_when_registered() -> None:
    async def two(request: InputRequest, extra: int) -> None:
        return None

    with pytest.raises(TypeError, match="one argument"):
        TasksClient("http://127.0.0.1:9/mcp", store="memory://", input_handler=two)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        TasksClient("http://127.0.0.1:9/mcp", store="memory://", input_handler=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="one argument"):
        TasksClientExtension(store="memory://", input_handler=lambda: None)  # type: ignore[arg-type]
    assert errors.InternalError.CODE == -32603
