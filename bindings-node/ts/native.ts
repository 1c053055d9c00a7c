/** The private native module (napi-rs), loaded once for every entry point of the package. */

import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

import type * as NativeModule from "../native.js";

export const native: typeof NativeModule = createRequire(import.meta.url)(
  join(dirname(fileURLToPath(import.meta.url)), "..", `mcp-tasks.${process.platform}-${process.arch}-gnu.node`),
);
