"""The Python client's half of the client benchmark (a script, not a test; docs/BENCHMARKS.md
quotes it): ``TasksClient`` follows tasks that complete at once, ``--concurrency`` calls in flight
(64 by default) for ``--seconds``, then 300 calls one at a time, and prints tasks/s and the p50 of
create -> outcome. Against the fixture host on ``memory://``, beside
``target/release/client-bench --only throughput`` for the Rust client's figure:

    target/release/fixture-server 8080 --store memory:// &
    .tools/venv/bin/python bindings-python/bench/client.py http://127.0.0.1:8080/mcp
"""

from __future__ import annotations

import argparse
import asyncio
import time

from mcp_tasks import TasksClient


async def main(url: str, seconds: float, concurrency: int) -> None:
    client = TasksClient(url, store="memory://")
    done = 0
    end = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < end:
            execution = await client.call_tool("slow_compute", {"seconds": 0})
            await execution.result()
            done += 1

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    print(f"python client, {concurrency} in flight: {done / (time.monotonic() - started):.0f} tasks/s")
    latencies = []
    for _ in range(300):
        started = time.perf_counter()
        execution = await client.call_tool("slow_compute", {"seconds": 0})
        await execution.result()
        latencies.append(time.perf_counter() - started)
    latencies.sort()
    print(f"python client, 1 in flight: p50 {latencies[len(latencies) // 2] * 1000:.3f} ms")
    await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    asyncio.run(main(args.url, args.seconds, args.concurrency))
