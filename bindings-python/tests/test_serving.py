"""``mcp_tasks.serving`` (uvicorn with core's bounds on connections) against slow and hostile
clients, with short bounds: a half-sent header and a silent connection are closed, a slow body
gets the table's 408, a header section over the limit 431 (a JSON-RPC error read before the
close), the cap sheds the oldest connection that had no request so a legitimate one is
served, and a response whose reader stopped reading is closed after the stall bound while
another is written to its end. A plain ASGI app stands in for an mcp one: what is tested is the HTTP layer. Every wait
is bounded; nothing asserts timing beyond that bound."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from mcp_tasks.serving import DEFAULT_SERVE_LIMITS, uvicorn_config

BOUND = 10.0
LIMITS = {"headerReadTimeoutMs": 300, "bodyReadTimeoutMs": 300, "idleTimeoutMs": 1000, "maxConnections": 6,
          "maxHeaderBytes": 16 << 10, "writeStallTimeoutMs": 300}
# How long /stream writes (five times the stall bound), and each of its chunks.
STREAM_S, CHUNK = 1.5, b"x" * (16 << 10)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the whole body, then answers 200: ``served``, or on ``/stream`` chunks for
    ``STREAM_S`` (a chatty listen stream's stand-in)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    if scope["path"] != "/stream":
        await send({"type": "http.response.body", "body": b"served"})
        return
    end = time.monotonic() + STREAM_S
    for _ in range(1_000_000):  # bounded in count too
        if time.monotonic() > end:
            break
        await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


def _serve(limits: dict[str, int]) -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app, port=port, limits=limits, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + BOUND
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield port
    server.should_exit = True
    thread.join(BOUND)


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    yield from _serve(LIMITS)


@pytest.fixture(scope="module")
def patient_port() -> Iterator[int]:
    # Headers may take a minute here: only the cap can close the flood within the bound.
    yield from _serve({**LIMITS, "headerReadTimeoutMs": 60_000})


def _exchange(port: int, data: bytes) -> bytes:
    """Sends `data`, then reads until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=BOUND) as s:
        if data:
            s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def _body(answer: bytes) -> Any:
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])


def test_core_defaults_come_through() -> None:
    assert DEFAULT_SERVE_LIMITS["headerReadTimeoutMs"] == 10_000
    assert DEFAULT_SERVE_LIMITS["maxConnections"] > 0


def test_a_half_sent_header_and_a_silent_connection_are_closed(port: int) -> None:
    assert _exchange(port, b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Ty") == b""
    assert _exchange(port, b"") == b""


def test_a_slow_body_gets_408(port: int) -> None:
    answer = _exchange(port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert _body(answer)["error"]["code"] == -32600


def test_a_header_section_over_the_limit_gets_431(port: int) -> None:
    answer = _exchange(port, b"POST / HTTP/1.1\r\nHost: x\r\nMcp-Name: " + b"x" * 200_000 + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431"), answer[:100]
    assert _body(answer)["error"]["code"] == -32600


def test_a_request_in_time_is_served(port: int) -> None:
    answer = _exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200") and b"served" in answer, answer


def test_at_the_cap_the_oldest_connection_that_had_no_request_makes_room(patient_port: int) -> None:
    flood = []
    for _ in range(6):
        s = socket.create_connection(("127.0.0.1", patient_port), timeout=BOUND)
        s.sendall(b"POST / HTTP/1.1\r\n")
        flood.append(s)
        time.sleep(0.02)  # arrival order is the shedding order
    try:
        answer = _exchange(patient_port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200"), answer
        try:
            assert flood[0].recv(1) == b"", "the oldest was closed"
        except ConnectionResetError:
            pass  # closed with a reset: shed connections are aborted
    finally:
        for s in flood:
            s.close()


def test_a_reader_that_stops_reading_is_closed_and_another_gets_the_whole_response(port: int) -> None:
    request = b"GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with socket.socket() as stalled:
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.settimeout(BOUND)
        stalled.connect(("127.0.0.1", port))
        stalled.sendall(request)
        assert stalled.recv(64).startswith(b"HTTP/1.1 200")  # then it reads nothing
        whole = _exchange(port, request)
        assert whole.endswith(b"0\r\n\r\n"), "the reader got the response to its end"
        # The stall began within the first of the stream's 1.5 s; its bound is 300 ms: the
        # connection is closed by now.
        held = []
        try:
            while chunk := stalled.recv(65536):
                held.append(chunk)
        except ConnectionResetError:
            pass
        got = b"".join(held)
        assert len(got) < len(whole), (len(got), len(whole))
        assert not got.endswith(b"0\r\n\r\n"), "it ended without the chunked body's end"
