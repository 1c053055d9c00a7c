// TasksClient over real loopback HTTP against the Rust host, the Python server and the
// TypeScript server, and over stdio against the Rust host and the Python server started as the
// client's child.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import {
  TasksClient,
  InvalidParamsError,
  McpTaskError,
  MissingCapabilityError,
  TaskCancelledError,
} from "../dist/index.js";
import { nodeServer, rustHost, pythonServer, rmcpServer, rustStdio, rmcpStdio, pythonStdio } from "./servers.mjs";

const text = (outcome) => {
  assert.equal(outcome.kind, "completed", JSON.stringify(outcome));
  return outcome.result.content[0].text;
};

const answers = async ({ key, method }) => {
  assert.equal(method, "elicitation/create");
  return { action: "accept", content: key === "user_name" ? { name: "Alice" } : { confirm: true } };
};

const servers = [
  ["Rust host", rustHost],
  ["Python server", pythonServer],
  ["TypeScript server", () => nodeServer()],
  ["rmcp server", rmcpServer],
  ["Rust host over stdio", async () => rustStdio()],
  ["rmcp server over stdio", async () => rmcpStdio()],
  ["Python server over stdio", async () => pythonStdio()],
];

for (const [name, startServer] of servers) {
  describe(`against the ${name}`, () => {
    let server;
    before(async () => {
      server = await startServer();
    });
    after(() => server?.stop());

    const client = (options = {}) => new TasksClient({ ...server.target, store: "memory://", ...options });

    test("polls a task to its result", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      const execution = await client({ notifications: false }).callTool("slow_compute", { seconds: 0.3, label: "a" });
      assert.equal(execution.kind, "task");
      assert.equal(execution.created.status, "working");
      assert.match(text(await execution.result()), /^Computed a in 0.3/);
    });

    test("follows notifications to completion", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      const execution = await client().callTool("slow_compute", { seconds: 0.3, label: "b" });
      const seen = [];
      for await (const state of execution.updates()) seen.push(state.status);
      assert.equal(seen.at(-1), "completed");
      assert.match(text(await execution.result()), /^Computed b/);
    });

    test("cancels a running task", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      const controller = new AbortController();
      const execution = await client().callTool("slow_compute", { seconds: 30 }, { signal: controller.signal });
      controller.abort();
      assert.deepEqual(await execution.result(), { kind: "cancelled" });
    });

    test("answers input_required through the handler", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      const execution = await client().onInputRequest(answers).callTool("confirm_delete", { filename: "x.txt" });
      assert.equal(text(await execution.result()), "Deleted x.txt");
    });

    test("an input request left open can be answered later", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      const execution = await client().callTool("confirm_delete", { filename: "y.txt" });
      for await (const state of execution.updates()) {
        if (state.status === "input_required") {
          const [key] = Object.keys(state.inputRequests);
          await assert.rejects(execution.answer("never-asked", {}), InvalidParamsError);
          await execution.answer(key, { action: "accept", content: { confirm: false } });
          break;
        }
      }
      assert.equal(text(await execution.result()), "Kept y.txt");
      // Nothing follows a finished task any more.
      await assert.rejects(execution.task.answer("no-such-key", {}), McpTaskError);
    });

    test("an MRTR round, then a task", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      const execution = await client().onInputRequest(answers).callTool("test_tool_with_task", {});
      assert.equal(execution.kind, "task");
      assert.match(text(await execution.result()), /Hello, Alice!/);
    });

    test("capabilities say what the handler answers: none declared, nothing asked", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      // The MRTR round would ask a form elicitation this client does not declare: -32021.
      const refused = await client({ capabilities: {} })
        .onInputRequest(answers)
        .callTool("test_tool_with_task", {})
        .then(() => undefined, (error) => error);
      assert.ok(refused instanceof MissingCapabilityError, String(refused));
      assert.deepEqual(refused.data.requiredCapabilities, { elicitation: { form: {} } });
      // The task's elicitation is refused the same way, and the tool does not catch it.
      const failed = await (await client({ capabilities: { roots: {} } }).callTool("confirm_delete", { filename: "z" })).result();
      assert.equal(failed.kind, "failed", JSON.stringify(failed));
      assert.equal(failed.error.code, -32021);
      // The client is built on first use: a capabilities value that is no object is refused there.
      await assert.rejects(client({ capabilities: ["roots"] }).callTool("greet", { name: "x" }), InvalidParamsError);
    });

    test("a protocol error fails the task; a tool error completes it", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      const c = client();
      const failed = await (await c.callTool("protocol_error_job", {})).result();
      assert.equal(failed.kind, "failed");
      assert.equal(failed.error.code, -32603);
      const toolError = await (await c.callTool("failing_job", {})).result();
      assert.equal(toolError.kind, "completed");
      assert.equal(toolError.result.isError, true);
    });

    test("a tool that never makes a task answers immediately", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      const execution = await client().callTool("greet", { name: "Ada" });
      assert.equal(execution.kind, "immediate");
      assert.equal(execution.task, undefined);
      assert.equal(execution.callToolResult.content[0].text, "Hello, Ada!");
      assert.equal(text(await execution.result()), "Hello, Ada!");
      const updates = [];
      for await (const state of execution.updates()) updates.push(state);
      assert.deepEqual(updates, []);
      // One face for both kinds: nothing to cancel, nothing to answer, the value at once.
      assert.equal(execution.taskId, null);
      execution.cancel();
      await assert.rejects(execution.answer("k", {}), InvalidParamsError);
      assert.equal((await execution.value()).content[0].text, "Hello, Ada!");
    });

    test("a cancelled task's value is a TaskCancelledError", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      const execution = await client().callTool("slow_compute", { seconds: 30 });
      assert.equal(execution.kind, "task");
      assert.equal(execution.taskId, execution.task.taskId);
      execution.cancel();
      await assert.rejects(execution.value(), (error) => {
        assert.ok(error instanceof TaskCancelledError, String(error));
        assert.ok(error instanceof McpTaskError);
        assert.match(error.message, /was cancelled/);
        return true;
      });
    });

    test("server errors carry their JSON-RPC code", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      const c = client();
      // Every server refuses an unknown tool alike (core decides before either SDK).
      await assert.rejects(c.callTool("no_such_tool", {}), (error) => {
        assert.ok(error instanceof InvalidParamsError, String(error));
        assert.equal(error.code, -32602);
        return true;
      });
    });

    test("resumes a task after the client process is killed", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      const dir = mkdtempSync(join(tmpdir(), "mcp-tasks-node-"));
      const store = `sqlite:///${join(dir, "client.db")}`;
      // Over stdio the server is the client's child and dies with it: it runs on a SQLite file, so
      // its next start reports the task it left unfinished as failed.
      const target = server.stdio
        ? (name.startsWith("Python") ? pythonStdio : rustStdio)(`sqlite://${join(dir, "server.db")}`).target
        : server.target;
      const child = spawn(process.execPath, [
        "--input-type=module",
        "-e",
        `import { TasksClient } from ${JSON.stringify(new URL("../dist/index.js", import.meta.url).href)};
         const client = new TasksClient({ ...${JSON.stringify(target)}, store: ${JSON.stringify(store)} });
         const execution = await client.callTool("slow_compute", { seconds: ${server.stdio ? 60 : 1.5}, label: "resumed" });
         console.log(execution.task.taskId);
         await new Promise(() => {});`,
      ], { stdio: ["ignore", "pipe", "inherit"] });
      const taskId = await new Promise((resolve) => child.stdout.once("data", (d) => resolve(String(d).trim())));
      child.kill("SIGKILL");
      await new Promise((resolve) => child.once("exit", resolve));

      const again = new TasksClient({ ...target, store });
      const resumed = await again.resumeAll();
      assert.deepEqual(resumed.map((task) => task.taskId), [taskId]);
      const outcome = await resumed[0].result();
      if (server.stdio) {
        assert.equal(outcome.kind, "failed", JSON.stringify(outcome));
        assert.match(outcome.error.message, /stopped|restart/);
      } else {
        assert.equal(text(outcome), "Computed resumed in 1.5s");
      }
      assert.deepEqual(await again.resumeAll(), []); // delivered once
      await again.close();
    });

    test("close ends the client; later calls fail", async (t) => {
      if (!server) return t.skip("no Python with mcp-tasks installed");
      const c = client();
      assert.equal((await c.callTool("greet", { name: "Ada" })).callToolResult.content[0].text, "Hello, Ada!");
      await c.close();
      await assert.rejects(c.callTool("greet", { name: "Ada" }), (error) => {
        assert.equal(error.name, "TransportError", String(error));
        assert.match(error.message, /closed/);
        return true;
      });
    });
  });
}

describe("stdio options", () => {
  test("env and cwd reach the child, and bad combinations are refused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-tasks-node-"));
    const script = `read line; printf '{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[{"type":"text","text":"%s %s"}]}}\\n' "$GREETING" "$(pwd)"; cat >/dev/null`;
    const c = new TasksClient({ command: "sh", args: ["-c", script], env: { GREETING: "hi" }, cwd: dir, store: "memory://" });
    const answer = await c.callTool("greet", {});
    assert.equal(answer.callToolResult.content[0].text, `hi ${realpathSync(dir)}`);
    await c.close();
    await assert.rejects(new TasksClient({ url: "http://127.0.0.1:1/mcp", command: "x" }).callTool("a", {}), (error) => {
      assert.ok(error instanceof InvalidParamsError, String(error));
      assert.match(error.message, /not both/);
      return true;
    });
    assert.throws(() => new TasksClient({}), TypeError);
  });

  test("a server that writes junk or dies is a clear error", async () => {
    const junk = new TasksClient({ command: "sh", args: ["-c", "read line; echo 'hello, not json'; sleep 5"], store: "memory://" });
    await assert.rejects(junk.callTool("greet", {}), /not JSON-RPC: hello, not json/);
    await junk.close();
    const dying = new TasksClient({ command: "sh", args: ["-c", "echo 'bad config' >&2; exit 3"], stderr: "capture", store: "memory://" });
    await assert.rejects(dying.callTool("greet", {}), /exit status: 3.*bad config/);
  });
});
