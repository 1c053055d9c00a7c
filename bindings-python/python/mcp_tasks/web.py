"""The operator's web view as an ASGI app: every page is rendered by core (the same bytes as
``mcp-tasks web`` and the other servers' mounts); this module only carries ASGI's request to it
and its answer back. See docs/operating.md, "The web view".

    app = WebApp("sqlite:///var/lib/app/tasks.db", prefix="/tasks", token_file="ops.tokens")
    # Starlette: Mount("/tasks", app=app)  — the app reads the full path, prefix included.

Reads are closed: every page asks for a token unless ``open_reads=True``, and a view with open
reads answers only requests sent to this machine's names (and ``allowed_hosts``).
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
    ``postgres://`` URL). ``token_file`` (or ``tokens``, its text) lists who may read and act:
    ``NAME:SECRET`` or ``NAME:SECRET:PRINCIPAL,...`` a line. Reading needs a token unless
    ``open_reads`` (then only requests sent to this machine's names, or to ``allowed_hosts``
    such as ``"tasks.example.com"``, are answered). A sign-in lasts ``session_ttl`` seconds
    (core's default: 8 hours); its cookie is ``Secure`` over HTTPS (ASGI's scheme, or
    ``forwarded_proto_header`` set by a trusted proxy). Payloads are hidden unless
    ``show_payloads``. ``trace_url`` (an http(s) URL with ``{trace_id}``, such as
    ``"http://jaeger:16686/trace/{trace_id}"``) links a task's trace id on its page."""

    def __init__(
        self,
        store: str,
        *,
        prefix: str = "",
        token_file: str | Path | None = None,
        tokens: str | None = None,
        read_only: bool = False,
        open_reads: bool | None = None,
        show_payloads: bool = False,
        allowed_hosts: list[str] | None = None,
        forwarded_proto_header: str | None = None,
        session_ttl: float | None = None,
        trace_url: str | None = None,
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
        self._allowed_hosts = list(allowed_hosts) if allowed_hosts is not None else None
        self._forwarded_proto_header = forwarded_proto_header
        self._session_ttl = session_ttl
        self._trace_url = trace_url
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
                allowed_hosts=self._allowed_hosts,
                forwarded_proto_header=self._forwarded_proto_header,
                session_ttl_s=self._session_ttl,
                trace_url=self._trace_url,
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
        https = scope.get("scheme") == "https"
        status, answer_headers, answer = await view.handle(scope["method"], target, headers, body, https)
        await _answer(send, status, answer_headers, answer)


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
