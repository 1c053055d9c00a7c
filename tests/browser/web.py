#!/usr/bin/env python3
"""The operator's web view in a real browser (headless Chromium over WebDriver).

Against `mcp-tasks web` on a live store (tests/fixtures/src/bin/web-store.rs: tasks in every state
under tool `fixed`, and `churn` tasks created and finished every 200 ms), it checks that:
- the list loads with the store's counts (compared with `mcp-tasks stats` while the churn pauses);
- a filter narrows the list, is in the URL, and survives a reload;
- a `working` task turns `completed` on screen without a reload, on the list and on its page;
- an operator signs in and cancels a task through its page: it ends `cancelled` in the store (with
  the operator in its history) and on screen;
- a form posted from another site is refused and changes nothing;
- a read-only view shows no action;
- DNS rebinding reads nothing: Chromium resolves evil.example to 127.0.0.1 (--host-resolver-rules),
  and the view refuses a page sent to that name, the sign-in form included;
- two `mcp-tasks web` workers on one store behind a round-robin balancer: an open page stays still
  while nothing changes (no reload loop), and still shows a completion without a reload;
- an operator cancels 300 working tasks with "every task matching": one request, every one
  cancelled in the store, the page listing an outcome each;
- signing out ends the session in the store: the cookie the browser held acts on nothing after;
- the list's chart draws four series of sixty minutes with the store's completions in them, and the
  time switch shows times in the browser's zone (Asia/Tokyo, set over CDP) and back in UTC;
- the console shows no Content-Security-Policy violation (nor any other error).
On failure it saves a screenshot into target/browser/. `--screenshots DIR` also writes the list and
a task's page there (the operating guide's pictures). `--churn N --measure K` runs the store at N churn tasks a
second (three changes each) and times K completions from the store to the screen (docs/BENCHMARKS.md).

Run it through tests/browser/run (Debian's chromium, chromium-driver and python3-selenium).
"""

import argparse
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "target"
SECRET = "browser-test-secret-0123456789"
# Bounds: every wait below ends.
WAIT_S = 15


def free_port():
    """A free loopback port below the ephemeral range."""
    for port in range(21000, 32000, 7):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port below 32000")


def wait_until_serving(url, process):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {WAIT_S} s")


class Store:
    """The web-store fixture: a live host process on a SQLite file."""

    def __init__(self, binary, directory, churn_per_s):
        self.process = subprocess.Popen([binary, directory, "--churn-per-s", str(churn_per_s)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        first = json.loads(self.process.stdout.readline())
        self.url = first["store"]
        self.ids = first["ids"]

    def say(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def stop(self):
        if self.process.poll() is None:
            try:
                self.say("quit")
                self.process.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


def cli(*args):
    return subprocess.run([str(TARGET / "debug" / "mcp-tasks"), *args], check=True, capture_output=True, text=True).stdout


class Balancer:
    """A round-robin HTTP balancer on loopback: each request goes to the next worker, as behind a
    load balancer. Counts the requests per path."""

    def __init__(self, workers):
        import http.client
        self.hits = {}
        turn = iter(range(1 << 62))
        lock = threading.Lock()
        balancer = self

        class Forward(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def forward(self):
                with lock:
                    worker = workers[next(turn) % len(workers)]
                    path = self.path.split("?")[0]
                    balancer.hits[path] = balancer.hits.get(path, 0) + 1
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                connection = http.client.HTTPConnection("127.0.0.1", worker, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "content-length")}
                connection.request(self.command, self.path, body=body, headers=headers)
                answer = connection.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                connection.close()

            do_GET = do_POST = forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Forward)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self):
        self.server.shutdown()


class Checks:
    def __init__(self, driver, base, read_only_base, evil_base, store, shots, port=None, balancer=None):
        self.driver = driver
        self.base = base
        self.read_only_base = read_only_base
        self.evil_base = evil_base
        self.store = store
        self.shots = shots
        self.port = port
        self.balancer = balancer
        self.console = []

    def collect_console(self):
        self.console.extend(self.driver.get_log("browser"))

    def go(self, url):
        self.collect_console()
        self.driver.get(url)

    def click(self, by, selector):
        """Clicks, finding the element again if a live swap replaced it."""
        for attempt in range(5):
            try:
                self.driver.find_element(by, selector).click()
                return
            except StaleElementReferenceException:
                if attempt == 4:
                    raise

    def wait(self, condition, what):
        try:
            return WebDriverWait(self.driver, WAIT_S, poll_frequency=0.05).until(lambda d: condition())
        except Exception as e:
            raise AssertionError(f"waited {WAIT_S} s for {what}") from e

    # Read in one script: the live page swaps its <main> under element references.
    def rows(self):
        return self.driver.execute_script(
            "return Object.fromEntries(Array.from(document.querySelectorAll('#tasks tbody tr[data-id]'),"
            " (r) => [r.dataset.id, r.dataset.status]))"
        )

    def counts(self):
        return self.driver.execute_script(
            "return Object.fromEntries(Array.from(document.querySelectorAll('#counts a.count'),"
            " (a) => [a.dataset.status, Number(a.querySelector('.n').textContent)]))"
        )

    def text(self, selector):
        return self.driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent.trim() : null", selector
        )

    def texts(self, selector):
        return self.driver.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0]), (e) => e.textContent.trim())", selector
        )

    def store_status(self, task_id):
        return json.loads(cli("show", task_id, "--store", self.store.url))

    def counts_match_the_store(self):
        assert self.store.say("pause") == "paused"
        try:
            stats = json.loads(cli("stats", "--json", "--store", self.store.url))
            expected = {s: 0 for s in ("working", "input_required", "completed", "failed", "cancelled")}
            for row in stats:
                expected[row["status"]] += row["count"]
            # The view shows counts up to a second old, refreshed behind the page that finds them
            # older: the page after that shows the store's.
            shown = {}

            def counted():
                nonlocal shown
                self.go(self.base + "/")
                shown = self.counts()
                shown.pop("expiring", None)
                return shown == expected or time.sleep(0.5)

            try:
                self.wait(counted, "the store's counts")
            except AssertionError:
                raise AssertionError(f"page {shown} != store {expected}") from None
            assert expected["working"] == 3 and expected["cancelled"] == 1, expected
        finally:
            assert self.store.say("resume") == "resumed"
        print(f"ok: the list shows the store's counts {shown}")

    def a_filter_narrows_and_survives_a_reload(self):
        self.go(self.base + "/")
        form = self.driver.find_element(By.ID, "filters")
        form.find_element(By.CSS_SELECTOR, 'input[name="status"][value="working"]').click()
        tool = form.find_element(By.NAME, "tool")
        tool.clear()
        tool.send_keys("fixed")
        form.find_element(By.CSS_SELECTOR, 'button[type="submit"]').click()
        self.wait(lambda: "tool=fixed" in self.driver.current_url, "the filter in the URL")
        assert "status=working" in self.driver.current_url, self.driver.current_url
        expected = set(self.store.ids["working"])
        assert set(self.rows()) == expected, self.rows()
        self.driver.refresh()
        assert set(self.rows()) == expected, "after a reload"
        assert self.driver.find_element(By.CSS_SELECTOR, 'input[name="status"][value="working"]').is_selected()
        assert self.driver.find_element(By.NAME, "tool").get_attribute("value") == "fixed"
        print(f"ok: a filter narrows the list to {len(expected)} tasks and survives a reload")

    def a_working_task_completes_on_screen(self):
        task = self.store.ids["working"][0]
        self.go(self.base + "/?tool=fixed")
        self.wait(lambda: self.text("#live-state") == "live", "the live switch")
        assert self.rows()[task] == "working"
        # A reload would drop this mark.
        self.driver.execute_script("window.__notReloaded = true")
        started = time.monotonic()
        assert self.store.say(f"finish {task}") == "finished"
        self.wait(lambda: self.rows().get(task) == "completed", "the task completed on the list")
        took = time.monotonic() - started
        assert self.driver.execute_script("return window.__notReloaded === true"), "the page reloaded"
        print(f"ok: a working task turned completed on the list without a reload ({took:.2f} s)")

        task = self.store.ids["working"][2]
        self.go(f"{self.base}/tasks/{task}")
        self.driver.execute_script("window.__notReloaded = true")
        assert self.store.say(f"finish {task}") == "finished"
        self.wait(lambda: self.text("#status") == "completed", "completed on its page")
        assert self.driver.execute_script("return window.__notReloaded === true"), "the page reloaded"
        events = self.texts("#timeline .event")
        assert events[-2:] == ["result", "status"], events
        self.wait(lambda: self.text("#live-state") == "ended", "the page to stop following")
        print("ok: a task's page turned completed, its timeline grew, and it stopped following")

    def an_operator_cancels_through_the_page(self):
        task = self.store.ids["working"][1]
        self.go(self.base + "/login")
        self.driver.find_element(By.NAME, "token").send_keys(SECRET)
        self.driver.find_element(By.CSS_SELECTOR, 'form button[type="submit"]').click()
        self.wait(lambda: "signed in as" in (self.text("header") or ""), "the sign-in")
        self.go(f"{self.base}/tasks/{task}")
        self.click(By.ID, "cancel")
        alert = self.wait(lambda: self.driver.switch_to.alert, "the confirmation")
        alert.accept()
        self.wait(lambda: self.text("#status") == "cancelled", "cancelled on screen")
        stored = self.store_status(task)
        assert stored["status"] == "cancelled", stored
        by = [e for e in stored["history"] if e["event"] == "cancel_requested"]
        assert by and by[0]["by"] == {"operator": "ana"}, stored["history"]
        detail = self.texts("#timeline .detail")
        assert "by operator ana" in detail, detail
        print("ok: an operator cancelled a task through its page; the store and its history say so")

    def a_cross_site_post_is_refused(self):
        task = self.store.ids["input_required"][0]
        self.go(f"{self.evil_base}/evil.html?target={task}")
        self.wait(lambda: self.driver.current_url.startswith(self.base), "the cross-site post to land")
        text = self.text("main")
        assert "another site" in text or "Sign in" in text, text
        assert self.store_status(task)["status"] == "input_required", "the post changed nothing"
        print(f"ok: a form posted from another site was refused ({text.strip()!r})")

    def read_only_shows_no_action(self):
        task = self.store.ids["input_required"][0]
        for url in (self.read_only_base + "/", f"{self.read_only_base}/tasks/{task}"):
            self.go(url)
            assert self.driver.find_elements(By.ID, "read-only"), "the read-only badge"
            forms = self.driver.find_elements(By.CSS_SELECTOR, 'form[action$="/actions"], #cancel, input[name="action"]')
            assert not forms, f"{url}: {len(forms)} action elements"
        print("ok: the read-only view shows no action")

    def rebinding_reads_nothing(self):
        every = [i for ids in self.store.ids.values() for i in ids]
        for path in ("/", "/login", f"/tasks/{self.store.ids['working'][0]}"):
            self.go(f"http://evil.example:{self.port}{path}")
            text = self.text("main") or ""
            assert "answers only this machine" in text, text
            source = self.driver.page_source
            assert not any(i in source for i in every), f"{path}: a task id on the rebound page"
        print("ok: a page sent to a rebound name (evil.example -> 127.0.0.1) was refused, sign-in form included")

    def two_workers_keep_a_page_still(self):
        assert self.store.say("pause") == "paused"
        try:
            task = self.store.say("spawn")
            self.go(self.balancer.base + "/?tool=fixed")
            self.wait(lambda: self.text("#live-state") == "live", "the live switch behind the balancer")
            self.wait(lambda: self.rows().get(task) == "working", "the spawned task")
            self.driver.execute_script("window.__notReloaded = true")
            before = self.balancer.hits.get("/", 0)
            time.sleep(4)
            reads = self.balancer.hits.get("/", 0) - before
            changes = self.balancer.hits.get("/changes", 0)
            assert reads == 0, f"the page read itself {reads} times in 4 s while nothing changed"
            assert changes >= 1, "the page follows the store through the balancer"
            started = time.monotonic()
            assert self.store.say(f"finish {task}") == "finished"
            self.wait(lambda: self.rows().get(task) == "completed", "the completion through either worker")
            took = time.monotonic() - started
            assert self.driver.execute_script("return window.__notReloaded === true"), "the page reloaded"
        finally:
            assert self.store.say("resume") == "resumed"
        print(f"ok: two workers behind a balancer: no read in 4 s of calm, a completion on screen in {took:.2f} s")

    def a_bulk_cancel_takes_every_task_matching(self):
        assert self.store.say("bulk 300") == "created 300"
        self.go(self.base + "/?tool=bulk&status=working")
        self.click(By.ID, "cancel-matching")
        self.wait(lambda: self.text("#confirm-count") is not None, "the confirmation page")
        assert "300" in self.text("#confirm-count"), self.text("#confirm-count")
        started = time.monotonic()
        self.click(By.ID, "confirm")
        self.wait(lambda: self.text("#summary") is not None, "the outcome page")
        took = time.monotonic() - started
        summary = self.text("#summary")
        assert summary == "cancelled 300 of 300 tasks", summary
        outcomes = self.driver.execute_script(
            "return Array.from(document.querySelectorAll('#outcomes li'), (li) => li.dataset.outcome)")
        assert outcomes == ["cancelled"] * 300, outcomes[:5]
        stats = json.loads(cli("stats", "--json", "--store", self.store.url))
        bulk = {row["status"]: row["count"] for row in stats if row["tool"] == "bulk"}
        assert bulk == {"cancelled": 300}, bulk
        print(f"ok: 300 tasks cancelled through the page in one request ({took:.2f} s, click to outcome page)")

    def signing_out_ends_the_session(self):
        cookie = next(c for c in self.driver.get_cookies() if c["name"] == "mcp_tasks_web")
        self.go(self.base + "/")
        self.click(By.CSS_SELECTOR, 'form[action$="/logout"] button')
        self.wait(lambda: "signed in as" not in (self.text("header") or ""), "the sign-out")
        task = self.store.ids["input_required"][0]
        request = urllib.request.Request(
            self.base + "/actions", data=f"action=cancel&id={task}".encode(), method="POST",
            headers={"cookie": f"mcp_tasks_web={cookie['value']}", "sec-fetch-site": "same-origin",
                     "content-type": "application/x-www-form-urlencoded"})
        try:
            urllib.request.urlopen(request, timeout=WAIT_S)
            raise AssertionError("the ended session's cookie was accepted")
        except urllib.error.HTTPError as e:
            assert e.code == 401, e.code
        assert self.store_status(task)["status"] == "input_required"
        print("ok: signing out ended the session: its cookie acts on nothing")

    def the_chart_and_the_time_zone(self):
        self.go(self.base + "/")
        series = self.driver.execute_script(
            "return Object.fromEntries(Array.from(document.querySelectorAll('#activity polyline[data-series]'),"
            " (p) => [p.dataset.series, [Number(p.dataset.total), p.getAttribute('points').split(' ').length]]))")
        assert set(series) == {"created", "completed", "failed", "cancelled"}, series
        assert all(points == 60 for _, points in series.values()), series
        assert series["created"][0] > 0 and series["completed"][0] > 0, series
        box = self.driver.find_element(By.CSS_SELECTOR, "#activity svg").rect
        assert box["width"] > 300 and box["height"] > 100, box
        self.driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Tokyo"})
        def first_time():
            return self.driver.execute_script(
                "const t = document.querySelector('#tasks tbody tr[data-id] td.time time');"
                " return [t.getAttribute('datetime'), t.textContent]")
        instant, utc = first_time()
        assert utc.endswith(" UTC") and utc[:10] == instant[:10], (instant, utc)
        self.click(By.ID, "zone")
        self.wait(lambda: not first_time()[1].endswith(" UTC"), "times in the browser's zone")
        instant, local = first_time()
        from datetime import datetime, timedelta
        tokyo = datetime.fromisoformat(instant.replace("Z", "+00:00")) + timedelta(hours=9)
        assert local == tokyo.strftime("%Y-%m-%d %H:%M:%S") + " GMT+9", (instant, local)
        self.click(By.ID, "zone")
        self.wait(lambda: first_time()[1].endswith(" UTC"), "times back in UTC")
        print(f"ok: the chart ({ {k: v[0] for k, v in series.items()} } in the last hour) and times in UTC or "
              f"the browser's zone ({utc} / {local})")

    def on_screen_latency(self, samples):
        """Time from a task's completion in the store to its row turning `completed` on screen."""
        took = []
        for _ in range(samples):
            task = self.store.say("spawn")
            self.go(self.base + "/?tool=fixed")
            self.wait(lambda: self.rows().get(task) == "working", "the spawned task on the list")
            self.wait(lambda: self.text("#live-state") == "live", "the live switch")
            started = time.monotonic()
            assert self.store.say(f"finish {task}") == "finished"
            self.wait(lambda: self.rows().get(task) == "completed", "the completion on screen")
            took.append(time.monotonic() - started)
        took.sort()
        print(f"on screen after completion, {samples} samples: median {took[len(took) // 2]:.2f} s, "
              f"max {took[-1]:.2f} s")

    def screenshots(self):
        if not self.shots:
            return
        self.shots.mkdir(parents=True, exist_ok=True)
        self.driver.set_window_size(1280, 720)
        self.go(self.base + "/")
        # Counts are served up to a second old: the page read after that shows the store's.
        time.sleep(1.2)
        self.go(self.base + "/")
        self.wait(lambda: self.text("#live-state") == "live", "the live switch")
        self.driver.save_screenshot(str(self.shots / "web-list.png"))
        self.go(f"{self.base}/tasks/{self.store.ids['input_required'][0]}")
        self.driver.save_screenshot(str(self.shots / "web-detail.png"))
        print(f"ok: screenshots in {self.shots}")

    def no_console_errors(self):
        self.collect_console()
        # The refusals above are pages answered 401/403: Chromium logs their status, which is the point.
        bad = [
            e for e in self.console
            if e["level"] == "SEVERE" and "status of 40" not in e["message"]
        ]
        csp = [e for e in self.console if "Content Security Policy" in e["message"]]
        assert not csp, f"CSP violations: {csp}"
        assert not bad, f"console errors: {bad}"
        print(f"ok: no CSP violation or error in the console ({len(self.console)} entries read)")


def serve_evil(directory, target_base):
    """Another site (localhost, not 127.0.0.1): a page whose form posts a cancel to the view."""
    page = f"""<!doctype html><title>elsewhere</title>
<form id="f" method="post" action="{target_base}/actions">
<input name="action" value="cancel"><input name="id" id="target" value=""></form>
<script>
document.getElementById("target").value = new URLSearchParams(location.search).get("target");
document.getElementById("f").submit();
</script>"""
    Path(directory, "evil.html").write_text(page)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=directory, **k)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--screenshots", type=Path, help="also write the guide's screenshots here")
    parser.add_argument("--churn", type=int, default=5, help="churn tasks created a second (three changes each)")
    parser.add_argument("--measure", type=int, default=0, help="also time this many completions to the screen")
    args = parser.parse_args()
    for binary in ("mcp-tasks", "web-store"):
        if not (TARGET / "debug" / binary).exists():
            sys.exit(f"target/debug/{binary} is missing: cargo build --bins first")
    out = TARGET / "browser"
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="mcp-tasks-browser-"))
    processes = []
    store = driver = evil = balancer = None
    try:
        store = Store(str(TARGET / "debug" / "web-store"), str(work), args.churn)
        (work / "tokens").write_text(f"ana:{SECRET}\n")
        port, read_only_port = free_port(), None
        web = subprocess.Popen([str(TARGET / "debug" / "mcp-tasks"), "web", "--store", store.url,
                                "--listen", f"127.0.0.1:{port}", "--token-file", str(work / "tokens")])
        processes.append(web)
        wait_until_serving(f"http://127.0.0.1:{port}/", web)
        read_only_port = free_port()
        read_only = subprocess.Popen([str(TARGET / "debug" / "mcp-tasks"), "web", "--store", store.url,
                                      "--listen", f"127.0.0.1:{read_only_port}", "--read-only"])
        processes.append(read_only)
        wait_until_serving(f"http://127.0.0.1:{read_only_port}/", read_only)
        base = f"http://127.0.0.1:{port}"
        evil = serve_evil(str(work), base)
        # A second worker over the same store, and a balancer that alternates between the two.
        second_port = free_port()
        second = subprocess.Popen([str(TARGET / "debug" / "mcp-tasks"), "web", "--store", store.url,
                                   "--listen", f"127.0.0.1:{second_port}", "--token-file", str(work / "tokens")])
        processes.append(second)
        wait_until_serving(f"http://127.0.0.1:{second_port}/", second)
        balancer = Balancer([port, second_port])

        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     f"--user-data-dir={work / 'profile'}", "--window-size=1400,900",
                     # DNS rebinding without DNS: this name now points at the view.
                     "--host-resolver-rules=MAP evil.example 127.0.0.1"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        driver.set_page_load_timeout(WAIT_S)
        checks = Checks(driver, base, f"http://127.0.0.1:{read_only_port}",
                        f"http://localhost:{evil.server_address[1]}", store, args.screenshots, port, balancer)
        try:
            checks.counts_match_the_store()
            checks.the_chart_and_the_time_zone()
            checks.a_filter_narrows_and_survives_a_reload()
            checks.read_only_shows_no_action()
            checks.a_working_task_completes_on_screen()
            checks.an_operator_cancels_through_the_page()
            # Signed in now: the cookie (SameSite=Strict) and the site check both stand in the way.
            checks.a_cross_site_post_is_refused()
            checks.rebinding_reads_nothing()
            checks.two_workers_keep_a_page_still()
            checks.screenshots()
            checks.a_bulk_cancel_takes_every_task_matching()
            checks.signing_out_ends_the_session()
            if args.measure:
                checks.on_screen_latency(args.measure)
            checks.no_console_errors()
        except BaseException:
            shot = out / "failure.png"
            driver.save_screenshot(str(shot))
            (out / "failure.html").write_text(driver.page_source)
            traceback.print_exc()
            sys.exit(f"FAILED: screenshot {shot}, page {out / 'failure.html'}, console {checks.console}")
        print("browser: all checks passed")
    finally:
        if driver is not None:
            driver.quit()
        if evil is not None:
            evil.shutdown()
        if balancer is not None:
            balancer.stop()
        for process in processes:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        if store is not None:
            store.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.pop("MCP_TASKS_STORE", None)
    main()
