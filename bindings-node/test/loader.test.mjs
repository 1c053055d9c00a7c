// The package's native loader (native.cjs, napi-rs's standard one) picks the right platform
// package for every platform, architecture and libc the release builds: simulated by running the
// loader with a stand-in `process` and `require`, so every target is checked on this machine.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import vm from "node:vm";

const source = readFileSync(new URL("../native.cjs", import.meta.url), "utf8");
const packageJson = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));

/** What the loader requires on `platform`/`arch` with `libc` ("gnu", "musl" or none), with
 * only the platform packages in `installed` present (no module built beside the loader). */
function load(platform, arch, libc, installed, required = []) {
  const fakeRequire = (id) => {
    required.push(id);
    if (id === "fs") {
      return {
        readFileSync: (path) => {
          if (path === "/usr/bin/ldd" && libc !== undefined) return libc === "musl" ? "musl libc (x86_64)" : "GNU C Library";
          throw Object.assign(new Error(`ENOENT: ${path}`), { code: "ENOENT" });
        },
      };
    }
    const name = id.replace(/\/package\.json$/, "");
    if (installed.includes(name)) {
      return id.endsWith("/package.json") ? { version: packageJson.version } : { loadedFrom: name };
    }
    throw Object.assign(new Error(`Cannot find module '${id}'`), { code: "MODULE_NOT_FOUND" });
  };
  const fakeProcess = { platform, arch, env: {}, versions: { node: "22.0.0" }, report: undefined };
  const module = { exports: {} };
  vm.runInNewContext(`(function (require, module, exports, process) {${source}\n})`, { Error, Array, Object, JSON })(
    fakeRequire,
    module,
    module.exports,
    fakeProcess,
  );
  return { binding: module.exports, required };
}

// Every release target (package.json's napi.targets) and the package its loader must pick.
const TARGETS = {
  "x86_64-unknown-linux-gnu": ["linux", "x64", "gnu", "mcp-tasks-linux-x64-gnu"],
  "aarch64-unknown-linux-gnu": ["linux", "arm64", "gnu", "mcp-tasks-linux-arm64-gnu"],
  "x86_64-unknown-linux-musl": ["linux", "x64", "musl", "mcp-tasks-linux-x64-musl"],
  "aarch64-unknown-linux-musl": ["linux", "arm64", "musl", "mcp-tasks-linux-arm64-musl"],
  "x86_64-apple-darwin": ["darwin", "x64", undefined, "mcp-tasks-darwin-x64"],
  "aarch64-apple-darwin": ["darwin", "arm64", undefined, "mcp-tasks-darwin-arm64"],
  "x86_64-pc-windows-msvc": ["win32", "x64", undefined, "mcp-tasks-win32-x64-msvc"],
};

test("the release targets are exactly the ones the loader is checked for", () => {
  assert.deepEqual([...packageJson.napi.targets].sort(), Object.keys(TARGETS).sort());
});

for (const [target, [platform, arch, libc, expected]] of Object.entries(TARGETS)) {
  test(`${platform}/${arch}${libc ? `/${libc}` : ""} (${target}) loads ${expected}`, () => {
    const every = Object.values(TARGETS).map((t) => t[3]);
    const { binding, required } = load(platform, arch, libc, every);
    assert.equal(binding.loadedFrom, expected, `required: ${required.join(", ")}`);
    // The module built beside the loader (a checkout) is tried before the package.
    const local = `./${expected.replace("mcp-tasks-", "mcp-tasks.")}.node`;
    assert.ok(required.indexOf(local) >= 0 && required.indexOf(local) < required.indexOf(expected), required.join(", "));
  });
}

test("a platform without its package is a clear error, and no other platform's package is taken", () => {
  const required = [];
  assert.throws(() => load("linux", "x64", "musl", ["mcp-tasks-linux-x64-gnu"], required), /Cannot find native binding/);
  assert.ok(required.includes("mcp-tasks-linux-x64-musl"), required.join(", "));
  assert.ok(!required.includes("mcp-tasks-linux-x64-gnu"), "a musl system never loads the glibc build");
});

test("each platform package (npm/, from `napi create-npm-dirs`) is the one its loader asks for", () => {
  for (const [platform, arch, libc, expected] of Object.values(TARGETS)) {
    const dir = expected.replace("mcp-tasks-", "");
    const pkg = JSON.parse(readFileSync(new URL(`../npm/${dir}/package.json`, import.meta.url), "utf8"));
    assert.equal(pkg.name, expected);
    assert.equal(pkg.version, packageJson.version, `${expected} is released with the package`);
    assert.equal(pkg.main, `mcp-tasks.${dir}.node`);
    assert.deepEqual([pkg.os, pkg.cpu], [[platform], [arch]]);
    // npm names the GNU C library "glibc".
    assert.deepEqual(pkg.libc, libc === undefined ? undefined : [libc === "gnu" ? "glibc" : libc]);
  }
});
