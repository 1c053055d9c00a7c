"""The web view from Python: ``mcp_tasks.WebApp`` (ASGI) and ``TasksExtension.web_app`` serve
core's pages over a live server's store: reads closed until a sign-in, sessions that end on
sign-out and are ``Secure`` over HTTPS, the list and its filters, a task's history, the
security headers, a refused cross-site change, an operator's cancel applied by the server's
sweep, a refused rebound host, and read-only mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from mcp_tasks import TasksExtension, WebApp

SECRET = "0123456789abcdef-ana"


def client(app: WebApp, base: str = "http://127.0.0.1:8765") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)


SAME_SITE = {"sec-fetch-site": "same-origin"}


async def test_the_web_view_lists_shows_and_cancels_a_live_servers_tasks(tmp_path: Path) -> None:
    # durability=full: each write is in SQLite when it returns, so the view reads it at once.
    store = f"sqlite://{tmp_path / 'tasks.db'}?durability=full"
    tasks = TasksExtension(store)
    engine = tasks.engine
    done, ctx = await engine.create_task("alice", "report")
    await ctx.complete({"content": [{"type": "text", "text": "private"}]})
    running, work = await engine.create_task("bob", "watch")
    await work.set_status_message("watching")

    app = tasks.web_app(prefix="/tasks", tokens=f"ana:{SECRET}")
    async with client(app) as http:
        # Closed by default: a mount reads only with a token.
        closed = await http.get("/tasks/")
        assert closed.status_code == 401 and 'name="token"' in closed.text
        assert running["taskId"] not in closed.text and done["taskId"] not in closed.text
        signed = await http.post("/tasks/login", data={"token": SECRET}, headers=SAME_SITE)
        assert signed.status_code == 303, signed.text
        cookie = signed.headers["set-cookie"]
        assert SECRET not in cookie and "HttpOnly" in cookie and "Path=/tasks" in cookie
        assert "Secure" not in cookie, "plain HTTP"
        page = await http.get("/tasks/")
        assert page.status_code == 200
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert page.text.count('<tr data-id="') == 2
        assert f'data-id="{running["taskId"]}"' in page.text

        # Live updates: a page that saw another state of the store hears of it at once.
        assert 'data-url="/tasks/changes"' in page.text
        event = await http.get("/tasks/changes", headers={"last-event-id": "an-older-state"})
        assert event.headers["content-type"] == "text/event-stream"
        assert event.text.startswith("retry: 500\nid: ") and "\nevent: change\n" in event.text

        filtered = await http.get("/tasks/", params={"status": "completed"})
        assert filtered.text.count('<tr data-id="') == 1

        detail = await http.get(f"/tasks/tasks/{done['taskId']}")
        assert '<span class="event">created</span>' in detail.text
        assert "private" not in detail.text, "results are hidden by default"

        form = {"action": "cancel", "id": running["taskId"], "back": "/"}
        bearer = {"authorization": f"Bearer {SECRET}"}
        refused = await http.post("/tasks/actions", data=form, headers={**bearer, "sec-fetch-site": "cross-site"})
        assert refused.status_code == 403
        async with client(app) as stranger:  # no session cookie
            anonymous = await stranger.post("/tasks/actions", data=form, headers={"sec-fetch-site": "same-origin"})
        assert anonymous.status_code == 401

        # The server (this process) owns the file: the cancel is queued and applied by its sweep.
        sweeping = asyncio.get_running_loop().create_task(sweep(engine))
        try:
            cancelled = await http.post("/tasks/actions", data=form, headers=bearer)
        finally:
            sweeping.cancel()
        assert cancelled.status_code == 303, cancelled.text
        assert (await engine.get("bob", running["taskId"]))["status"] == "cancelled"
        history = await http.get(f"/tasks/tasks/{running['taskId']}")
        assert "by operator ana" in history.text

        # Signing out ends the session in the store: the same cookie reads nothing after.
        session = http.cookies.get("mcp_tasks_web")
        out = await http.post("/tasks/logout", headers=SAME_SITE)
        assert out.status_code == 303
        async with client(app) as replay:  # the ended session's cookie, sent again
            again = await replay.get("/tasks/", headers={"cookie": f"mcp_tasks_web={session}"})
        assert session and again.status_code == 401

    # Over HTTPS (ASGI's scheme) the session cookie is Secure.
    async with client(app, "https://127.0.0.1:8765") as http:
        signed = await http.post("/tasks/login", data={"token": SECRET}, headers=SAME_SITE)
        assert "; Secure" in signed.headers["set-cookie"]

    # Open reads answer this machine's names only: a rebound name reads nothing.
    open_app = WebApp(store, open_reads=True)
    async with client(open_app) as http:
        assert (await http.get("/")).status_code == 200
        rebound = await http.get("/", headers={"host": "evil.example:8765"})
        assert rebound.status_code == 403 and running["taskId"] not in rebound.text
    proxied = WebApp(store, open_reads=True, allowed_hosts=["tasks.example.com"])
    async with client(proxied, "http://tasks.example.com") as http:
        assert (await http.get("/")).status_code == 200

    read_only = WebApp(store, read_only=True, tokens=f"ana:{SECRET}")
    async with client(read_only) as http:
        page = await http.get("/", headers={"authorization": f"Bearer {SECRET}"})
        assert 'id="read-only"' in page.text and 'name="action"' not in page.text
        refused = await http.post("/actions", data={"action": "cancel", "id": done["taskId"]},
                                  headers={"authorization": f"Bearer {SECRET}"})
        assert refused.status_code == 403


async def sweep(engine: object) -> None:
    while True:
        await engine.sweep()  # type: ignore[attr-defined]
        await asyncio.sleep(0.05)
