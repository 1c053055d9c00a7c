// mcp-tasks web view: progressive behaviour only; every page works without this script.
"use strict";

// Keeps the page in step with the store: `{prefix}/changes` answers one Server-Sent Event when
// the store changed since the page's id (the browser asks again with Last-Event-ID), and the page
// then reads itself again and swaps its <main>. Polls every 5 s where EventSource is missing or
// refused; a switch pauses either.
function follow(box) {
  const url = box.dataset.url;
  const state = document.getElementById("live-state");
  const toggle = document.getElementById("live-toggle");
  let since = box.dataset.since;
  let source = null;
  let timer = null;
  let busy = false;
  let again = false;
  let stopped = false;
  box.hidden = false;

  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const response = await fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (response.ok) swap(await response.text());
    } catch (_) {
      // A failed read is tried again at the next change or poll.
    } finally {
      busy = false;
      if (again) { again = false; refresh(); }
    }
  }

  function swap(html) {
    const next = new DOMParser().parseFromString(html, "text/html");
    const fresh = next.querySelector("main");
    const main = document.querySelector("main");
    if (!fresh || !main) return;
    // What the operator is doing survives: ticked rows, opened payloads, the filter form being edited.
    const ticked = new Set(Array.from(main.querySelectorAll('input[name="id"]:checked'), (b) => b.value));
    const opened = new Set(Array.from(main.querySelectorAll("details[open]"), (d) => d.className));
    const editing = main.querySelector("#filters");
    for (const b of fresh.querySelectorAll('input[name="id"]')) if (ticked.has(b.value)) b.checked = true;
    for (const d of fresh.querySelectorAll("details")) if (opened.has(d.className)) d.open = true;
    const freshFilters = fresh.querySelector("#filters");
    if (editing && freshFilters) freshFilters.replaceWith(editing);
    main.replaceWith(document.adoptNode(fresh));
    document.title = next.title;
    wire(fresh);
    // A page with nothing left to follow (a task that ended) stops.
    if (!next.getElementById("live")) stop("ended");
  }

  function start() {
    stopped = false;
    toggle.textContent = "Pause";
    if (!window.EventSource) return poll();
    state.textContent = "live";
    source = new EventSource(url + "?since=" + encodeURIComponent(since));
    source.addEventListener("change", (event) => {
      since = event.lastEventId || since;
      refresh();
    });
    source.addEventListener("error", () => {
      // CLOSED: the server refused the stream (not just the end of one answer): poll instead.
      if (source && source.readyState === EventSource.CLOSED) { source = null; poll(); }
    });
  }

  function poll() {
    state.textContent = "polling";
    timer = window.setInterval(refresh, 5000);
  }

  function stop(why) {
    stopped = true;
    if (source) { source.close(); source = null; }
    if (timer) { window.clearInterval(timer); timer = null; }
    state.textContent = why;
    toggle.textContent = "Resume";
    if (why === "ended") toggle.hidden = true;
  }

  toggle.addEventListener("click", () => {
    if (stopped) { refresh(); start(); } else stop("paused");
  });
  start();
}

// Times: the server writes them in UTC (saying so); the operator may ask for this browser's zone,
// remembered in localStorage. Each <time> keeps its instant in `datetime`.
const ZONE_KEY = "mcp-tasks-web-zone";

function localZone() {
  try { return window.localStorage.getItem(ZONE_KEY) === "local"; } catch (_) { return false; }
}

function two(n) { return String(n).padStart(2, "0"); }

function showTimes(root) {
  const local = localZone();
  for (const time of root.querySelectorAll("time[datetime]")) {
    if (!time.dataset.utc) time.dataset.utc = time.textContent;
    if (!local) { time.textContent = time.dataset.utc; continue; }
    const at = new Date(time.getAttribute("datetime"));
    if (Number.isNaN(at.getTime())) continue;
    const zone = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" })
      .formatToParts(at).find((part) => part.type === "timeZoneName");
    time.textContent = `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())} ` +
      `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())} ${zone ? zone.value : "local"}`;
  }
  const button = document.getElementById("zone");
  if (button) button.textContent = local ? "Times: this browser's zone" : "Times: UTC";
}

// Behaviour of the parts inside <main>, wired again after a live swap.
function wire(root) {
  showTimes(root);
  // "Select all" selects every task of this page that an action can change.
  for (const all of root.querySelectorAll("input.select-all")) {
    all.addEventListener("change", () => {
      for (const box of root.querySelectorAll('#tasks tbody input[name="id"]')) box.checked = all.checked;
    });
  }
  // Buttons that change tasks ask first.
  for (const button of root.querySelectorAll("button[data-confirm]")) {
    button.addEventListener("click", (event) => {
      if (!window.confirm(button.dataset.confirm)) event.preventDefault();
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const zone = document.getElementById("zone");
  if (zone) {
    zone.hidden = false;
    zone.addEventListener("click", () => {
      try { window.localStorage.setItem(ZONE_KEY, localZone() ? "utc" : "local"); } catch (_) { /* kept for this page only */ }
      showTimes(document);
    });
  }
  wire(document);
  const live = document.getElementById("live");
  if (live) follow(live);
});
