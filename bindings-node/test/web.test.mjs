// The web view from Node: `webHandler` (and `TasksServer.webHandler`) serve core's pages over a
// live TypeScript server's SQLite store through `node:http`: reads closed until a sign-in, a
// session that ends on sign-out, the list and a filter, a task's history, the security headers,
// refused changes, a refused rebound host, read-only mode.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import https from "node:https";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { webHandler } from "../dist/server.js";
import { callDeclaring, nodeServer } from "./servers.mjs";

const SECRET = "0123456789abcdef-ana";
const bearer = { authorization: `Bearer ${SECRET}` };

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
      page = await (await fetch(`${view.base}/tasks/`, { headers: bearer })).text();
      await view.close();
    }
    const view = await serve(await webHandler(store, { prefix: "/tasks", tokens: `ana:${SECRET}` }));
    try {
      // Closed by default: a mount reads only with a token.
      const closed = await fetch(`${view.base}/tasks/`);
      assert.equal(closed.status, 401);
      const closedHtml = await closed.text();
      assert.ok(closedHtml.includes('name="token"') && !closedHtml.includes(slow));
      // A sign-in gives a session (not the secret) in the cookie; signing out ends it.
      const signed = await fetch(`${view.base}/tasks/login`, {
        method: "POST",
        body: new URLSearchParams({ token: SECRET }),
        headers: { "sec-fetch-site": "same-origin" },
        redirect: "manual",
      });
      assert.equal(signed.status, 303);
      const setCookie = signed.headers.get("set-cookie");
      assert.ok(setCookie.includes("HttpOnly") && !setCookie.includes(SECRET) && !setCookie.includes("Secure"));
      const cookie = { cookie: setCookie.split(";")[0] };
      assert.equal((await fetch(`${view.base}/tasks/`, { headers: cookie })).status, 200);
      const out = await fetch(`${view.base}/tasks/logout`, {
        method: "POST",
        headers: { ...cookie, "sec-fetch-site": "same-origin" },
        redirect: "manual",
      });
      assert.equal(out.status, 303);
      assert.equal((await fetch(`${view.base}/tasks/`, { headers: cookie })).status, 401);

      const list = await fetch(`${view.base}/tasks/`, { headers: bearer });
      assert.equal(list.status, 200);
      assert.match(list.headers.get("content-security-policy"), /^default-src 'none'.*frame-ancestors 'none'/);
      const html = await list.text();
      assert.equal(html.split('<tr data-id="').length - 1, 2);
      assert.ok(html.includes(`data-id="${slow}"`));
      // Live updates: a page that saw another state of the store hears of it at once.
      assert.ok(html.includes('data-url="/tasks/changes"'));
      const event = await fetch(`${view.base}/tasks/changes`, {
        headers: { ...bearer, "last-event-id": "an-older-state" },
      });
      assert.equal(event.headers.get("content-type"), "text/event-stream");
      assert.match(await event.text(), /^retry: 500\nid: \S+\nevent: change\n/);
      const working = await (await fetch(`${view.base}/tasks/?status=working`, { headers: bearer })).text();
      assert.equal(working.split('<tr data-id="').length - 1, 1);
      const detail = await (await fetch(`${view.base}/tasks/tasks/${quick}`, { headers: bearer })).text();
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

    // Open reads answer this machine's names only: a rebound name reads nothing.
    const open = await serve(await webHandler(store, { openReads: true }));
    try {
      assert.equal((await fetch(`${open.base}/`)).status, 200);
      const rebound = await new Promise((resolve, reject) => {
        const port = new URL(open.base).port;
        http
          .get({ host: "127.0.0.1", port, path: "/", headers: { host: `evil.example:${port}` } }, (res) => {
            let text = "";
            res.on("data", (chunk) => (text += chunk));
            res.on("end", () => resolve({ status: res.statusCode, text }));
          })
          .on("error", reject);
      });
      assert.equal(rebound.status, 403);
      assert.ok(!rebound.text.includes(slow));
    } finally {
      await open.close();
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

test("over node:https the sign-in cookie is Secure", async () => {
  const dir = mkdtempSync(join(tmpdir(), "web-tls-"));
  // A throwaway self-signed certificate for 127.0.0.1 (openssl is on every machine the suite runs on).
  execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
    "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")], { stdio: "ignore" });
  const store = `sqlite://${join(dir, "tasks.db")}?durability=full`;
  const server = await nodeServer(store);
  try {
    const handler = await webHandler(store, { tokens: `ana:${SECRET}` });
    const tls = https.createServer({ key: readFileSync(join(dir, "key.pem")), cert: readFileSync(join(dir, "cert.pem")) }, handler);
    await new Promise((resolve) => tls.listen(0, "127.0.0.1", resolve));
    try {
      const body = new URLSearchParams({ token: SECRET }).toString();
      const answer = await new Promise((resolve, reject) => {
        const req = https.request(
          {
            host: "127.0.0.1",
            port: tls.address().port,
            path: "/login",
            method: "POST",
            rejectUnauthorized: false,
            headers: { "content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "same-origin" },
          },
          (res) => {
            res.resume();
            res.on("end", () => resolve({ status: res.statusCode, cookie: res.headers["set-cookie"]?.[0] ?? "" }));
          },
        );
        req.on("error", reject);
        req.end(body);
      });
      assert.equal(answer.status, 303);
      assert.match(answer.cookie, /; Secure$/);
    } finally {
      await new Promise((resolve) => tls.close(resolve));
    }
  } finally {
    server.stop();
  }
});
