/**
 * Task runs without an SDK exchange. A task's tool otherwise runs in an internal exchange with the
 * SDK's HTTP handler: a server from the factory, a transport, a `Request` and a `Response` per
 * task, kept for as long as the tool runs (58 KB of heap per task with the fixture's 8 tools).
 *
 * - **A tool that takes no context** (`runsDirect`) runs its callback on a server the factory made
 *   (one long-lived one when the factory reads no request context), through the same steps as
 *   the SDK's own `tools/call` handler (2.x): the tool looked up in the server's registry, its
 *   input validated against its schema (`validateToolInput`), the callback run
 *   (`executeToolHandler`), its output validated (`validateToolOutput`), every error but a
 *   `ProtocolError` made the SDK's `isError` result (`createToolError`), the result projected for
 *   the 2026-07-28 wire (`projectCallToolResult`) and checked as a `CallToolResult` (the spec
 *   schema the SDK exports). Nothing is held for the task but its own work: the SDK's
 *   per-request context, which such a tool cannot see, is never made. Core has already checked
 *   the call's `_meta` envelope and parameters when it created the task.
 * - **A tool that takes `ctx`**, when the factory declares no parameter, runs through the SDK's
 *   own dispatch on that one long-lived server, connected to a `DirectTransport`: the SDK builds
 *   the tool's context per call from the task's message, `Request` and `authInfo`, as for an HTTP
 *   request, and keeps none of it on the server once the call ends. What is shared is the server
 *   (its registry, schemas and handlers), which such a factory makes the same for every request.
 *   A factory that reads the request context (`(ctx) => ...`) may make a different server per
 *   caller: its tools that take `ctx` keep the exchange.
 *
 * The SDK keeps the steps above on `McpServer` as TypeScript-private members, and marks an
 * instance as serving the 2026-07-28 era with a package-internal setter (of
 * `_negotiatedProtocolVersion`). They are used only after `directSupported` found every one;
 * otherwise every task runs through the exchange, as before. `test/direct.test.mjs` fails if
 * @modelcontextprotocol/server changes them, and compares every path's outcomes with the
 * exchange's.
 */

import {
  type AuthInfo,
  type CallToolResult,
  type JSONRPCMessage,
  McpServer,
  type MessageExtraInfo,
  ProtocolError,
  ProtocolErrorCode,
  type Server,
  type Transport,
  isInputRequiredResult,
  specTypeSchemas,
} from "@modelcontextprotocol/server";

/** The tool as the SDK's registry keeps it (2.x), as much as the choice of path reads. */
interface RegisteredTool {
  enabled?: boolean;
  inputSchema?: unknown;
  handler?: unknown;
  scopeChallenge?: unknown;
  outputSchemaJson?: Record<string, unknown>;
  executor?: (args: unknown, ctx: unknown) => Promise<unknown>;
}

/** A JSON-RPC request as the SDK reads it. */
export interface CallMessage {
  jsonrpc?: string;
  id?: unknown;
  method: string;
  params?: { name?: unknown } & Record<string, unknown>;
}

/** The members of a 2.x `McpServer` the direct run calls. */
interface ToolSteps {
  _registeredTools: Record<string, RegisteredTool | undefined>;
  validateToolInput(tool: RegisteredTool, args: unknown, name: string): Promise<unknown>;
  executeToolHandler(tool: RegisteredTool, args: unknown, ctx: unknown): Promise<unknown>;
  validateToolOutput(tool: RegisteredTool, result: unknown, name: string): Promise<void>;
  createToolError(message: string): CallToolResult;
}

/** What a direct run answers: the JSON-RPC `result` or `error` the SDK's exchange would have. */
export type DirectAnswer = { result: unknown } | { error: { code: number; message: string; data?: unknown } };

/** A server whose tasks run without an exchange: ctx-free tools through `runDirect`, and (when
 * it is the factory's one long-lived server) tools that take `ctx` through the SDK's dispatch
 * over `transport`, connected on first use (`dispatcher`). */
export interface Direct {
  server: McpServer;
  /** `callsExecutorOnly(server)`, asked once. */
  executorOnly: boolean;
  transport?: Promise<DirectTransport | undefined>;
}

/**
 * An SDK transport with no wire, for tools that take `ctx` on the long-lived server: `call`
 * hands a `tools/call` to the SDK's own dispatch, which builds the tool's context from the
 * message and from what `call` passes with it (the task's `Request`, its `authInfo`), exactly
 * as for a request it read from HTTP, and answers it; nothing of one call's context is kept on
 * the server for another. Each call goes under an id of its own (callers' ids repeat: every
 * client may send `id: 1`), so `ctx.mcpReq.id` is that id, not the client's. Notifications the
 * tool sends have no reader (a task's run is not a stream a client reads) and are dropped.
 */
export class DirectTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;
  readonly #pending = new Map<number, (answer: JSONRPCMessage | undefined) => void>();
  #next = 0;

  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.onclose?.();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if ("id" in message && ("result" in message || "error" in message)) {
      const settle = this.#pending.get(message.id as number);
      if (settle !== undefined) {
        this.#pending.delete(message.id as number);
        settle(message);
      }
    }
  }

  /**
   * Hands `message` to the SDK's dispatch under a fresh id (set on `message`, which the call takes
   * over) and resolves to the server's answer: a `result` or an `error` response, or `undefined`
   * once `cancel` was called with that id. `started` is told the id before the SDK runs anything.
   */
  call(message: CallMessage, extra: MessageExtraInfo, started: (id: number) => void): Promise<JSONRPCMessage | undefined> {
    const id = ++this.#next;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, resolve);
      started(id);
      try {
        message.jsonrpc = "2.0";
        message.id = id;
        this.onmessage!(message as JSONRPCMessage, extra);
      } catch (error) {
        this.#pending.delete(id);
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }

  /**
   * Cancels the call `id` the SDK's own way (`notifications/cancelled`, which fires the tool's
   * `ctx.mcpReq.signal`; the SDK then answers nothing): its `call` resolves to `undefined`. A call
   * already answered is left as it is. A callback rather than an `AbortSignal` per call: a
   * signal with a listener costs a task ~0.7 KB of heap for as long as its tool runs.
   */
  cancel(id: number, reason: string): void {
    const settle = this.#pending.get(id);
    if (settle !== undefined) {
      this.#pending.delete(id);
      this.onmessage?.({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id, reason } });
      settle(undefined);
    }
  }
}

/** `direct`'s server connected to a `DirectTransport` (once), or `undefined` when it serves
 * elsewhere already. */
export function dispatcher(direct: Direct, revision: string): Promise<DirectTransport | undefined> {
  direct.transport ??= (async () => {
    const inner = direct.server.server as unknown as { _negotiatedProtocolVersion?: string; transport?: unknown };
    if (inner.transport !== undefined) {
      return undefined;
    }
    const transport = new DirectTransport();
    await direct.server.connect(transport);
    inner._negotiatedProtocolVersion = revision;
    return transport;
  })();
  return direct.transport;
}

/** Where `server.ts` keeps the SDK's own `McpServer.prototype.executeToolHandler` when it wraps it. */
export const SDK_EXECUTE_TOOL_HANDLER: unique symbol = Symbol.for("mcp-tasks/server.sdkExecuteToolHandler");

/** What the SDK's `executeToolHandler` is (2.4.0): a call of the tool's executor and nothing else. */
const EXECUTOR_ONLY = /^async executeToolHandler\(tool, args, ctx\) \{\s*return tool\.executor\(args, ctx\);\s*\}$/;

/**
 * Whether running `server`'s tools through `executeToolHandler` would only call their executor:
 * the SDK's method, unchanged (read from its source), not overridden by a subclass or on the
 * instance. The direct run then calls the executor itself, one frame less held for as long as the
 * tool runs.
 */
export function callsExecutorOnly(server: McpServer): boolean {
  const prototype = McpServer.prototype as unknown as Record<PropertyKey, unknown>;
  const sdk = prototype[SDK_EXECUTE_TOOL_HANDLER];
  return (
    typeof sdk === "function" &&
    EXECUTOR_ONLY.test(Function.prototype.toString.call(sdk)) &&
    Object.getPrototypeOf(server) === McpServer.prototype &&
    !Object.hasOwn(server, "executeToolHandler")
  );
}

/** Whether the installed SDK has every member the direct run reads (checked once). */
let supported: boolean | undefined;

function directSupported(product: McpServer): boolean {
  if (supported === undefined) {
    const steps = product as unknown as Partial<Record<keyof ToolSteps, unknown>>;
    supported =
      typeof steps._registeredTools === "object" &&
      steps._registeredTools !== null &&
      typeof steps.validateToolInput === "function" &&
      typeof steps.executeToolHandler === "function" &&
      typeof steps.validateToolOutput === "function" &&
      typeof steps.createToolError === "function" &&
      typeof product.server.projectCallToolResult === "function" &&
      "_negotiatedProtocolVersion" in product.server &&
      typeof specTypeSchemas?.CallToolResult?.["~standard"]?.validate === "function";
  }
  return supported;
}

/**
 * Prepares `product` for direct runs, serving `revision`; `undefined` when it cannot be (a
 * low-level `Server`, an SDK without what the direct run reads).
 */
export function directServer(product: McpServer | Server, revision: string): Direct | undefined {
  if (!(product instanceof McpServer) || !directSupported(product)) {
    return undefined;
  }
  // What the SDK's HTTP entry does to each instance it serves a 2026-07-28 request with (its
  // internal `setNegotiatedProtocolVersion`): results are then projected as that era's.
  (product.server as unknown as { _negotiatedProtocolVersion?: string })._negotiatedProtocolVersion = revision;
  return { server: product, executorOnly: callsExecutorOnly(product) };
}

/**
 * Runs a call of tool `name` with `args` (a tool `runsDirect` accepted) on `direct`'s server, as
 * the SDK's handler would answer it; a `ProtocolError` the callback throws comes back as
 * `thrown` (it ends the task: the SDK's handler would make it an `isError` result, and the
 * exchange's wrapper in `server.ts` would record it). Never throws for what the tool does.
 */
export async function runDirect(direct: Direct, name: string, args: unknown): Promise<DirectAnswer | { thrown: ProtocolError }> {
  const steps = direct.server as unknown as ToolSteps;
  const tool = registeredTool(direct.server, name);
  if (tool === undefined || tool.enabled === false) {
    return { error: { code: ProtocolErrorCode.InvalidParams, message: `Tool ${name} ${tool === undefined ? "not found" : "disabled"}` } };
  }
  let result: unknown;
  let running = false; // a ProtocolError from the callback ends the task; one from validation does not
  try {
    const valid = await steps.validateToolInput(tool, args, name);
    running = true;
    // No context: the callback does not read one.
    result = await (direct.executorOnly ? tool.executor!(valid, undefined) : steps.executeToolHandler(tool, valid, undefined));
    running = false;
    await steps.validateToolOutput(tool, result, name);
    if (!isInputRequiredResult(result)) {
      result = direct.server.server.projectCallToolResult(result as CallToolResult, tool.outputSchemaJson);
    }
  } catch (error) {
    if (error instanceof ProtocolError && running) {
      return { thrown: error };
    }
    result = steps.createToolError(error instanceof Error ? error.message : String(error));
  }
  if (isInputRequiredResult(result)) {
    // The rule the SDK's input-required seam applies first (a ctx-free tool cannot read the
    // answers, so one that asks is rare; core asks the client and runs it again).
    const { inputRequests, requestState } = result as { inputRequests?: object; requestState?: unknown };
    if ((inputRequests == null || Object.keys(inputRequests).length === 0) && typeof requestState !== "string") {
      return {
        error: {
          code: ProtocolErrorCode.InternalError,
          message:
            "Handler for tools/call returned an input-required result with neither inputRequests nor requestState (every InputRequiredResult must include at least one of the two)",
        },
      };
    }
    return { result };
  }
  // The spec schema, through its Standard Schema face (synchronous); the message is what the
  // SDK's codec writes, its schema library's error (the issues as indented JSON).
  const checked = specTypeSchemas.CallToolResult["~standard"].validate(contentful(result));
  if (checked.issues !== undefined) {
    const message = `Invalid tools/call result: ${JSON.stringify(checked.issues, null, 2)}`;
    return { error: { code: ProtocolErrorCode.InvalidParams, message } };
  }
  return { result: checked.value };
}

/** A result without `content` (and of no other result family) gets an empty one, as the SDK's
 * `tools/call` seam gives it before checking the result. */
function contentful(value: unknown): unknown {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return value;
  }
  const record = value as Record<string, unknown>;
  if (record.content !== undefined || ["task", "inputRequests", "requestState"].some((key) => key in record)) {
    return value;
  }
  return { ...record, content: [] };
}

/** `name` in the server's registry (`undefined` when absent). */
function registeredTool(product: McpServer, name: string): RegisteredTool | undefined {
  const registry = (product as unknown as { _registeredTools: Record<string, RegisteredTool | undefined> })
    ._registeredTools;
  return Object.hasOwn(registry, name) ? registry[name] : undefined;
}

/** Whether a task of `name` may run directly on `product` (`runDirect`): a tool `runsShared`
 * accepts whose callback declares no context parameter. */
export function runsDirect(product: McpServer, name: string): boolean {
  const tool = sharedTool(product, name);
  // The SDK calls the callback `(args, ctx)` when the tool has an input schema, else `(ctx)`.
  return tool !== undefined && declaresAtMost(tool.handler, tool.inputSchema === undefined ? 0 : 1);
}

/**
 * Whether a task of `name` may run without an exchange on a server shared by tasks: an enabled
 * tool with no scope challenge and no `x-mcp-header` parameter (the SDK's HTTP entry checks those
 * two against the HTTP request, which such a run does not have). Any other tool, an unknown one
 * included, runs through the exchange and gets the SDK's answer.
 */
export function runsShared(product: McpServer, name: string): boolean {
  return sharedTool(product, name) !== undefined;
}

/** The tool `name` of `product` when `runsShared` accepts it. */
function sharedTool(product: McpServer, name: string): RegisteredTool | undefined {
  const tool = registeredTool(product, name);
  if (tool === undefined || tool.enabled === false || tool.scopeChallenge !== undefined) {
    return undefined;
  }
  const schema = product.toolInputSchemaJson(name);
  return schema === undefined || !declaresMcpHeader(schema) ? tool : undefined;
}

/** Whether a tool's JSON input schema declares an `x-mcp-header` parameter, by schema object (the
 * SDK converts a tool's schema once and keeps it; this is asked for every task). */
function declaresMcpHeader(schema: object): boolean {
  let declares = mcpHeaderSchemas.get(schema);
  if (declares === undefined) {
    declares = JSON.stringify(schema).includes('"x-mcp-header"');
    mcpHeaderSchemas.set(schema, declares);
  }
  return declares;
}

const mcpHeaderSchemas = new WeakMap<object, boolean>();

/**
 * Whether `fn` declares at most `count` parameters, read from its source: `fn.length` stops
 * counting at the first parameter with a default value, and a rest parameter (`...args`) or
 * `arguments` may reach any argument, so both count as more. A function whose source cannot be
 * read (a bound or native one) is taken to declare more.
 */
export function declaresAtMost(fn: unknown, count: number): boolean {
  if (typeof fn !== "function") {
    return false;
  }
  let declared = declaredCounts.get(fn);
  if (declared === undefined) {
    declared = declaredParameters(fn);
    declaredCounts.set(fn, declared);
  }
  return declared <= count;
}

/** `declaredParameters` by function: it is asked for every task, and a source does not change. */
const declaredCounts = new WeakMap<object, number>();

/** How many parameters `fn`'s source declares; `Infinity` when any argument may be read. */
function declaredParameters(fn: object): number {
  const source = Function.prototype.toString.call(fn);
  if (source.includes("[native code]")) {
    return Infinity;
  }
  const params = parameterList(source);
  if (params === undefined || params.some((param) => param.startsWith("..."))) {
    return Infinity;
  }
  // An arrow function has no `arguments` of its own; any other kind may read its arguments so.
  const arrow = /^(async\s*)?(\(|[\w$]+\s*=>)/.test(source);
  if (!arrow && /\barguments\b/.test(source)) {
    return Infinity;
  }
  return params.length;
}

/** The top-level parameters of a function's source (trimmed, empty ones dropped), or
 * `undefined` when they cannot be found. */
function parameterList(source: string): string[] | undefined {
  const single = /^(?:async\s+)?([\w$]+)\s*=>/.exec(source);
  if (single !== null) {
    return [single[1]!];
  }
  const open = source.indexOf("(");
  if (open < 0) {
    return undefined;
  }
  const params: string[] = [];
  let depth = 0;
  let current = "";
  let quote: string | undefined;
  for (let i = open + 1; i < source.length; i++) {
    const c = source[i]!;
    if (quote !== undefined) {
      current += c;
      if (c === "\\") {
        current += source[++i] ?? "";
      } else if (c === quote) {
        quote = undefined;
      }
      continue;
    }
    if (c === '"' || c === "'" || c === "`") {
      quote = c;
    } else if (c === "(" || c === "[" || c === "{") {
      depth++;
    } else if (c === ")" || c === "]" || c === "}") {
      if (depth === 0) {
        params.push(current.trim());
        return params.filter((param) => param !== "" && !param.startsWith("/"));
      }
      depth--;
    } else if (c === "," && depth === 0) {
      params.push(current.trim());
      current = "";
      continue;
    }
    current += c;
  }
  return undefined;
}

/** The context the SDK's HTTP entry gives a factory, for a task's run. */
export function factoryContext(authInfo: AuthInfo | undefined, requestInfo: Request): {
  era: "modern";
  authInfo?: AuthInfo;
  requestInfo: Request;
} {
  return { era: "modern", ...(authInfo !== undefined && { authInfo }), requestInfo };
}
