"""What exporting a task's trace costs the Rust host: creates per second (`server-load creates`,
each a durable create on SQLite and a run of `slow_compute` for 0 s) with the OTLP export on (a
batch exporter to this script's receiver) beside the same binary with no exporter configured,
rounds interleaved in one run, ratios printed side by side. With `--baseline BINARY` (a
fixture-server built before traces existed) a third column: what the spans cost with no exporter.
The export goes to a sink that reads each request and answers 200 (`--decode`: to
tests/otel/receiver.py, whose decoding then competes with the host for this machine's two cores).

    python tests/otel/overhead.py [--rounds 5] [--seconds 5] [--connections 32] [--baseline BINARY]
        [--ratio 0.1] [--decode]

`--ratio` adds the export with that share of new traces sampled (`parentbased_traceidratio`).

Builds the release fixture-server (with its `otel` feature) and server-load first. Needs `opentelemetry-proto` (the
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


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) process `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(binary: str, env: dict[str, str], seconds: float, connections: int) -> tuple[float, float]:
    """Creates per second against one fresh server on a fresh SQLite file, and the server's CPU
    time per create in microseconds (which the load generator and the receiver, sharing this
    machine's cores, do not move)."""
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
            started = cpu_seconds(server.pid)
            load = subprocess.run(
                [str(ROOT / "target/release/server-load"), f"http://127.0.0.1:{port}/mcp", "creates",
                 "--connections", str(connections), "--seconds", str(seconds), "--tool", "slow_compute",
                 "--arguments", '{"seconds":0}'],
                check=True, capture_output=True, text=True, timeout=seconds + 120,
            )
            used = cpu_seconds(server.pid) - started
            answer = json.loads(load.stdout.strip().splitlines()[-1])
            if answer.get("bad"):
                raise SystemExit(f"{answer['bad']} requests failed")
            rate = float(answer["rate"])
            # server-load warms up for a second before its measured seconds: those creates count too.
            return rate, used / (rate * (seconds + 1)) * 1e6
        finally:
            os.killpg(server.pid, signal.SIGINT)
            server.wait(timeout=60)


class Sink:
    """An OTLP/HTTP endpoint that reads each export and answers 200 without decoding it: what the
    exporter costs the host, without a receiver's decoding competing for this machine's cores."""

    def __init__(self) -> None:
        import http.server
        import threading

        sink = self
        self.bytes = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (the http.server API)
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                        sink.bytes += len(self.rfile.read(size))
                        self.rfile.readline()
                    self.rfile.readline()
                else:
                    sink.bytes += len(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "Sink":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--baseline", help="a fixture-server binary built before traces existed")
    parser.add_argument("--ratio", type=float,
                        help="a fourth column: the export with OTEL_TRACES_SAMPLER=parentbased_traceidratio at this ratio")
    parser.add_argument("--decode", action="store_true",
                        help="export to tests/otel/receiver.py (decodes every span, on this machine's cores) "
                             "instead of a sink that only reads")
    args = parser.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "mcp-tasks-fixtures", "--features", "otel", "--bin",
                    "fixture-server", "--bin", "server-load"], cwd=ROOT, check=True)
    binary = str(ROOT / "target/release/fixture-server")
    sampled = f"OTLP {args.ratio:.0%}" if args.ratio is not None else None
    rates: dict[str, list[float]] = {"baseline": [], "no exporter": [], "OTLP batch": []}
    if sampled:
        rates[sampled] = []
    cpu: dict[str, list[float]] = {name: [] for name in rates}

    def run(name: str, binary: str, env: dict[str, str]) -> None:
        rate, per_create = measure(binary, env, args.seconds, args.connections)
        rates[name].append(rate)
        cpu[name].append(per_create)

    with Receiver() if args.decode else Sink() as receiver:
        export = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "overhead"}
        for n in range(args.rounds):
            if args.baseline:
                run("baseline", args.baseline, {})
            run("no exporter", binary, {})
            before = len(receiver.spans) if args.decode else receiver.bytes
            run("OTLP batch", binary, export)
            if sampled:
                run(sampled, binary, {**export, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                                      "OTEL_TRACES_SAMPLER_ARG": str(args.ratio)})
            got = (f"{len(receiver.spans) - before:,} spans received" if args.decode
                   else f"{(receiver.bytes - before) / 1e6:,.1f} MB of OTLP received")
            print(f"round {n + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s ({cpu[k][-1]:.1f} µs CPU)"
                                                for k, v in rates.items() if v) + f"; {got}", flush=True)
    reference = statistics.median(rates["no exporter"])
    reference_cpu = statistics.median(cpu["no exporter"])
    print(f"\nmedian of {args.rounds} rounds of {args.seconds:g} s, {args.connections} connections:")
    print(f"  {'':<12} {'creates/s':>10}   {'ratio':>6}   {'server CPU/create':>17}   {'ratio':>6}")
    for name, values in rates.items():
        if values:
            median, per_create = statistics.median(values), statistics.median(cpu[name])
            print(f"  {name:<12} {median:>10,.0f}   {median / reference:6.3f}   {per_create:>14.1f} µs   "
                  f"{per_create / reference_cpu:6.3f}")


if __name__ == "__main__":
    main()
