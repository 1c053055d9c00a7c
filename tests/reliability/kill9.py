#!/usr/bin/env python3
"""Kill -9 trials: does a server lose or strand an acknowledged task when it dies at a random moment?

Each trial starts the server on a fresh SQLite file (the embedded default, redo log included),
lets 8 clients create tasks as fast as they can (a sleeping tool, so they stay `working`, plus
some that finish at once), kills the whole process with SIGKILL at a random moment between 0.3
and 2.5 s, restarts it on the same file, and reads back every task whose CreateTaskResult a
client received:

- acknowledged: CreateTaskResults received before the kill;
- lost: acknowledged tasks the restarted server does not know (-32602);
- stuck: acknowledged tasks still `working` or `input_required` after the restart (the host
  must fail what the dead process was running, at start-up);
- history: tasks whose history does not match what their row kept (`servers.history_problems`).

    tests/reliability/kill9.py rust|python|node [--trials 20] [--seed N]

Prints one line per trial and a total; exits 1 if any task was lost or stuck or a history is wrong. Not part of CI
(a minute or more per server); docs/reliability.md quotes its output.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from servers import KINDS, Client, Server, build, create_until, history_problems, log

WRITERS = 8


def trial(kind: str, rng: random.Random) -> tuple[int, int, int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite://{Path(tmp) / 'tasks.db'}"
        server = Server(kind, store)
        acked: list[str] = []
        lock = threading.Lock()
        stop = threading.Event()

        def on_ack(_seconds: float, result: dict[str, Any]) -> None:
            with lock:
                acked.append(result["taskId"])

        def seconds(n: int) -> float:
            return 0 if n % 8 == 0 else 60  # one in eight finishes at once: completions in flight too

        threads = [threading.Thread(target=create_until, args=(server.port, w, stop, seconds, on_ack))
                   for w in range(WRITERS)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.3, 2.5))
        server.kill()
        stop.set()
        for t in threads:
            t.join()
        with lock:
            acknowledged = list(acked)

        server = Server(kind, store)
        try:
            client = Client(server.port)
            lost = stuck = 0
            for acked_id in acknowledged:
                status = client.status(acked_id)
                if status is None:
                    lost += 1
                elif status in ("working", "input_required"):
                    stuck += 1
            client.close()
        finally:
            server.kill()
        problems = history_problems(store)
        for problem in problems[:5]:
            log(f"  history: {problem}")
        return len(acknowledged), lost, stuck, len(problems)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("server", choices=KINDS)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    rng = random.Random(seed)
    build(args.server)
    log(f"{args.server}: {args.trials} trials, seed {seed}")
    totals = [0, 0, 0, 0]
    started = time.monotonic()
    for n in range(1, args.trials + 1):
        counts = trial(args.server, rng)
        totals = [total + count for total, count in zip(totals, counts)]
        acknowledged, lost, stuck, history = counts
        print(f"trial {n:2}: acknowledged {acknowledged:6}  lost {lost}  stuck {stuck}  history {history}", flush=True)
    print(
        f"{args.server}: {args.trials} trials in {time.monotonic() - started:.0f} s: "
        f"acknowledged {totals[0]}  lost {totals[1]}  stuck {totals[2]}  history {totals[3]}",
        flush=True,
    )
    return 1 if totals[1] or totals[2] or totals[3] else 0


if __name__ == "__main__":
    raise SystemExit(main())
