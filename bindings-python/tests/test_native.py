"""The native engine through its Python surface: create, read, answer, cancel, errors, durability."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_tasks import _native
from mcp_tasks.errors import InvalidParamsError, McpTaskError, TaskNotFoundError


async def test_create_get_complete() -> None:
    engine = _native.Engine("memory://", default_poll_interval_ms=250)
    created, task = await engine.create_task("alice", "tool")
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert created["pollIntervalMs"] == 250
    assert len(created["taskId"]) == 48
    await task.set_status_message("halfway")
    got = await engine.get("alice", task.task_id)
    assert (got["status"], got["statusMessage"]) == ("working", "halfway")
    assert await task.complete({"content": [{"type": "text", "text": "ok"}], "isError": False})
    got = await engine.get("alice", task.task_id)
    assert got["status"] == "completed"
    assert got["result"]["resultType"] == "complete"


async def test_errors_carry_codes_and_builtin_bases() -> None:
    engine = _native.Engine("memory://")
    _, task = await engine.create_task("alice", "tool")
    with pytest.raises(TaskNotFoundError) as caught:
        await engine.get("bob", task.task_id)  # another principal sees "not found"
    assert caught.value.code == -32602
    assert isinstance(caught.value, LookupError) and isinstance(caught.value, McpTaskError)
    with pytest.raises(InvalidParamsError):
        await engine.update("alice", task.task_id, [1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidParamsError) as too_big:
        engine.check_arguments({"x": "y" * (2 << 20)})
    assert too_big.value.data["what"] == "arguments"


async def test_input_round_and_cancel() -> None:
    engine = _native.Engine("memory://")
    _, task = await engine.create_task("p", "tool")
    asking = asyncio.ensure_future(
        task.request_input({"a": {"method": "roots/list", "params": {}}, "b": {"method": "roots/list", "params": {}}})
    )
    for _ in range(200):
        got = await engine.get("p", task.task_id)
        if got["status"] == "input_required":
            break
        await asyncio.sleep(0.005)
    assert sorted(got["inputRequests"]) == ["a", "b"]
    await engine.update("p", task.task_id, {"a": {"roots": []}})
    got = await engine.get("p", task.task_id)
    assert list(got["inputRequests"]) == ["b"], "answered keys leave at once"
    await engine.update("p", task.task_id, {"b": {"roots": []}})
    assert sorted(await asking) == ["a", "b"]
    await engine.cancel("p", task.task_id)
    assert task.is_cancelled()
    assert not await task.complete({"content": []}), "a result after cancel is discarded"
    assert (await engine.get("p", task.task_id))["status"] == "cancelled"


CRASHING_HOST = """
import asyncio, json, os, sys
from mcp_tasks import _native

async def main():
    engine = _native.Engine(sys.argv[1])
    _, done = await engine.create_task("p", "tool")
    await done.complete({"content": []})
    _, running = await engine.create_task("p", "tool")
    print(done.task_id, running.task_id, flush=True)
    os._exit(0)  # die with the task still running: no cleanup runs

asyncio.run(main())
"""


async def test_sqlite_tasks_survive_a_dead_process(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'tasks.db'}"
    out = subprocess.run([sys.executable, "-c", CRASHING_HOST, url], capture_output=True, text=True, check=True)
    done_id, running_id = out.stdout.split()
    engine = _native.Engine(url)
    assert (await engine.get("p", done_id))["status"] == "completed"
    abandoned = await engine.get("p", running_id)
    assert abandoned["status"] == "failed"
    assert abandoned["error"]["data"]["reason"] == "server_restarted"


@pytest.mark.parametrize("durability", ["", "?durability=full", "?durability=normal"])
async def test_sqlite_durability_options_persist(tmp_path: Path, durability: str) -> None:
    url = f"sqlite:///{tmp_path}/tasks.db{durability}"
    engine = _native.Engine(url)
    _, task = await engine.create_task("alice", "tool")
    assert await task.complete({"content": []})
    task_id = task.task_id
    del task, engine  # closes the store and releases the file
    import gc

    gc.collect()
    again = _native.Engine(url)
    assert (await again.get("alice", task_id))["status"] == "completed"


def test_unknown_store_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="durability"):
        _native.Engine(f"sqlite:///{tmp_path}/tasks.db?sync=off")
    with pytest.raises(ValueError):
        _native.Engine("redis://localhost")


async def test_on_cancel_fires_for_cancel_and_not_after_completion() -> None:
    engine = _native.Engine("memory://")
    _, cancelled_task = await engine.create_task("alice", "tool")
    fired = asyncio.Event()
    cancelled_task.on_cancel(fired.set)
    await engine.cancel("alice", cancelled_task.task_id)
    await asyncio.wait_for(fired.wait(), 5)

    _, finished = await engine.create_task("alice", "tool")
    calls: list[str] = []
    finished.on_cancel(lambda: calls.append("cancel"))
    assert await finished.complete({"content": []})
    await asyncio.sleep(0.05)  # give a wrongly surviving waiter time to fire
    assert calls == []


@pytest.mark.parametrize("notice", ["sweep", "read"])
async def test_on_cancel_fires_when_the_task_expires(notice: str) -> None:
    engine = _native.Engine("memory://", clock_start_ms=1_000_000, id_prefix="t")
    _, task = await engine.create_task("alice", "tool", ttl_ms=1_000)
    fired = asyncio.Event()
    task.on_cancel(fired.set)
    engine.advance_clock(1_000)
    if notice == "sweep":
        assert await engine.sweep() == (1, 0)
    else:
        assert (await engine.get("alice", task.task_id))["status"] == "failed"
    await asyncio.wait_for(fired.wait(), 5)


@pytest.mark.skipif("MCP_TASKS_PG_URL" not in __import__("os").environ, reason="no PostgreSQL (tests/run-all starts one)")
async def test_postgres_store_is_shared_between_engines() -> None:
    import os

    url = os.environ["MCP_TASKS_PG_URL"]
    first, second = _native.Engine(url), _native.Engine(url)
    _, task = await first.create_task("alice", "tool")
    assert (await second.get("alice", task.task_id))["status"] == "working"
    fired = asyncio.Event()
    task.on_cancel(fired.set)
    await second.cancel("alice", task.task_id)
    # The cancel made on the second engine reaches the work on the first through LISTEN/NOTIFY,
    # without a read on the first (and well before its next sweep would notice).
    await asyncio.wait_for(fired.wait(), 5)
    assert (await first.get("alice", task.task_id))["status"] == "cancelled"


async def test_ready_results_behave_like_awaitables() -> None:
    # A memory-store operation finishes on its first poll and comes back already resolved.
    engine = _native.Engine("memory://")
    pending = engine.create_task("alice", "tool")
    assert isinstance(pending, _native.Ready)
    created, task = await pending
    with pytest.raises(RuntimeError, match="already awaited"):
        await pending
    got = await asyncio.wait_for(engine.get("alice", task.task_id), 5)  # wrapped in a Task
    assert got["taskId"] == created["taskId"]
    failing = engine.get("bob", task.task_id)
    with pytest.raises(TaskNotFoundError):
        await failing


@pytest.mark.parametrize(
    "result",
    [{1: "x"}, {"x": float("nan")}, {"x": {1, 2}}, {"x": 2**70}, {"x": object()}],
    ids=["int key", "nan", "set", "huge int", "object"],
)
async def test_results_that_are_not_json_are_refused(result: dict) -> None:  # type: ignore[type-arg]
    engine = _native.Engine("memory://")
    _, task = await engine.create_task("alice", "tool")
    with pytest.raises(InvalidParamsError, match="not JSON"):
        await task.complete(result)


async def test_results_convert_every_json_shape() -> None:
    engine = _native.Engine("memory://")
    _, task = await engine.create_task("alice", "tool")
    value = {"s": "é", "i": -3, "u": 2**63, "f": 0.5, "b": True, "n": None, "l": [1, "a"], "t": (1, 2), "o": {"k": []}}
    assert await task.complete({"content": [], "structuredContent": value})
    got = (await engine.get("alice", task.task_id))["result"]["structuredContent"]
    assert got == {**value, "t": [1, 2]}
    assert got["b"] is True and isinstance(got["i"], int)


async def test_engine_defaults_are_cores_unless_given() -> None:
    created, task = await _native.Engine("memory://").create_task("p", "t")
    assert (created["ttlMs"], created["pollIntervalMs"]) == (3_600_000, 1_000)  # core's EngineConfig::default()
    await task.complete({"content": []})
    created, task = await _native.Engine("memory://", unlimited_ttl=True, default_poll_interval_ms=5).create_task("p", "t")
    assert (created["ttlMs"], created["pollIntervalMs"]) == (None, 5)
    await task.complete({"content": []})
