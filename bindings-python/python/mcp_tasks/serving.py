"""Serving an mcp app over HTTP with core's bounds on connections, so slow or hostile clients
cannot hold the server down.

uvicorn alone has no header read timeout and no connection cap that sheds: connections that
each send half a header and stop are kept open until the process runs out of descriptors.
:func:`serve` (and :func:`uvicorn_config`) run uvicorn with an HTTP protocol of ours over its
own (:func:`protected_protocol`), with core's limits (``mcp_tasks._native.serve_limits()``, the
same as the Rust host's and the TypeScript server's):

- a connection owing a request header (a new one, or one whose next request has begun) is
  closed when the header has not arrived within ``headerReadTimeoutMs`` (10 s); one idle between
  requests after ``idleTimeoutMs`` (60 s, uvicorn's ``timeout_keep_alive``); a request being
  served (a ``subscriptions/listen`` stream) has no such deadline;
- a connection whose peer has taken none of the bytes waiting to be sent for
  ``writeStallTimeoutMs`` (30 s: a listen stream's reader that stopped reading, once the
  socket's buffers are full) is closed; the reader gets what was buffered, then the end in the
  middle of its response, and the other connections are written meanwhile as ever;
- a body that has not arrived within ``bodyReadTimeoutMs`` (30 s) of its header gets the table's
  408 and a header section over ``maxHeaderBytes`` (64 KiB) 431, each a JSON-RPC error, and bytes
  that are no HTTP/1.1 request (an obs-fold line among them, which h11 alone would accept) an
  empty 400, as from the other servers; each is sent before a lingering close (the client reads
  it instead of a reset);
- at most ``maxConnections`` are open (the descriptor limit less a reserve): at the cap the oldest
  connection that completed no request is closed to make room, so a legitimate request is served
  during a flood; uvicorn's own ``limit_concurrency`` would answer the new one 503 instead.

``python -m uvicorn`` or another ASGI server does not get these: put it behind a proxy that sets
them (nginx's ``client_header_timeout``, ``keepalive_timeout``, ``worker_connections``), or use
:func:`serve`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from . import _native

#: Core's default limits for this process (``headerReadTimeoutMs``, ``bodyReadTimeoutMs``,
#: ``idleTimeoutMs``, ``maxConnections``, ``maxHeaderBytes``, ``writeStallTimeoutMs``).
DEFAULT_SERVE_LIMITS: Mapping[str, int] = _native.serve_limits()

# How long a refused connection's remaining bytes are read and dropped before it closes.
_LINGER_S = 2.0

# A header line that starts with a space or a tab (what follows a line's end).
_LINE_STARTS_BLANK = re.compile(rb"\n[ \t]")


class _RecordingConnection(h11.Connection):
    """h11's connection, remembering why it refused the last bytes (h11's status hint: 431 for a
    header section over the limit) for the answer uvicorn would send as a plain 400."""

    refused: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as e:
            self.refused = e
            raise


def protected_protocol(limits: Mapping[str, int] | None = None) -> type[H11Protocol]:
    """A uvicorn HTTP protocol class with `limits` (core's defaults for what is left out); pass
    it as ``uvicorn.Config(http=...)`` with ``h11_max_incomplete_event_size`` at
    ``maxHeaderBytes`` and ``timeout_keep_alive`` at ``idleTimeoutMs`` (as :func:`uvicorn_config`
    does). Every connection of one class shares its cap."""
    merged = {**DEFAULT_SERVE_LIMITS, **(limits or {})}
    header_s = merged["headerReadTimeoutMs"] / 1000
    body_s = merged["bodyReadTimeoutMs"] / 1000
    stall_s = merged["writeStallTimeoutMs"] / 1000
    cap = max(1, int(merged["maxConnections"]))
    # Open connections, oldest first (a dict keeps insertion order).
    open_: dict[ProtectedH11Protocol, None] = {}

    class ProtectedH11Protocol(H11Protocol):
        """uvicorn's h11 protocol with core's header and body timeouts, its answers to refused
        requests, and a connection cap that sheds the oldest connection owing a request."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            size = self.conn._max_incomplete_event_size  # type: ignore[attr-defined]
            self.conn = _RecordingConnection(h11.SERVER, size)
            self._requested = False
            self._lingering = False
            self._header_timer: asyncio.TimerHandle | None = None
            self._body_timer: asyncio.TimerHandle | None = None
            self._stall_timer: asyncio.TimerHandle | None = None
            # The transport's unsent bytes when the stall was last looked at.
            self._unsent = 0
            # The last byte of the header arriving, for a fold split between two reads.
            self._head_tail = b""

        # -- the cap ---------------------------------------------------------------------------

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(open_) >= cap and not _shed_one():
                transport.abort()  # every connection is serving a request
                return
            open_[self] = None
            self._start_header_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            open_.pop(self, None)
            self._cancel_timers()
            super().connection_lost(exc)

        def _busy(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        # -- timeouts --------------------------------------------------------------------------

        def _start_header_timer(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(header_s, self._header_late)

        def _cancel_timers(self) -> None:
            for timer in (self._header_timer, self._body_timer, self._stall_timer):
                if timer is not None:
                    timer.cancel()
            self._header_timer = self._body_timer = self._stall_timer = None

        # -- a peer that stopped reading ---------------------------------------------------------

        def pause_writing(self) -> None:
            # The transport holds more than its high-water mark: the socket's buffers are full.
            # uvicorn's app waits for the drain meanwhile, so the unsent bytes only fall, and
            # only when the peer reads.
            super().pause_writing()
            if self._stall_timer is None:
                self._unsent = self.transport.get_write_buffer_size()
                self._stall_timer = self.loop.call_later(stall_s, self._stall_late)

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._stall_timer is not None:
                self._stall_timer.cancel()
                self._stall_timer = None

        def _stall_late(self) -> None:
            self._stall_timer = None
            if self.transport.is_closing():
                return
            unsent = self.transport.get_write_buffer_size()
            if unsent < self._unsent:  # the peer read some: a slow reader, not a stopped one
                self._unsent = unsent
                self._stall_timer = self.loop.call_later(stall_s, self._stall_late)
                return
            self.transport.abort()  # what the kernel holds still reaches the peer, then the end

        def _header_late(self) -> None:
            self._header_timer = None
            if not self._busy() and not self.transport.is_closing():
                self.transport.close()  # a header that did not arrive: nothing to answer

        def _body_late(self) -> None:
            self._body_timer = None
            cycle = self.cycle
            if cycle is None or cycle.response_complete or self.transport.is_closing():
                return
            # The app waiting for the body hears the client went away; the client hears 408.
            cycle.disconnected = True
            cycle.message_event.set()
            if not cycle.response_started:
                self._refuse("body_timeout")
            else:
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            if self._lingering:
                return  # read and dropped until the linger ends
            if not self._busy():
                self._start_header_timer()  # the first bytes of a request: its header is owed
                if self._folded(data):
                    self._refuse("malformed")
                    return
            super().data_received(data)
            if self._busy():
                self._head_tail = b""
                self._requested = True
                if self._header_timer is not None:
                    self._header_timer.cancel()
                    self._header_timer = None
                if self.conn.their_state is h11.SEND_BODY:
                    if self._body_timer is None:
                        self._body_timer = self.loop.call_later(body_s, self._body_late)
                elif self._body_timer is not None:
                    self._body_timer.cancel()
                    self._body_timer = None

        def _folded(self, data: bytes) -> bool:
            """Whether the header arriving has a line that starts with a space or a tab (an
            obs-fold line, or whitespace before the first field): h11 unfolds it, but RFC 9112
            §5.2 lets a server refuse it, and the Rust host (hyper) and the TypeScript server
            (llhttp) do, so the three answer such bytes alike."""
            seen = self._head_tail + data
            end = seen.find(b"\r\n\r\n")
            if _LINE_STARTS_BLANK.search(seen if end < 0 else seen[: end + 2]):
                return True
            self._head_tail = seen[-1:]
            return False

        # -- answers to what h11 refuses -------------------------------------------------------

        def send_400_response(self, msg: str) -> None:
            refused = self.conn.refused
            self._refuse("headers_too_large" if refused is not None and refused.error_status_hint == 431 else "malformed")

        def _refuse(self, kind: str) -> None:
            # Core writes the whole response (an empty 400 for bytes that are no HTTP request).
            self.transport.write(_native.refusal_response(kind, merged))
            self._cancel_timers()
            self._lingering = True
            try:
                self.transport.write_eof()
            except (OSError, RuntimeError, NotImplementedError):
                pass
            self.loop.call_later(_LINGER_S, self.transport.close)

    def _shed_one() -> bool:
        idle: ProtectedH11Protocol | None = None
        for conn in open_:
            if not conn._requested and not conn._busy():
                open_.pop(conn)
                conn.transport.abort()
                return True
            if idle is None and not conn._busy():
                idle = conn
        if idle is not None:
            open_.pop(idle)
            idle.transport.abort()
            return True
        return False

    return ProtectedH11Protocol


def uvicorn_config(app: Any, host: str = "127.0.0.1", port: int = 8000, *, limits: Mapping[str, int] | None = None,
                   **options: Any) -> uvicorn.Config:
    """A ``uvicorn.Config`` serving `app` with core's bounds (`limits` overrides some); `options`
    go to uvicorn as they are (``log_level``, ``ssl_keyfile``, ...)."""
    merged = {**DEFAULT_SERVE_LIMITS, **(limits or {})}
    # asyncio accepts up to a backlog of connections before any of them runs, so it stays well
    # under the descriptors the cap leaves free.
    reserve = max(64, merged["maxConnections"] // 15)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protected_protocol(merged),
        h11_max_incomplete_event_size=merged["maxHeaderBytes"],
        timeout_keep_alive=max(1, round(merged["idleTimeoutMs"] / 1000)),
        backlog=min(2048, max(64, reserve // 2)),
        **options,
    )


def serve(app: Any, host: str = "127.0.0.1", port: int = 8000, *, limits: Mapping[str, int] | None = None,
          **options: Any) -> None:
    """Serves `app` (``MCPServer.streamable_http_app(...)``) on `host`:`port` with core's bounds
    on connections until interrupted; `options` go to uvicorn."""
    uvicorn.Server(uvicorn_config(app, host, port, limits=limits, **options)).run()


__all__ = ["DEFAULT_SERVE_LIMITS", "protected_protocol", "serve", "uvicorn_config"]
