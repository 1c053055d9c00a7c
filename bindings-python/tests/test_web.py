"""The web view from Python: ``mcp_tasks.WebApp`` (ASGI) and ``TasksExtension.web_app`` serve
core's pages over a live server's store: the list and its filters, a task's history, the
security headers, a refused cross-site change, an operator's cancel applied by the server's
sweep, and read-only mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from mcp_tasks import TasksExtension, WebApp

SECRET = "0123456789abcdef-ana"


def client(app: WebApp) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8765")


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
        anonymous = await http.post("/tasks/actions", data=form, headers={"sec-fetch-site": "same-origin"})
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
