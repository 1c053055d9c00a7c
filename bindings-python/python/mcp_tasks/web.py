"""The operator's web view as an ASGI app: every page is rendered by core (the same bytes as
``mcp-tasks web`` and the other servers' mounts); this module only carries ASGI's request to it
and its answer back. See docs/operating.md, "The web view".

    app = WebApp("sqlite:///var/lib/app/tasks.db", prefix="/tasks", token_file="ops.tokens")
    # Starlette: Mount("/tasks", app=app)  — the app reads the full path, prefix included.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from . import _native

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

# Forms and logins are small; a larger body is refused before it is read whole.
MAX_BODY = 64 * 1024


class WebApp:
    """An ASGI app serving the web view of the store at ``store`` (a ``sqlite://`` or
    ``postgres://`` URL). ``token_file`` (or ``tokens``, its text) lists who may act:
    ``NAME:SECRET`` or ``NAME:SECRET:PRINCIPAL,...`` a line. Without tokens nothing can be
    changed; with ``open_reads=False`` reading needs a token too. Payloads are hidden unless
    ``show_payloads``."""

    def __init__(
        self,
        store: str,
        *,
        prefix: str = "",
        token_file: str | Path | None = None,
        tokens: str | None = None,
        read_only: bool = False,
        open_reads: bool = True,
        show_payloads: bool = False,
    ) -> None:
        if token_file is not None and tokens is not None:
            raise ValueError("pass token_file or tokens, not both")
        if token_file is not None:
            tokens = Path(token_file).read_text()
        self._prefix = prefix.rstrip("/")
        self._tokens = tokens
        self._read_only = read_only
        self._open_reads = open_reads
        self._show_payloads = show_payloads
        self._store = store
        self._view: _native.WebView | None = None

    async def view(self) -> _native.WebView:
        """The native view, opened at the first request."""
        if self._view is None:
            self._view = await _native.WebView.open(
                self._store,
                prefix=self._prefix,
                tokens=self._tokens,
                read_only=self._read_only,
                open_reads=self._open_reads,
                show_payloads=self._show_payloads,
            )
        return self._view

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await self.view()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > MAX_BODY:
                await _answer(send, 413, [(b"content-type", b"text/plain")], b"request body too large")
                return
            if not message.get("more_body"):
                break
        # The whole path as the client sent it (a mount's prefix included), and its query.
        path = scope.get("raw_path") or scope["path"].encode()
        target = path.decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        headers = [(bytes(name), bytes(value)) for name, value in scope.get("headers", [])]
        view = await self.view()
        status, answer_headers, answer = await view.handle(scope["method"], target, headers, body)
        await _answer(send, status, answer_headers, answer)


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
