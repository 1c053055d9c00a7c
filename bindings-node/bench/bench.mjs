// The side-by-side benchmark of TypeScript task servers (a script, not a test; run it with
// bindings-node/bench/run). Five servers on the same SDK (@modelcontextprotocol/server 2.4.0),
// each in its own process (bench/servers.mjs): mcp-tasks/server on its default SQLite store (a
// tool that takes no context, whose callback runs directly), the same on memory://, the same on
// SQLite with a tool that takes the SDK's context (the SDK's dispatch on one server), the same
// again with a factory that reads the request context (an SDK exchange per task), and a
// hand-written in-memory baseline. wrk drives each over loopback HTTP
// with 16 concurrent connections: creates/s (every request creates a task, bench/creates.lua)
// and end-to-end tasks/s (create, then poll tasks/get until completed, bench/tasks.lua). Each
// figure is the median of ROUNDS runs, interleaved across the servers; the ratio column divides
// by the baseline's figure. BENCH_ROUNDS, BENCH_SECONDS and BENCH_WARMUP_SECONDS change the run;
// SERVER_LOAD=target/debug/server-load drives the servers with that client instead of wrk (what
// tests/run-all does, small, as a smoke that fails on any failed request and asserts no timing).
import { spawn, execFileSync } from "node:child_process";
import { createInterface } from "node:readline";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
// V8 needs about this long under load before every path of these servers is optimized (the
// figures of 3 s runs kept rising for ~9 s on this machine): only steady state is measured.
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 8);
const CONNECTIONS = 16;
const KINDS = ["sqlite", "memory", "ctx", "exchange", "baseline"];
const LABELS = {
  sqlite: "mcp-tasks/server, SQLite (default)",
  memory: "mcp-tasks/server, memory://",
  ctx: "mcp-tasks/server, SQLite, tool takes ctx",
  exchange: "the same, factory takes ctx (exchange)",
  baseline: "hand-written in-memory baseline",
};

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

async function start(kind) {
  const port = await freePort();
  const child = spawn(process.execPath, [join(here, "servers.mjs"), kind, String(port)], { stdio: ["ignore", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout });
  const url = await new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`${kind} server exited with ${code}`)));
    lines.on("line", (line) => {
      const match = /listening on (\S+)/.exec(line);
      if (match) resolve(match[1]);
    });
  });
  return { url, stop: () => child.kill("SIGKILL") };
}

/** One measure against `url` for `seconds`: creates/s (`creates.lua`) or tasks followed to their
 * outcome per second (`tasks.lua`), by wrk, or by `server-load` (tests/fixtures) when
 * $SERVER_LOAD names it (CI's smoke, which has no wrk). A failed request fails the run. */
function measure(script, url, seconds) {
  if (process.env.SERVER_LOAD) {
    const which = script === "creates.lua" ? "creates" : "e2e";
    const args = [url, which, "--connections", String(CONNECTIONS), "--seconds", String(seconds), "--tool", "noop", "--arguments", "{}"];
    const { rate, bad } = JSON.parse(execFileSync(process.env.SERVER_LOAD, args, { encoding: "utf8" }).trim().split("\n").at(-1));
    if (bad > 0) throw new Error(`${which} against ${url}: ${bad} failed requests`);
    return rate;
  }
  const out = execFileSync("wrk", ["-t", "1", "-c", String(CONNECTIONS), "-d", `${seconds}s`, "-s", join(here, script), url], { encoding: "utf8" });
  const line = out.split("\n").find((l) => l.startsWith("RESULT "));
  const fields = Object.fromEntries(line.slice(7).split(" ").map((kv) => kv.split("=")).map(([k, v]) => [k, Number(v)]));
  if (fields.bad > 0) throw new Error(`${script} against ${url}: ${fields.bad} bad responses`);
  return (fields.created ?? fields.completed) / fields.seconds;
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const figures = Object.fromEntries(KINDS.map((k) => [k, { creates: [], tasks: [] }]));
for (let round = 0; round < ROUNDS; round++) {
  for (const kind of KINDS) {
    const server = await start(kind);
    try {
      measure("creates.lua", server.url, WARMUP_SECONDS); // JIT, connections, the store's first pages
      figures[kind].creates.push(measure("creates.lua", server.url, SECONDS));
      figures[kind].tasks.push(measure("tasks.lua", server.url, SECONDS));
    } finally {
      server.stop();
    }
  }
}

const base = { creates: median(figures.baseline.creates), tasks: median(figures.baseline.tasks) };
console.log(
  `TypeScript task servers, loopback HTTP, ${process.env.SERVER_LOAD ? "server-load" : "wrk -t1"} -c${CONNECTIONS}, ${WARMUP_SECONDS}s warm-up, ${SECONDS}s runs, median of ${ROUNDS}`,
);
console.log(`${"server".padEnd(42)} ${"creates/s".padStart(10)} ${"ratio".padStart(6)} ${"tasks/s".padStart(10)} ${"ratio".padStart(6)}`);
for (const kind of KINDS) {
  const creates = median(figures[kind].creates);
  const tasks = median(figures[kind].tasks);
  console.log(
    `${LABELS[kind].padEnd(42)} ${creates.toFixed(0).padStart(10)} ${(creates / base.creates).toFixed(2).padStart(6)} ${tasks.toFixed(0).padStart(10)} ${(tasks / base.tasks).toFixed(2).padStart(6)}`,
  );
}
