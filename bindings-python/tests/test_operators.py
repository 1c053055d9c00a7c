"""Operators: ``python -m mcp_tasks`` (the admin CLI from the wheel) against a live Python server's SQLite
store (a cancel queued for the server and applied by its sweep) and its errors, and the metrics text."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_tasks import TasksExtension


def admin(store: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_tasks", "--store", store, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_the_cli_lists_shows_and_cancels_a_task_of_a_live_server(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path / 'tasks.db'}"
    tasks = TasksExtension(store)
    engine = tasks.engine
    created, ctx = await engine.create_task("alice", "report")
    task_id = created["taskId"]

    listed = admin(store, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["taskId"], r["status"], r["tool"], r["principal"]) for r in rows] == [
        (task_id, "working", "report", "alice")
    ]

    # The server (this process) owns the file: the cancel is queued and applied by its sweep.
    # In a thread: this process's event loop must keep running for the sweep to apply it.
    cancelled = await asyncio.to_thread(admin, store, "cancel", task_id)
    assert (cancelled.returncode, cancelled.stdout) == (0, f"cancelled {task_id}\n"), cancelled.stderr
    assert ctx.is_cancelled()
    shown = json.loads(admin(store, "show", task_id).stdout)
    assert shown["status"] == "cancelled"


def test_a_missing_store_and_bad_usage_are_clear(tmp_path: Path) -> None:
    missing = admin(f"sqlite://{tmp_path / 'absent.db'}", "stats")
    assert missing.returncode == 1
    assert "the file does not exist" in missing.stderr
    usage = admin("sqlite:///x.db", "list", "--older-than", "soon")
    assert usage.returncode == 2
    assert "is not an age" in usage.stderr


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_exit_zero(flag: str) -> None:
    done = subprocess.run([sys.executable, "-m", "mcp_tasks", flag], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout


async def test_the_extension_exposes_cores_metrics_text() -> None:
    import mcp_tasks

    tasks = TasksExtension("memory://")
    created, ctx = await tasks.engine.create_task("alice", "report")
    await ctx.complete({"content": []})
    text = tasks.metrics()
    assert 'mcp_tasks_tasks_created_total{tool="report"} 1' in text
    assert 'mcp_tasks_tasks_finished_total{tool="report",outcome="completed"} 1' in text
    assert text.endswith("# EOF\n")
    assert mcp_tasks.METRICS_CONTENT_TYPE.startswith("application/openmetrics-text")
