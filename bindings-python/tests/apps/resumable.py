"""A server with one resumable tool, for the worker tests: ``count`` counts ``steps`` steps of
``step_ms`` each, saving a checkpoint after each, and resumes from it when another attempt runs
it; with ``confirm`` it asks whether to finish once counted. Its status names the attempt and the process, so a test knows which process to kill.

``MCP_TASKS_STORE`` names the store and ``MCP_TASKS_EXECUTION`` is ``local`` or ``workers``
(a front-end). ``python resumable.py PORT`` serves it over HTTP; ``python -m mcp_tasks worker
apps.resumable:server`` runs its tools as a worker.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import uvicorn
from mcp.server.mcpserver import MCPServer

from mcp_tasks import TaskConfig, TasksExtension, current_task

tasks = TasksExtension(
    os.environ.get("MCP_TASKS_STORE", "memory://"),
    tools={
        "count": TaskConfig("required", poll_interval_ms=100, max_attempts=3, backoff_ms=200),
        "sleep": TaskConfig("required", poll_interval_ms=100),
    },
    execution="workers" if os.environ.get("MCP_TASKS_EXECUTION") == "workers" else "local",
    # A dead worker's task moves on within a second or two, not 15 s.
    worker_lease_ms=1000,
)
server = MCPServer("mcp-tasks-resumable", extensions=[tasks])
tasks.install(server)


@server.tool()
async def count(steps: int = 10, step_ms: int = 100, confirm: bool = False) -> str:
    """Counts, checkpointing each step; a later attempt resumes from the checkpoint. With
    ``confirm``, asks whether to finish once counted (an input round in the last attempt)."""
    task = current_task()
    assert task is not None, "count runs as a task"
    start = (task.saved_checkpoint or {}).get("done", 0)
    for done in range(start, steps):
        await asyncio.sleep(step_ms / 1000)
        await task.checkpoint({"done": done + 1})
        await task.set_status(f"step {done + 1} of {steps} (attempt {task.attempt}, pid {os.getpid()})")
    if confirm:
        question = {"method": "elicitation/create", "params": {
            "mode": "form", "message": "Counted. Finish?",
            "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]},
        }}
        answer = (await task.request_input({"finish": question})).get("finish") or {}
        if answer.get("action") != "accept" or (answer.get("content") or {}).get("confirm") is not True:
            return f"stopped at {steps} in attempt {task.attempt}"
    return f"counted to {steps} in attempt {task.attempt}, resumed from step {start}"


@server.tool()
async def sleep(seconds: float = 60.0) -> str:
    """Not resumable: fails when its process dies."""
    await asyncio.sleep(seconds)
    return "slept"


if __name__ == "__main__":
    # The application's own OpenTelemetry SDK, when the trace tests name an OTLP endpoint.
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests/otel"))
    from app_sdk import configure

    configure()
    port = int(sys.argv[1])
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    print(f"listening on http://127.0.0.1:{port}/mcp", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
