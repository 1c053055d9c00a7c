// The web view from Node: `webHandler` (and `TasksServer.webHandler`) serve core's pages over a
// live TypeScript server's SQLite store through `node:http`: the list and a filter, a task's
// history, the security headers, refused changes, read-only mode.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { webHandler } from "../dist/server.js";
import { callDeclaring, nodeServer } from "./servers.mjs";

const SECRET = "0123456789abcdef-ana";

async function serve(handler) {
  const server = http.createServer(handler);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  return { base, close: () => new Promise((resolve) => server.close(resolve)) };
}

test("the web view lists, shows and guards a live TypeScript server's store", async () => {
  // durability=full: each write is in SQLite when it is acknowledged, so the view reads it at once.
  const store = `sqlite://${join(mkdtempSync(join(tmpdir(), "web-")), "tasks.db")}?durability=full`;
  const server = await nodeServer(store);
  try {
    const quick = (await callDeclaring(server.url, "tools/call", { name: "slow_compute", arguments: { seconds: 0 } }))
      .result.taskId;
    const slow = (await callDeclaring(server.url, "tools/call", { name: "slow_compute", arguments: { seconds: 60 } }))
      .result.taskId;
    assert.ok(quick && slow);
    // The quick one finishes at once; wait until the store says so.
    let page = "";
    for (let i = 0; i < 100 && !page.includes('data-status="completed"><span class="n">1</span>'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      const view = await serve(await webHandler(store, { prefix: "/tasks", tokens: `ana:${SECRET}` }));
      page = await (await fetch(`${view.base}/tasks/`)).text();
      await view.close();
    }
    const view = await serve(await webHandler(store, { prefix: "/tasks", tokens: `ana:${SECRET}` }));
    try {
      const list = await fetch(`${view.base}/tasks/`);
      assert.equal(list.status, 200);
      assert.match(list.headers.get("content-security-policy"), /^default-src 'none'.*frame-ancestors 'none'/);
      const html = await list.text();
      assert.equal(html.split('<tr data-id="').length - 1, 2);
      assert.ok(html.includes(`data-id="${slow}"`));
      // Live updates: a page that saw another state of the store hears of it at once.
      assert.ok(html.includes('data-url="/tasks/changes"'));
      const event = await fetch(`${view.base}/tasks/changes`, { headers: { "last-event-id": "an-older-state" } });
      assert.equal(event.headers.get("content-type"), "text/event-stream");
      assert.match(await event.text(), /^retry: 500\nid: \S+\nevent: change\n/);
      const working = await (await fetch(`${view.base}/tasks/?status=working`)).text();
      assert.equal(working.split('<tr data-id="').length - 1, 1);
      const detail = await (await fetch(`${view.base}/tasks/tasks/${quick}`)).text();
      assert.ok(detail.includes('<span class="event">created</span>') && detail.includes('<span class="event">result</span>'));

      const form = new URLSearchParams({ action: "cancel", id: slow });
      const anonymous = await fetch(`${view.base}/tasks/actions`, { method: "POST", body: form });
      assert.equal(anonymous.status, 401);
      const cross = await fetch(`${view.base}/tasks/actions`, {
        method: "POST",
        body: form,
        headers: { authorization: `Bearer ${SECRET}`, origin: "http://evil.example" },
      });
      assert.equal(cross.status, 403);
    } finally {
      await view.close();
    }

    const readOnly = await serve(await webHandler(store, { readOnly: true, tokens: `ana:${SECRET}` }));
    try {
      const html = await (await fetch(`${readOnly.base}/`, { headers: { authorization: `Bearer ${SECRET}` } })).text();
      assert.ok(html.includes('id="read-only"') && !html.includes('name="action"'));
    } finally {
      await readOnly.close();
    }
  } finally {
    server.stop();
  }
});
