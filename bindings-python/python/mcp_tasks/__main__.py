"""``python -m mcp_tasks``: the ``mcp-tasks`` admin CLI (list, show, cancel, purge, tail, stats over
``sqlite://`` and ``postgres://`` store URLs), the same program as the Rust binary, run by the
native module. ``python -m mcp_tasks --help`` lists the commands.

``python -m mcp_tasks worker module:server`` runs a worker instead: it imports ``server`` (an
``MCPServer`` with a ``TasksExtension``) from ``module`` and runs the tool functions of the tasks
it claims from the extension's store, until interrupted."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
import sys
from typing import Any

from ._native import admin_main

WORKER_USAGE = "usage: python -m mcp_tasks worker MODULE:ATTRIBUTE  (an MCPServer with a TasksExtension)"


def _load(target: str) -> Any:
    """The MCPServer ``MODULE:ATTRIBUTE`` names (an attribute, or a function returning one)."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"{WORKER_USAGE}\n{target!r} is not MODULE:ATTRIBUTE")
    sys.path.insert(0, os.getcwd())
    try:
        server = importlib.import_module(module_name)
    except ImportError as e:
        raise SystemExit(f"cannot import {module_name!r}: {e}") from None
    for part in attribute.split("."):
        try:
            server = getattr(server, part)
        except AttributeError:
            raise SystemExit(f"{module_name!r} has no attribute {attribute!r}") from None
    return server() if callable(server) and not hasattr(server, "_extensions") else server


def worker(argv: list[str]) -> int:
    """Runs the worker of ``python -m mcp_tasks worker module:server``."""
    from .server import TasksExtension

    if len(argv) != 1 or argv[0].startswith("-"):
        print(WORKER_USAGE, file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    server = _load(argv[0])
    extensions = [e for e in getattr(server, "_extensions", []) if isinstance(e, TasksExtension)]
    if not extensions:
        print(f"{argv[0]} is not an MCPServer with a TasksExtension", file=sys.stderr)
        return 2
    logging.basicConfig(level=os.environ.get("MCP_TASKS_LOG", "WARNING").upper(), stream=sys.stderr)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        serving = asyncio.ensure_future(extensions[0].serve_worker(server))
        print(f"worker {os.getpid()} running the tasks of {argv[0]}", flush=True)
        await stop.wait()
        serving.cancel()

    asyncio.run(run())
    return 0


def main() -> int:
    if sys.argv[1:2] == ["worker"]:
        return worker(sys.argv[2:])
    # Ctrl-C ends the program (tail runs until interrupted) instead of waiting for the native
    # call to return to Python, which would only then raise KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    # The name usage messages show: the installed script's, or how this module was started.
    name = "mcp-tasks" if sys.argv[0].endswith("mcp-tasks") else "python -m mcp_tasks"
    return admin_main([name, *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
