#!/usr/bin/env python3
"""Push at scale: thousands of open `subscriptions/listen` streams while tasks complete.

Starts each named server on a fresh SQLite file (the embedded default) and runs the load client
`listen-scale` (tests/fixtures/src/bin/listen-scale.rs, built in release) against it: it creates
`--streams` tasks of the fixture tool `slow_compute` plus `--groups` x `--group-size` more, timed
to complete one after another at `--rate` per second once every stream is open, opens a listen
stream per task of the first set and one per group of the rest (each on its own connection),
and reads them all. Per server it prints the latency from each state change (the frame's
`lastUpdatedAt`, in ms) to the frame read, p50 / p99 / max, the streams that missed a task, and
the server's RSS per open stream.

`--stalled N` adds N readers that stop reading, each following every task on a connection with
a small receive buffer, opened 8 s before the first task is due (so their first states are sent
and they are stalled while the tasks complete): the others' latencies show whether they delay anyone,
and each must have been dropped (its connection closed mid-stream) by the time the others are
done, which is at least 30 s (the servers' default `writeStallTimeoutMs`) after its writes
blocked.

    tests/reliability/listeners.py rust|python|node ... [--streams 10000] [--groups 100]
        [--group-size 100] [--rate 1000] [--lead SECONDS] [--stalled 0] [--tool slow_compute]
        [--timeline] [--smoke]

`--smoke` runs it small (200 streams, 4 groups of 10, 200 tasks/s): CI's check that every
stream gets every frame, with no timing asserted. Not part of CI at full size (a minute or two
per server); docs/BENCHMARKS.md quotes its output.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from servers import KINDS, ROOT, Server, build, log


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("servers", nargs="+", choices=KINDS)
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--group-size", type=int, default=100)
    parser.add_argument("--rate", type=float, default=1_000.0)
    parser.add_argument("--lead", type=float, default=None,
                        help="seconds from the first create to the first task due (listen-scale's default: 75 s at full size)")
    parser.add_argument("--stalled", type=int, default=0, help="readers that stop reading (see above)")
    parser.add_argument("--tool", default="slow_compute",
                        help="the fixture tool that sleeps (the TypeScript fixture's ctx-free twin: slow_compute_plain; the Python one's twin that takes a Context: slow_compute_ctx)")
    parser.add_argument("--smoke", action="store_true", help="small, as CI runs it")
    parser.add_argument("--timeline", action="store_true",
                        help="also print, per server, the frames, p99 and max of each second after the first task was due")
    args = parser.parse_args()
    if args.smoke:
        args.streams, args.groups, args.group_size, args.rate = 200, 4, 10, 200.0
    client = os.environ.get("MCP_TASKS_LISTEN_SCALE")
    if client is None:
        subprocess.run(
            ["cargo", "build", "--release", "--quiet", "-p", "mcp-tasks-fixtures", "--bin", "listen-scale"],
            cwd=ROOT,
            check=True,
        )
        client = str(ROOT / "target/release/listen-scale")
    failed = False
    rows = []
    for kind in args.servers:
        build(kind)
        with tempfile.TemporaryDirectory() as tmp:
            server = Server(kind, f"sqlite://{Path(tmp) / 'tasks.db'}")
            try:
                command = [
                    client,
                    f"http://127.0.0.1:{server.port}/mcp",
                    "--streams", str(args.streams),
                    "--groups", str(args.groups),
                    "--group-size", str(args.group_size),
                    "--rate", str(args.rate),
                    "--pid", str(server.pid),
                    "--stalled", str(args.stalled),
                    "--tool", args.tool,
                ] + (["--lead", str(args.lead)] if args.lead is not None else [])
                run = subprocess.run(command, capture_output=True, text=True, timeout=1_800)
            finally:
                server.kill()
        if run.returncode != 0:
            log(f"{kind}: listen-scale exited with {run.returncode}: {run.stderr.strip()[:2000]}")
            failed = True
            continue
        if run.stderr.strip():
            log(f"{kind}: {run.stderr.strip()}")
        figures = json.loads(run.stdout.strip().splitlines()[-1])
        if figures["missed"]:
            log(f"{kind}: {figures['short_streams']} streams missed {figures['missed']} task states")
            failed = True
        if figures["stalled_open"]:
            log(f"{kind}: {figures['stalled_open']} of {figures['stalled']} stalled readers were still open at the end")
            failed = True
        rows.append((kind, figures))
    print(
        f"{args.streams} streams of one task and {args.groups} of {args.group_size}, "
        f"tasks completing at {args.rate:.0f}/s; latency from the state change to the frame read"
        + (f"; {args.stalled} readers that stop reading, each following every task" if args.stalled else "")
    )
    print(
        "| server | streams | pushed frames | ended before their stream was open | p50 ms | p99 ms | max ms "
        "| streams that missed a task | RSS per open stream |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, f in rows:
        print(
            f"| {kind} | {f['streams']} | {f['frames']} | {f['before_open']} | {f['p50_ms']:.2f} | {f['p99_ms']:.2f} "
            f"| {f['max_ms']:.2f} "
            f"| {f['short_streams']} | {f['rss_per_stream_b']:,.0f} B |",
            flush=True,
        )
    if args.timeline:
        for kind, f in rows:
            print(f"{kind}: second after the first task was due, frames, p99 ms, max ms")
            for second, frames, p99, worst in f["timeline"]:
                print(f"  {second:>4} {frames:>6} {p99:>9.2f} {worst:>9.2f}")
    for kind, f in rows:
        if f["stalled"]:
            print(f"{kind}: stalled readers dropped by the server {f['stalled_dropped']} of {f['stalled']}, still open {f['stalled_open']}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
