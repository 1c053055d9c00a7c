"""What exporting a task's trace costs the Rust host: creates per second (`server-load creates`,
each a durable create on SQLite and a run of `slow_compute` for 0 s) with the OTLP export on (a
batch exporter to this script's receiver) beside the same binary with no exporter configured,
rounds interleaved in one run, ratios printed side by side. With `--baseline BINARY` (a
fixture-server built before traces existed) a third column: what the spans cost with no exporter.

    python tests/otel/overhead.py [--rounds 5] [--seconds 5] [--connections 32] [--baseline BINARY]

Builds the release fixture-server and server-load first. Needs `opentelemetry-proto` (the
bindings-python/dev-env venv has it). No timing is asserted anywhere: these are figures to read.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from receiver import Receiver  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(binary: str, env: dict[str, str], seconds: float, connections: int) -> float:
    """Creates per second against one fresh server on a fresh SQLite file."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen([binary, str(port), "--store", f"sqlite:///{tmp}/tasks.db"],
                                  env={**os.environ, **env}, stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            load = subprocess.run(
                [str(ROOT / "target/release/server-load"), f"http://127.0.0.1:{port}/mcp", "creates",
                 "--connections", str(connections), "--seconds", str(seconds), "--tool", "slow_compute",
                 "--arguments", '{"seconds":0}'],
                check=True, capture_output=True, text=True, timeout=seconds + 120,
            )
            answer = json.loads(load.stdout.strip().splitlines()[-1])
            if answer.get("bad"):
                raise SystemExit(f"{answer['bad']} requests failed")
            return float(answer["rate"])
        finally:
            os.killpg(server.pid, signal.SIGINT)
            server.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--baseline", help="a fixture-server binary built before traces existed")
    args = parser.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "mcp-tasks-fixtures", "--bin", "fixture-server",
                    "--bin", "server-load"], cwd=ROOT, check=True)
    binary = str(ROOT / "target/release/fixture-server")
    rates: dict[str, list[float]] = {"baseline": [], "no exporter": [], "OTLP batch": []}
    with Receiver() as receiver:
        export = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "overhead"}
        for n in range(args.rounds):
            if args.baseline:
                rates["baseline"].append(measure(args.baseline, {}, args.seconds, args.connections))
            rates["no exporter"].append(measure(binary, {}, args.seconds, args.connections))
            before = len(receiver.spans)
            rates["OTLP batch"].append(measure(binary, export, args.seconds, args.connections))
            print(f"round {n + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items() if v)
                  + f"; {len(receiver.spans) - before:,} spans received", flush=True)
    reference = statistics.median(rates["no exporter"])
    print(f"\ncreates/s, median of {args.rounds} rounds of {args.seconds:g} s, {args.connections} connections:")
    for name, values in rates.items():
        if values:
            median = statistics.median(values)
            print(f"  {name:<12} {median:>10,.0f}/s   {median / reference:6.3f} × no exporter")


if __name__ == "__main__":
    main()
