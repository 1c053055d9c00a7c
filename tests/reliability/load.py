#!/usr/bin/env python3
"""Load: 10,000 tasks in flight with 100 concurrent pollers; errors, and RSS per in-flight task.

Starts the server on a fresh SQLite file (the embedded default), warms it up (500 tasks that
finish at once, and the pollers' connections opened), reads its RSS, then creates N tasks of a
tool that sleeps (`slow_compute`, long enough for all N to be in flight together) from 16
clients while 100 pollers read random created tasks with `tasks/get` without pause. Once all N
are created it reads the RSS again, once every task has completed a third time, and after
`--idle` seconds with no load a fourth:

- RSS per in-flight task = (RSS with N in flight - RSS after the warm-up) / N, and the marginal
  figure from N/2 to N in flight (without what fills once: caches, the allocator's arenas), for the whole
  resident set (VmRSS) and for its anonymous part (RssAnon: heap and stacks, without the file
  pages a process maps from the OS page cache, such as the SQLite file its readers map);
- errors: any JSON-RPC error or failed request, from creators and pollers alike.

    tests/reliability/load.py rust|python|node [--tasks 10000] [--pollers 100] [--sleep SECONDS]
        [--tool slow_compute_plain]

`--tool` names the fixture tool that sleeps; `slow_compute_plain` is the Node fixture's twin of
`slow_compute` that takes no context, so its tasks run without an SDK exchange.

Not part of CI (a few minutes per server); docs/BENCHMARKS.md quotes its output.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from pathlib import Path

from servers import KINDS, Client, Server, build, log, task_id

CREATORS = 16


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("server", choices=KINDS)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--pollers", type=int, default=100)
    parser.add_argument("--sleep", type=float, default=None, help="the tool's sleep (default: long enough)")
    parser.add_argument("--tool", default="slow_compute", help="the fixture tool that sleeps (default: slow_compute)")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds idle before the last RSS reading (default 30)")
    args = parser.parse_args()
    build(args.server)
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(args.server, f"sqlite://{Path(tmp) / 'tasks.db'}")
        try:
            return run(server, args)
        finally:
            server.kill()


def run(server: Server, args: argparse.Namespace) -> int:
    errors = 0
    lock = threading.Lock()
    created: list[str] = []
    stop = threading.Event()
    polls = 0

    def count_error(what: str) -> None:
        nonlocal errors
        with lock:
            errors += 1
            if errors <= 5:
                log(f"error: {what}")

    # Warm-up: short tasks through every code path, then the pollers' connections.
    warm = Client(server.port)
    for n in range(500):
        answer = warm.sleep_task(0, f"warm{n}", args.tool)
        if "result" not in answer:
            count_error(str(answer))
    warm.close()
    pollers = [Client(server.port) for _ in range(args.pollers)]

    def poll(client: Client) -> None:
        nonlocal polls
        rng = random.Random()
        done = 0
        while not stop.is_set():
            with lock:
                task_id = rng.choice(created) if created else None
            if task_id is None:
                time.sleep(0.01)
                continue
            try:
                answer = client.call("tasks/get", {"taskId": task_id})
                if "result" not in answer:
                    count_error(str(answer))
            except (OSError, ValueError) as e:
                count_error(f"poll: {e}")
            done += 1
        with lock:
            polls += done
        client.close()

    time.sleep(1)
    baseline = server.rss_kib()
    poll_threads = [threading.Thread(target=poll, args=(c,)) for c in pollers]
    for t in poll_threads:
        t.start()

    # Long enough to outlast the creates: a minute plus a second per 200 tasks.
    tool_sleep = args.sleep if args.sleep is not None else 60 + args.tasks / 200
    started = time.monotonic()
    per_creator = args.tasks // CREATORS

    def create(w: int) -> None:
        client = Client(server.port)
        for n in range(per_creator + (1 if w < args.tasks % CREATORS else 0)):
            try:
                answer = client.sleep_task(tool_sleep, f"c{w}-{n}", args.tool)
            except (OSError, ValueError) as e:
                count_error(f"create: {e}")
                continue
            new = task_id(answer)
            if new is None:
                count_error(str(answer))
            else:
                with lock:
                    created.append(new)
        client.close()

    creators = [threading.Thread(target=create, args=(w,)) for w in range(CREATORS)]
    for t in creators:
        t.start()
    half = None
    while any(t.is_alive() for t in creators):
        with lock:
            halfway = len(created) >= args.tasks // 2
        if half is None and halfway:
            half = (len(created), server.rss_kib())
        time.sleep(0.05)
    for t in creators:
        t.join()
    create_seconds = time.monotonic() - started
    time.sleep(1)
    peak = server.rss_kib()
    # Every task still in flight? (The sleep outlasts the creates by design.)
    checker = Client(server.port)
    sample = random.Random(1).sample(created, min(200, len(created)))
    in_flight = sum(1 for t in sample if checker.status(t) == "working")
    log(f"created {len(created)} in {create_seconds:.1f} s; {in_flight}/{len(sample)} sampled still working")
    # The pollers read on until the tool's sleep is over; then every task is checked (without
    # them: a lone checker behind 100 busy connections would take many minutes).
    time.sleep(max(0.0, started + create_seconds + tool_sleep - time.monotonic()))
    stop.set()
    for t in poll_threads:
        t.join()
    checker.close()  # idle through the sleep: the server may have closed it
    deadline = time.monotonic() + 600
    pending = list(created)
    while pending and time.monotonic() < deadline:
        pending = [t for t in pending if checker.status(t) != "completed"]
        if pending:
            time.sleep(2)
    checker.close()
    time.sleep(1)
    after = server.rss_kib()
    # What the process gives back once nothing runs (a garbage-collected runtime returns memory
    # when idle, not under load).
    time.sleep(args.idle)
    idle = server.rss_kib()
    n = len(created)
    print(
        f"{server.kind} ({args.tool}): {n} tasks in flight, {args.pollers} pollers ({polls} polls), errors {errors}, "
        f"unfinished {len(pending)}",
        flush=True,
    )
    for i, what in enumerate(("RSS", "anonymous RSS")):
        per_task = (peak[i] - baseline[i]) * 1024 / max(n, 1)
        marginal = (peak[i] - half[1][i]) * 1024 / max(n - half[0], 1) if half else float("nan")
        print(
            f"  {what}: after warm-up {baseline[i] / 1024:.1f} MiB, with {n} in flight {peak[i] / 1024:.1f} MiB, "
            f"after all finished {after[i] / 1024:.1f} MiB, after {args.idle:.0f} s idle {idle[i] / 1024:.1f} MiB; "
            f"per in-flight task {per_task:.0f} B "
            f"(marginal, from {half[0] if half else '?'} to {n} in flight: {marginal:.0f} B)",
            flush=True,
        )
    return 1 if errors or pending else 0


if __name__ == "__main__":
    raise SystemExit(main())
