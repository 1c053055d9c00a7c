"""Memory per in-flight tool call of Python servers on mcp 2.3.0, side by side (a script, not a test).

    bindings-python/bench/memory [--calls 3000]

Each configuration runs in a fresh process, on a fresh SQLite file, with the app driven in-process
through httpx's ASGI transport (no sockets), a tool that sleeps long enough for every call to be
in flight when memory is read:

- ``sdk``: ``MCPServer`` alone, a synchronous call of the sleeping tool;
- ``sync``: the fixture server (``tests/conformance/python_server.py``, ``TasksExtension``) and a
  client that did not declare tasks: the SDK serves the call;
- ``task``: the same server and a client that declared tasks: a task whose tool sleeps.

It prints the RSS per call in flight (after ``gc.collect()``), then, from another run of ``task``
under ``tracemalloc``, where a task's Python allocations go, grouped by the innermost frame of a
known component (the allocations of a pydantic model the SDK builds count as pydantic's). The
docs/BENCHMARKS.md quotes this output.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "slow_compute",
}
# The innermost frame that belongs to one of these names a traced allocation's owner.
OWNERS = (
    ("mcp_tasks/", "mcp_tasks (the extension's runner, its objects, the native handle)"),
    ("python_server.py", "the tool's own frame"),
    ("/mcp/", "mcp SDK (the request's connection, session, context, decoded body)"),
    ("/pydantic/", "pydantic models the SDK builds per request"),
    ("/anyio/", "anyio (the SDK's events and streams)"),
    ("/starlette/", "starlette (the request object)"),
    ("/httpx/", "the ASGI server's request cycle (httpx here, uvicorn in production)"),
    ("/asyncio/", "asyncio (tasks, futures, events, timer handles)"),
)


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def body(call_id: int, declared: bool, seconds: float) -> str:
    caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}} if declared else {}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "mcp-tasks-bench", "version": "0"},
    }
    params = {"name": "slow_compute", "arguments": {"seconds": seconds, "label": f"c{call_id}"}, "_meta": meta}
    return json.dumps({"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": params})


def sdk_alone() -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("sdk-alone")

    @server.tool()
    async def slow_compute(seconds: float = 1.0, label: str = "job") -> str:
        """Sleeps `seconds` then answers."""
        await asyncio.sleep(max(seconds, 0.0))
        return f"Computed {label} in {seconds}s"

    return server


def owner(traceback: tracemalloc.Traceback) -> str:
    for frame in reversed(list(traceback)):
        for key, name in OWNERS:
            if key in frame.filename:
                return name
    return "other"


async def child(mode: str, calls: int, trace: bool) -> dict[str, Any]:
    import httpx

    sys.path.insert(0, str(ROOT / "tests/conformance"))
    from python_server import build

    logging.disable(logging.CRITICAL)
    sleep_s = 10 + calls / 300
    with tempfile.TemporaryDirectory() as tmp:
        server = sdk_alone() if mode == "sdk" else build(f"sqlite://{tmp}/tasks.db")
        app = server.streamable_http_app(stateless_http=True, json_response=True)
        declared = mode == "task"
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                # The port only satisfies the SDK's Host check; no socket is opened.
                transport=httpx.ASGITransport(app=app),
                base_url="http://127.0.0.1:8000",
                timeout=600,
            ) as client,
        ):

            async def call(call_id: int, seconds: float) -> None:
                answer = (await client.post("/mcp", content=body(call_id, declared, seconds), headers=HEADERS)).text
                expected = '"resultType":"task"' if declared else "Computed"
                if expected not in answer:
                    raise RuntimeError(f"{mode}: unexpected answer {answer[:300]}")

            # Warm-up: imports, caches and the store's first pages.
            await asyncio.gather(*(call(i, 0) for i in range(100)))
            await asyncio.sleep(0.5)
            gc.collect()
            before = rss()
            if trace:
                tracemalloc.start(16)
                start = tracemalloc.take_snapshot()
            pending = [asyncio.ensure_future(call(1000 + i, sleep_s)) for i in range(calls)]
            if declared:
                await asyncio.gather(*pending)  # answered at once; the tools run on
            await asyncio.sleep(3)
            gc.collect()
            during = rss()
            result: dict[str, Any] = {"mode": mode, "before": before, "during": during}
            if trace:
                stats = tracemalloc.take_snapshot().compare_to(start, "traceback")
                groups: dict[str, int] = {}
                for stat in stats:
                    name = owner(stat.traceback)
                    groups[name] = groups.get(name, 0) + stat.size_diff
                result["traced"] = groups
            # Done measuring: the sleeping tools need not finish.
            print(json.dumps(result), flush=True)
            os._exit(0)
    raise AssertionError("unreachable")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--mode", choices=("sdk", "sync", "task"))
    parser.add_argument("--trace", action="store_true")
    args = parser.parse_args()
    if args.mode is not None:
        asyncio.run(child(args.mode, args.calls, args.trace))
        return 0
    rows = []
    for mode, trace in (("sdk", False), ("sync", False), ("task", False), ("task", True)):
        command = [sys.executable, __file__, "--mode", mode, "--calls", str(args.calls)] + ["--trace"] * trace
        out = subprocess.run(command, capture_output=True, text=True, timeout=900, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    n = args.calls
    print(f"{n} calls in flight; RSS per call in flight (after gc.collect())")
    print("| configuration | RSS per call | RSS warm → in flight (MiB) |")
    print("|---|---|---|")
    names = {
        "sdk": "`MCPServer` alone, synchronous call",
        "sync": "`TasksExtension`, synchronous call (the SDK serves it)",
        "task": "`TasksExtension`, task",
    }
    for row in rows[:3]:
        per = (row["during"] - row["before"]) // n
        print(f"| {names[row['mode']]} | {per:,} B | {row['before'] / 2**20:.1f} → {row['during'] / 2**20:.1f} |")
    traced = rows[3]["traced"]
    total = sum(traced.values())
    untraced = (rows[2]["during"] - rows[2]["before"]) // n
    print(f"\nA task's Python allocations (tracemalloc): {total // n:,} B per task in flight, of {untraced:,} B of RSS")
    print("| owner | bytes per task |")
    print("|---|---|")
    for name, size in sorted(traced.items(), key=lambda kv: -kv[1]):
        if size // n > 0:
            print(f"| {name} | {size // n:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
