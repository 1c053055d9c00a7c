// The Node client's half of the client benchmark (a script, not a test; docs/BENCHMARKS.md quotes
// it): TasksClient follows tasks that complete at once, CONCURRENCY calls in flight (64 by
// default) for SECONDS (5), then 300 calls one at a time, and prints tasks/s and the p50 of
// create -> outcome. Against the fixture host on memory://, beside
// `target/release/client-bench --only throughput` for the Rust client's figure; from bindings-node/
// (it imports the package by its name), after bindings-node/dev-env:
//   node bench/client.mjs http://127.0.0.1:8080/mcp [SECONDS] [CONCURRENCY]
import { TasksClient } from "mcp-tasks";

const [url, seconds = "5", concurrency = "64"] = process.argv.slice(2);
if (!url) throw new Error("usage: node bench/client.mjs URL [SECONDS] [CONCURRENCY]");
const client = new TasksClient({ url, store: "memory://" });
let done = 0;
const end = performance.now() + Number(seconds) * 1000;
let started = performance.now();
await Promise.all(
  Array.from({ length: Number(concurrency) }, async () => {
    while (performance.now() < end) {
      const execution = await client.callTool("slow_compute", { seconds: 0 });
      await execution.result();
      done++;
    }
  }),
);
console.log(`node client, ${concurrency} in flight: ${Math.round(done / ((performance.now() - started) / 1000))} tasks/s`);
const latencies = [];
for (let i = 0; i < 300; i++) {
  started = performance.now();
  const execution = await client.callTool("slow_compute", { seconds: 0 });
  await execution.result();
  latencies.push(performance.now() - started);
}
latencies.sort((a, b) => a - b);
console.log(`node client, 1 in flight: p50 ${latencies[150].toFixed(3)} ms`);
await client.close();
