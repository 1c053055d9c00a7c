#!/usr/bin/env python3
"""An rmcp server behind mcp-tasks-rmcp beside the same server on rmcp alone, in one run.

Both serve the fixture tools from one binary (`rmcp-fixture-server`, release build): behind core
on a fresh SQLite file (the embedded default, durable), and with `--plain`, where rmcp's own
in-memory `TaskManager` makes the tasks, as rmcp's task example does. The load client is
`server-load` (tests/fixtures, release; one thread, so the server keeps the other core), on
`--connections` keep-alive connections:

- creates/s: `tools/call` of `slow_compute` with `seconds: 0`, each answered with a task;
- `tasks/get`/s of finished tasks on a fresh server, and again once `--held` tasks are held
  (created by the same client first, then 5 s idle, so the durable store's background commit
  of the pile is not what the reads wait behind; the plain server keeps them for its 5-minute TTL). rmcp
  alone gets `--held-plain` (20,000 by default): each of its task calls scans every held task,
  so its creates slow as they pile up, and 200,000 would take most of its TTL to create.

Each figure is the median of `--rounds` runs, the servers interleaved; the ratio column divides
the durable server's figure by rmcp's, and the last column the figure with `--held` tasks by the
fresh one.

    tests/reliability/rmcp.py [--rounds 3] [--seconds 5] [--connections 64] [--held 200000]
        [--held-plain 20000] [--smoke]

`--smoke` runs it small (1 round of 0.5 s, 2,000 held): it fails if a request fails, and asserts
no timing. Not part of CI at full size (a few minutes); docs/BENCHMARKS.md quotes its output.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from servers import ROOT, Server, build, log

KINDS = ("rmcp", "rmcp-plain")
LABELS = {"rmcp": "rmcp behind mcp-tasks-rmcp, SQLite", "rmcp-plain": "rmcp alone, its in-memory TaskManager"}


def load(client: str, port: int, measure: str, seconds: float, connections: int, tasks: int = 256) -> float:
    """One `server-load` run; its rate. A failed request fails the benchmark."""
    command = [client, f"http://127.0.0.1:{port}/mcp", measure, "--connections", str(connections),
               "--seconds", str(seconds), "--tool", "slow_compute", "--arguments", '{"seconds":0}',
               "--tasks", str(tasks)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=1_800).stdout
    figures = json.loads(out.strip().splitlines()[-1])
    if figures["bad"]:
        raise SystemExit(f"{measure} on port {port}: {figures['bad']} failed requests")
    return float(figures["rate"])


def pile(client: str, port: int, held: int, connections: int) -> int:
    """Creates at least `held` finished tasks (creates of 5 s, each preceded by server-load's 1 s
    warm-up, counted at the measured rate); how many, about."""
    made = 0.0
    while made < held:
        seconds = 5.0
        rate = load(client, port, "creates", seconds, connections)
        made += rate * (seconds + 1.0)
    return int(made)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--held", type=int, default=200_000)
    parser.add_argument("--held-plain", type=int, default=20_000)
    parser.add_argument("--smoke", action="store_true", help="small, as CI runs it")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.seconds, args.held, args.held_plain = 1, 0.5, 2_000, 2_000
    client = os.environ.get("SERVER_LOAD")
    if client is None:
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "mcp-tasks-fixtures", "--bin", "server-load"],
                       cwd=ROOT, check=True)
        client = str(ROOT / "target/release/server-load")
    for kind in KINDS:
        build(kind)
    figures: dict[str, dict[str, list[float]]] = {k: {"creates": [], "gets": [], "held": []} for k in KINDS}
    piled: dict[str, list[int]] = {k: [] for k in KINDS}
    for round_ in range(args.rounds):
        for kind in KINDS:
            with tempfile.TemporaryDirectory() as tmp:
                server = Server(kind, f"sqlite://{Path(tmp) / 'tasks.db'}")
                try:
                    figures[kind]["creates"].append(load(client, server.port, "creates", args.seconds, args.connections))
                finally:
                    server.kill()
            with tempfile.TemporaryDirectory() as tmp:
                server = Server(kind, f"sqlite://{Path(tmp) / 'tasks.db'}")
                try:
                    figures[kind]["gets"].append(load(client, server.port, "gets", args.seconds, args.connections))
                    held = args.held_plain if kind == "rmcp-plain" else args.held
                    piled[kind].append(pile(client, server.port, held, args.connections))
                    time.sleep(1.0 if args.smoke else 5.0)
                    figures[kind]["held"].append(load(client, server.port, "gets", args.seconds, args.connections))
                finally:
                    server.kill()
            log(f"round {round_ + 1} {kind}: " + ", ".join(f"{m} {v[-1]:,.0f}/s" for m, v in figures[kind].items())
                + f" ({piled[kind][-1]:,} held)")
    med = {k: {m: statistics.median(v) for m, v in f.items()} for k, f in figures.items()}
    base = med["rmcp-plain"]
    print(f"medians of {args.rounds} rounds of {args.seconds} s, {args.connections} connections")
    print("| server | creates/s | vs rmcp | tasks/get/s, fresh | tasks held | tasks/get/s, held | held / fresh |")
    print("|---|---|---|---|---|---|---|")
    for kind in KINDS:
        m = med[kind]
        print(f"| {LABELS[kind]} | {m['creates']:,.0f} | {m['creates'] / base['creates']:.2f}× | {m['gets']:,.0f} "
              f"| {min(piled[kind]):,}+ | {m['held']:,.0f} | {m['held'] / m['gets']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
