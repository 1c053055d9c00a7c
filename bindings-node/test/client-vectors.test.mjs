// The client vectors (tests/vectors/client) through TasksClient, polling and listening, each
// against the vector's scripted server: the client must end as the vector's `expect` says. A
// failing input handler is tried throwing and returning a number. Results keep their JSON kinds
// as far as JavaScript has them: numbers stay numbers (1 and 1.0 are one number there), -0.0
// stays -0, and an integer past 2^53 is an exact bigint. Every wait is bounded; no timing is
// asserted.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

import { TasksClient, McpTaskError, parseJson } from "../dist/index.js";
import { ROOT, scriptedServer } from "./servers.mjs";

const dir = join(ROOT, "tests", "vectors", "client");
const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
const BOUND_MS = 20_000;

/** Equal with JavaScript's kinds kept: -0 is not 0, a bigint is not a number. */
function sameJson(a, b) {
  if (typeof a !== typeof b) return false;
  if (typeof a === "number") return Object.is(a, b);
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  if (a !== null && typeof a === "object") {
    const keys = Object.keys(a);
    return b !== null && keys.length === Object.keys(b).length && keys.every((k) => sameJson(a[k], b[k]));
  }
  return a === b;
}

const bounded = (promise, what) =>
  Promise.race([
    promise,
    new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer within ${BOUND_MS} ms`)), BOUND_MS).unref()),
  ]);

function handler(vector, failing) {
  if (vector.input === "@fail") {
    return failing === "throws"
      ? async ({ key }) => {
          throw new RangeError(`no answer for ${key}`);
        }
      : async () => 5;
  }
  return async ({ key }) => vector.input?.[key];
}

function checkError(name, error, want, failing) {
  assert.ok(error instanceof McpTaskError, `${name}: ${error}`);
  assert.equal(error.name, want.class, `${name}: ${error.message}`);
  if (want.code !== undefined) assert.equal(error.code, want.code, name);
  if (want.reason !== undefined) {
    assert.equal(error.data?.reason, want.reason, `${name}: ${JSON.stringify(error.data)}`);
    if (want.reason === "input_handler_failed" && failing === "throws") {
      assert.ok(error.cause instanceof RangeError, `${name}: the cause is ${error.cause}`);
    }
  }
  for (const part of want.contains ?? []) assert.ok(error.message.includes(part), `${name}: ${error.message} lacks ${part}`);
}

test("kinds are compared strictly", () => {
  assert.ok(sameJson(parseJson('{"a":[1,1.0,-0.0,9007199254740993]}'), { a: [1, 1, -0, 9007199254740993n] }));
  assert.ok(!sameJson(-0, 0) && !sameJson(1n, 1));
});

for (const file of files) {
  for (const [notifications, failing] of [[false, "throws"], [true, "a-number"]]) {
    const vector = JSON.parse(readFileSync(join(dir, file), "utf8"));
    const name = `${vector.name} (${notifications ? "listen" : "poll"}, ${failing})`;
    test(`client vector ${name}`, async () => {
      // The expectations parsed as the client parses answers, so kinds compare alike.
      const expect = parseJson(JSON.stringify(vector.expect));
      const server = await scriptedServer(join(dir, file));
      const client = new TasksClient({ url: server.url, store: "memory://", notifications });
      client.onInputRequest(handler(vector, failing));
      try {
        const call = bounded(client.callTool(vector.tool, vector.arguments), name);
        if (expect.call_error) {
          await assert.rejects(call, (error) => (checkError(name, error, expect.call_error, failing), true));
        } else {
          const execution = await call;
          assert.equal(execution.kind, "task", name);
          const outcome = await bounded(execution.result(), name);
          if (expect.outcome) {
            // Parsed exactly: the expectation's text through the same reader.
            const want = parseJson(readFileSync(join(dir, file), "utf8")).expect.outcome;
            assert.ok(sameJson(outcome, want), `${name}: ${JSON.stringify(outcome, (_k, v) => (typeof v === "bigint" ? `${v}n` : v))}`);
          }
          if (expect.error) {
            await assert.rejects(execution.value(), (error) => (checkError(name, error, expect.error, failing), true));
          }
        }
        let methods = await server.log();
        for (let i = 0; i < 100 && !(expect.sent ?? []).every((m) => methods.includes(m)); i++) {
          await new Promise((r) => setTimeout(r, 20));
          methods = await server.log();
        }
        for (const method of expect.sent ?? []) assert.ok(methods.includes(method), `${name}: ${method} not sent: ${methods}`);
        for (const method of expect.not_sent ?? []) assert.ok(!methods.includes(method), `${name}: ${method} sent: ${methods}`);
        for (const [method, most] of Object.entries(expect.most ?? {})) {
          assert.ok(methods.filter((m) => m === method).length <= most, `${name}: ${methods}`);
        }
      } finally {
        await client.close();
        server.stop();
      }
    });
  }
}

test("a handler declaring two parameters is refused when it is set", () => {
  const client = new TasksClient({ url: "http://127.0.0.1:9/mcp", store: "memory://" });
  assert.throws(() => client.onInputRequest((request, extra) => extra), TypeError);
  assert.throws(() => client.onInputRequest(5), TypeError);
  client.onInputRequest(async () => undefined);
  client.onInputRequest(undefined);
});
