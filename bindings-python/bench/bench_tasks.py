"""Side-by-side benchmark of task servers on mcp 2.3.0 (a script, not a test).

The workload: 1,000 ``tools/call`` creates of a task tool (the tool returns at once), then
``tasks/get`` on every task until all are terminal. Three servers, each in its own process:

- ``mcp-tasks``: our ``TasksExtension`` on ``MCPServer`` with the default SQLite store
  (``durability=normal``: every write is in the store's redo log before the response, so it
  survives the process dying; SQLite commits follow in the background; not power-loss safe);
- ``mcp-tasks-full``: the same with ``?durability=full`` (every write waits for an fsynced
  group commit: survives power loss);
- ``mcp-tasks-memory``: the same on ``memory://`` (not durable), to separate the glue's cost
  from the store's;
- ``dict floor``: a non-durable dict-store extension on the same ``MCPServer``, written here only
  as the baseline (the SDK's own cost of a task round trip);
- ``fastmcp-tasks``: fastmcp-tasks 4.1.4 on FastMCP with ``memory://``.

Two modes: in-process (``mcp.Client`` dispatching straight into the server, creates one after
another: p50 latency and creates/s) and loopback Streamable HTTP (the server under uvicorn in a
child process, 16 concurrent clients posting JSON-RPC: creates/s). Run with
``bindings-python/bench/run`` (it builds the venv); ``python bench_tasks.py`` prints the table.

``--load`` prints the second table instead: each server under uvicorn, loaded by
``server-load`` (tests/fixtures: a Rust HTTP/1.1 client on one thread, so the Python client's own
cost does not cap the figures) on 64 keep-alive connections: durable creates/s, ``tasks/get``/s of
finished tasks, and tasks followed from create to outcome per second (create, then ``tasks/get``
until terminal), each against a fresh server, the servers taking turns, medians of 3 rounds. The
ratios to the dict floor are the targets of issue 33: creates >= 1.5x, end to end >= 1.2x,
``tasks/get`` >= 2x.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Literal

N_TASKS = 1_000
HTTP_CLIENTS = 16
RUNS = 3  # each figure is the median of this many runs, interleaved across servers
EXT = "io.modelcontextprotocol/tasks"
IMPLS = ("mcp-tasks", "mcp-tasks-full", "mcp-tasks-memory", "dict-floor", "fastmcp-tasks")
LOAD_IMPLS = ("mcp-tasks", "mcp-tasks-memory", "dict-floor")
# measure -> (what it counts, the target ratio of mcp-tasks (SQLite) to the dict floor)
LOAD_MEASURES = {"creates": ("creates/s", 1.5), "gets": ("tasks/get/s", 2.0), "e2e": ("followed/s", 1.2)}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- the servers ---------------------------------------------------------------------------------


def dict_floor_server() -> Any:
    """MCPServer + a tasks extension that keeps tasks in a dict: no durability, no TTL, no checks
    beyond the declaration. Only the baseline for this benchmark."""
    from mcp.server.extension import Extension, MethodBinding
    from mcp.server.mcpserver import MCPServer
    from mcp.shared.exceptions import MCPError
    from mcp_types import RequestParams

    class TaskIdParams(RequestParams):
        task_id: str

    class DictTasks(Extension):
        identifier = EXT

        def __init__(self) -> None:
            self.tasks: dict[str, dict[str, Any]] = {}
            self.running: set[asyncio.Task[None]] = set()

        def settings(self) -> dict[str, Any]:
            return {}

        def methods(self) -> list[MethodBinding]:
            return [MethodBinding("tasks/get", TaskIdParams, self.get)]

        async def get(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
            task = self.tasks.get(params.task_id)
            if task is None:
                raise MCPError(-32602, "unknown task")
            return {"resultType": "complete", **task}

        async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
            caps = ctx.session.client_capabilities
            if not (caps and caps.extensions and EXT in caps.extensions):
                return await call_next(ctx)
            now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            task = {"taskId": uuid.uuid4().hex, "status": "working", "createdAt": now, "lastUpdatedAt": now,
                    "ttlMs": 3_600_000, "pollIntervalMs": 1_000}
            self.tasks[task["taskId"]] = task
            run = asyncio.ensure_future(self.run(task, call_next, ctx))
            self.running.add(run)
            run.add_done_callback(self.running.discard)
            return {"resultType": "task", **task}

        async def run(self, task: dict[str, Any], call_next: Any, ctx: Any) -> None:
            result = await call_next(ctx)
            wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
            task.update(status="completed", result=wire)

    server = MCPServer("bench", extensions=[DictTasks()])
    add_work_tool(server)
    return server


def ours_server(store: str) -> Any:
    from mcp.server.mcpserver import MCPServer

    from mcp_tasks import TasksExtension

    tasks = TasksExtension(store, tools={"work": "optional"})
    server = MCPServer("bench", extensions=[tasks])
    tasks.install(server)  # as docs/python.md sets it up: core routes the extension's traffic first
    add_work_tool(server)
    return server


def fastmcp_server() -> Any:
    from fastmcp import FastMCP
    from fastmcp_tasks import TasksExtension

    server = FastMCP("bench")
    server.add_extension(TasksExtension(url="memory://"))

    @server.tool(task=True)
    async def work(n: int) -> str:
        return f"done {n}"

    return server


def add_work_tool(server: Any) -> None:
    @server.tool()
    async def work(n: int) -> str:
        return f"done {n}"


def build(impl: str, store_dir: str) -> Any:
    if impl == "mcp-tasks":
        return ours_server(f"sqlite:///{store_dir}/tasks.db")
    if impl == "mcp-tasks-full":
        return ours_server(f"sqlite:///{store_dir}/tasks.db?durability=full")
    if impl == "mcp-tasks-memory":
        return ours_server("memory://")
    if impl == "dict-floor":
        return dict_floor_server()
    return fastmcp_server()


def lowlevel(server: Any) -> Any:
    """The mcp lowlevel ``Server`` an in-process ``mcp.Client`` dispatches into."""
    for attr in ("_lowlevel_server", "_mcp_server"):
        if hasattr(server, attr):
            return getattr(server, attr)
    return server


# -- in-process ----------------------------------------------------------------------------------


async def in_process(impl: str, store_dir: str) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.extension import ClientExtension
    from mcp_types import Request, RequestParams, Result
    from pydantic import ConfigDict, Field

    class TaskFields(Result):
        model_config = ConfigDict(extra="allow", populate_by_name=True)
        task_id: str = Field(alias="taskId")
        status: str

    class Created(TaskFields):
        result_type: Literal["task"] = Field(alias="resultType")

    class GetParams(RequestParams):
        model_config = ConfigDict(populate_by_name=True)
        task_id: str = Field(serialization_alias="taskId")

    class GetTask(Request[GetParams, Literal["tasks/get"]]):
        method: Literal["tasks/get"] = "tasks/get"
        params: GetParams

    from mcp.client.extension import ResultClaim

    async def never(created: Any, ctx: Any) -> Any:
        raise AssertionError("the benchmark reads CreateTaskResults raw")

    class Declare(ClientExtension):
        """Declares the tasks extension and claims ``resultType: task`` (read raw below)."""

        identifier = EXT

        def settings(self) -> dict[str, Any]:
            return {}

        def claims(self) -> list[Any]:
            return [ResultClaim(result_type="task", model=Created, resolve=never)]

    server = build(impl, store_dir)
    latencies: list[float] = []
    async with Client(lowlevel(server), extensions=[Declare()]) as client:
        session = client.session
        ids: list[str] = []
        start = time.perf_counter()
        for n in range(N_TASKS):
            t0 = time.perf_counter()
            created = await session.call_tool("work", {"n": n}, allow_claimed=True)
            latencies.append(time.perf_counter() - t0)
            ids.append(created.task_id)  # type: ignore[union-attr]
        create_s = time.perf_counter() - start
        gets = 0
        pending = ids
        while pending:
            still = []
            for task_id in pending:
                got = await session.send_request(GetTask(params=GetParams(task_id=task_id)), TaskFields)
                gets += 1
                if got.status not in ("completed", "failed", "cancelled"):
                    still.append(task_id)
            pending = still
            if pending:
                await asyncio.sleep(0.001)
        total_s = time.perf_counter() - start
    return {
        "creates_per_s": N_TASKS / create_s,
        "create_p50_ms": statistics.median(latencies) * 1000,
        "gets": gets,
        "total_s": total_s,
    }


# -- loopback HTTP -------------------------------------------------------------------------------


def serve(impl: str, port: int, store_dir: str) -> None:
    import uvicorn

    server = build(impl, store_dir)
    if impl == "fastmcp-tasks":
        app = server.http_app(path="/mcp", stateless_http=True, json_response=True)
    else:
        app = server.streamable_http_app(stateless_http=True, json_response=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error")


def start_server(impl: str, store_dir: str, stderr: int | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """``impl`` serving in a child process (``--serve``) on a free loopback port, once it accepts
    connections (30 s at most): the process and its port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, __file__, "--serve", impl, str(port), store_dir], stderr=stderr)
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, port


def envelope() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
    }


async def over_http(impl: str, store_dir: str) -> dict[str, Any]:
    import httpx

    proc, port = start_server(impl, store_dir)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        counter = iter(range(1, 10**9))
        limits = httpx.Limits(max_connections=HTTP_CLIENTS, max_keepalive_connections=HTTP_CLIENTS)
        async with httpx.AsyncClient(timeout=60, limits=limits) as http:

            async def rpc(method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
                body = {"jsonrpc": "2.0", "id": next(counter), "method": method,
                        "params": {**params, "_meta": envelope()}}
                headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
                           "mcp-method": method, "mcp-name": name}
                response = await http.post(url, json=body, headers=headers)
                message = response.json()
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

            await rpc("tools/call", {"name": "work", "arguments": {"n": -1}}, "work")  # warm up
            ids: list[str] = []

            async def creator(k: int) -> None:
                for n in range(k, N_TASKS, HTTP_CLIENTS):
                    created = await rpc("tools/call", {"name": "work", "arguments": {"n": n}}, "work")
                    ids.append(created["taskId"])

            start = time.perf_counter()
            await asyncio.gather(*(creator(k) for k in range(HTTP_CLIENTS)))
            create_s = time.perf_counter() - start
            gets = 0

            async def poller(mine: list[str]) -> None:
                nonlocal gets
                pending = mine
                while pending:
                    still = []
                    for task_id in pending:
                        got = await rpc("tasks/get", {"taskId": task_id}, task_id)
                        gets += 1
                        if got["status"] not in ("completed", "failed", "cancelled"):
                            still.append(task_id)
                    pending = still
                    if pending:
                        await asyncio.sleep(0.001)

            await asyncio.gather(*(poller(ids[k::HTTP_CLIENTS]) for k in range(HTTP_CLIENTS)))
            total_s = time.perf_counter() - start
        return {"creates_per_s": N_TASKS / create_s, "gets": gets, "gets_per_s": gets / (total_s - create_s),
                "total_s": total_s}
    finally:
        proc.terminate()
        proc.wait()


# -- under load (server-load) ---------------------------------------------------------------------


def loaded(impl: str, measure: str, seconds: float, connections: int, load_bin: str) -> dict[str, float]:
    """One measure against a fresh server of ``impl`` (its own process and store)."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_STORE_DIR")) as store_dir:
        # The servers' start and stop lines stay out of the table; a failing request is counted.
        proc, port = start_server(impl, store_dir, stderr=subprocess.DEVNULL)
        try:
            out = subprocess.run(
                [load_bin, f"http://127.0.0.1:{port}/mcp", measure, "--connections", str(connections),
                 "--seconds", str(seconds)],
                check=True, capture_output=True, text=True,
            )
            return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
        finally:
            proc.terminate()
            proc.wait()


def load_table(rounds: int, seconds: float, connections: int) -> int:
    """Prints the ``--load`` table; the number of failed requests (the figures are not checked:
    CI runs it small as a smoke, on a machine too noisy for timing)."""
    load_bin = os.environ.get("SERVER_LOAD", os.path.join(ROOT, "target", "release", "server-load"))
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(rounds):
        for measure in LOAD_MEASURES:
            for impl in LOAD_IMPLS:
                runs.setdefault((impl, measure), []).append(loaded(impl, measure, seconds, connections, load_bin))
    rate = {key: statistics.median(r["rate"] for r in rs) for key, rs in runs.items()}
    bad = {key: sum(r["bad"] for r in rs) for key, rs in runs.items()}
    print(f"server-load, {connections} connections, {seconds:g} s per measure after 1 s of warm-up,"
          f" medians of {rounds} rounds (servers under uvicorn, fresh per measure)")
    print(f"{'measure':<12} " + " ".join(f"{impl:>17}" for impl in LOAD_IMPLS) + "   ours/floor  target")
    for measure, (label, target) in LOAD_MEASURES.items():
        ratio = rate[("mcp-tasks", measure)] / rate[("dict-floor", measure)]
        cells = " ".join(f"{rate[(impl, measure)]:>17,.0f}" for impl in LOAD_IMPLS)
        print(f"{label:<12} {cells}   {ratio:>9.2f}x  >= {target}x {'met' if ratio >= target else 'NOT met'}")
    failures = {key: n for key, n in bad.items() if n}
    if failures:
        print(f"failed requests: {failures}")
    return sum(failures.values())


# -- the driver ----------------------------------------------------------------------------------


def one(impl: str, mode: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_STORE_DIR")) as store_dir:
        run = in_process if mode == "in-process" else over_http
        return asyncio.run(run(impl, store_dir))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs=2, metavar=("IMPL", "MODE"))
    parser.add_argument("--serve", nargs=3, metavar=("IMPL", "PORT", "STORE_DIR"))
    parser.add_argument("--load", action="store_true", help="the table under load (server-load) instead")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    if args.load:
        sys.exit(1 if load_table(args.rounds, args.seconds, args.connections) else 0)
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), args.serve[2])
        return
    if args.one:
        print(json.dumps(one(*args.one)))
        return
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(RUNS):
        for mode in ("in-process", "http"):
            for impl in IMPLS:
                out = subprocess.run([sys.executable, __file__, "--one", impl, mode], check=True,
                                     capture_output=True, text=True)
                runs.setdefault((impl, mode), []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    results = {key: {field: statistics.median(r[field] for r in rs) for field in rs[0]} for key, rs in runs.items()}
    print(f"{N_TASKS} creates then tasks/get until all are terminal; HTTP: {HTTP_CLIENTS} concurrent clients;"
          f" medians of {RUNS} runs")
    print(f"{'mode':<11} {'server':<17} {'creates/s':>10} {'create p50':>11} {'total s':>8}  vs dict floor  vs fastmcp-tasks")
    for mode in ("in-process", "http"):
        floor = results[("dict-floor", mode)]["creates_per_s"]
        fast = results[("fastmcp-tasks", mode)]["creates_per_s"]
        for impl in IMPLS:
            r = results[(impl, mode)]
            p50 = f"{r['create_p50_ms']:.3f} ms" if "create_p50_ms" in r else "-"
            print(f"{mode:<11} {impl:<17} {r['creates_per_s']:>10,.0f} {p50:>11} {r['total_s']:>8.2f}"
                  f"  {floor / r['creates_per_s']:>6.2f}x slower  {r['creates_per_s'] / fast:>6.1f}x faster")
    print()
    for ours in ("mcp-tasks", "mcp-tasks-full"):
        fast = results[("fastmcp-tasks", "in-process")]["creates_per_s"]
        speedup = results[(ours, "in-process")]["creates_per_s"] / fast
        print(f"{ours}: target in-process >= 10x fastmcp-tasks' create rate: {speedup:.1f}x")
        for mode in ("in-process", "http"):
            ratio = results[("dict-floor", mode)]["creates_per_s"] / results[(ours, mode)]["creates_per_s"]
            print(f"{ours}: target {mode} within 1.25x of the dict floor: {ratio:.2f}x")


if __name__ == "__main__":
    main()
