#!/usr/bin/env python3
"""Flood: many connections that send half a request header and then nothing, held from several
processes, while a normal request probes the server every second.

Starts the server (memory store), then worker processes that together open N connections, each
sending `POST /mcp HTTP/1.1`, `Host` and half of `Content-Type` and then nothing; a connection
the server closes is counted (with `--reopen` it is opened again a second later, so the pressure
lasts the whole flood; the share closed then counts the last round, still held, too). The workers
connect from source addresses 127.0.0.2 and up (a port range of their own
each), so the probe, from 127.0.0.1, never runs out of ports. Meanwhile the main process sends
a `server/discover` every second on a new connection (5 s timeout) and counts the probes that
fail; after the flood it stops the workers and sends five more probes (recovery).

    tests/reliability/flood.py rust|python|node [--connections 21000] [--seconds 70]
                               [--processes 4] [--reopen] [--json FILE]

Prints, per server: probes sent and failed, the half-sent connections opened and the share the
server closed, connect errors, the server's open descriptors at the peak, and whether it served
after the flood. Not part of CI (`--smoke`, which CI runs, holds 400 connections for 14 s and
fails unless every target holds); docs/reliability.md quotes its output. The issue's target: with the descriptor limit at
20,000 and 21,000 connections for 70 s, at most 2 probes fail, at least 90% of the half-sent
connections are closed by the server, and the server serves normally afterwards.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import resource
import selectors
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from servers import KINDS, Client, Server, build, log

HALF = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty"


def worker(port: int, count: int, seconds: float, source: int, again: bool) -> None:
    """Keeps `count` half-sent connections to `port` open for `seconds`, from 127.0.0.<source>
    and the next addresses (a port range each); prints a JSON report on stdout."""
    sel = selectors.DefaultSelector()
    opened = closed = connect_errors = 0
    reopen: list[float] = []  # when the next closed connection may be opened again
    sources = [f"127.0.0.{source + i}" for i in range(4)]
    deadline = time.monotonic() + seconds

    def open_one(i: int) -> None:
        nonlocal opened, connect_errors
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((sources[i % len(sources)], 0))
            err = s.connect_ex(("127.0.0.1", port))
        except OSError:
            err = errno.EADDRNOTAVAIL
        if err not in (0, errno.EINPROGRESS):
            connect_errors += 1
            s.close()
            reopen.append(time.monotonic() + 1)
            return
        opened += 1
        sel.register(s, selectors.EVENT_WRITE, "connecting")

    for i in range(count):
        open_one(i)
    n = count
    while (now := time.monotonic()) < deadline:
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            if key.data == "connecting":
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                    connect_errors += 1
                    sel.unregister(s)
                    s.close()
                    reopen.append(time.monotonic() + 1)
                    continue
                try:
                    s.send(HALF)
                except OSError:
                    pass
                sel.modify(s, selectors.EVENT_READ, "held")
            else:
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:  # the server closed it (or reset it)
                    closed += 1
                    sel.unregister(s)
                    s.close()
                    if again:
                        reopen.append(time.monotonic() + 1)
        due = [t for t in reopen if t <= now]
        reopen = [t for t in reopen if t > now]
        for _ in due:
            n += 1
            open_one(n)
    held = len(sel.get_map())
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    print(json.dumps({"opened": opened, "closed": closed, "connect_errors": connect_errors, "held_at_end": held}))


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def probe(port: int, timeout: float) -> tuple[bool, float, str]:
    started = time.monotonic()
    client = Client(port, timeout=timeout)
    try:
        answer = client.call("server/discover", {})
        ok = answer.get("result", {}).get("resultType") == "complete"
        return ok, time.monotonic() - started, "" if ok else str(answer)[:120]
    except (OSError, ValueError) as e:
        return False, time.monotonic() - started, f"{type(e).__name__}: {e}"[:120]
    finally:
        client.close()


def run(
    kind: str, connections: int, seconds: float, processes: int, probe_timeout: float, again: bool
) -> dict[str, object]:
    build(kind)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    server = Server(kind, "memory://")
    limits = Path(f"/proc/{server.pid}/limits").read_text()
    fd_limit = next((line.split()[3] for line in limits.splitlines() if line.startswith("Max open files")), "?")
    log(f"{kind}: server pid {server.pid}, descriptor limit {fd_limit}; flood {connections} connections "
        f"from {processes} processes for {seconds:.0f} s")
    share = -(-connections // processes)
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", str(server.port), str(min(share, connections - i * share)),
             str(seconds), str(2 + 4 * i), "1" if again else "0"],
            stdout=subprocess.PIPE, text=True,
        )
        for i in range(processes)
    ]
    probes: list[tuple[bool, float, str]] = []
    peak_fds = 0
    stop = threading.Event()

    def watch_fds() -> None:
        nonlocal peak_fds
        while not stop.wait(0.5):
            peak_fds = max(peak_fds, open_fds(server.pid))

    watcher = threading.Thread(target=watch_fds, daemon=True)
    watcher.start()
    started = time.monotonic()
    try:
        while time.monotonic() - started < seconds:
            tick = time.monotonic()
            probes.append(probe(server.port, probe_timeout))
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
        reports = [json.loads(w.communicate(timeout=seconds + 120)[0].strip().splitlines()[-1]) for w in workers]
        time.sleep(1)
        after = [probe(server.port, probe_timeout) for _ in range(5)]
        alive = server.proc.poll() is None
    finally:
        stop.set()
        for w in workers:
            if w.poll() is None:
                w.kill()
        server.kill()
    opened = sum(r["opened"] for r in reports)
    closed = sum(r["closed"] for r in reports)
    failed = [p for p in probes if not p[0]]
    result = {
        "server": kind,
        "descriptor_limit": fd_limit,
        "connections": connections,
        "seconds": seconds,
        "probes": len(probes),
        "probes_failed": len(failed),
        "probe_failures": [p[2] for p in failed][:5],
        "probe_p50_ms": round(sorted(p[1] for p in probes)[len(probes) // 2] * 1000, 1) if probes else None,
        "probe_max_ms": round(max(p[1] for p in probes) * 1000, 1) if probes else None,
        "half_sent_opened": opened,
        "closed_by_server": closed,
        "closed_share": round(closed / opened, 3) if opened else 0.0,
        "connect_errors": sum(r["connect_errors"] for r in reports),
        "held_at_end": sum(r["held_at_end"] for r in reports),
        "server_peak_fds": peak_fds,
        "served_after": sum(1 for p in after if p[0]),
        "server_alive": alive,
        "client_descriptor_limit": f"{soft}/{hard}",
    }
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        port, count, seconds, source, again = sys.argv[2:7]
        worker(int(port), int(count), float(seconds), int(source), again == "1")
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("servers", nargs="+", choices=KINDS)
    parser.add_argument("--connections", type=int, default=21_000)
    parser.add_argument("--seconds", type=float, default=70)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--probe-timeout", type=float, default=5)
    parser.add_argument("--reopen", action="store_true", help="open a closed connection again a second later")
    parser.add_argument("--smoke", action="store_true", help="400 connections for 14 s; fail unless the targets hold")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.smoke:
        # Past the servers' 10 s header timeout, so the closing is checked too.
        args.connections, args.seconds, args.processes = 400, 14, 2
    results = []
    for kind in args.servers:
        result = run(kind, args.connections, args.seconds, args.processes, args.probe_timeout, args.reopen)
        results.append(result)
        print(json.dumps(result), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.smoke or not args.reopen:
        # The targets: at most 2 probes fail, at least 90% of the half-sent connections are
        # closed by the server, and it serves normally afterwards.
        bad = [r for r in results if r["probes_failed"] > 2 or r["closed_share"] < 0.9 or r["served_after"] < 5
               or not r["server_alive"]]
        if bad:
            raise SystemExit(f"flood: targets missed by {[r['server'] for r in bad]}")


if __name__ == "__main__":
    main()
