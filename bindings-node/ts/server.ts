/**
 * mcp-tasks for TypeScript servers: the MCP tasks extension (`io.modelcontextprotocol/tasks`,
 * SEP-2663, MCP 2026-07-28) next to an `McpServer` of `@modelcontextprotocol/server` 2.x.
 *
 * You keep registering tools, resources and prompts on the SDK. `TasksServer.handler(factory)`
 * wraps the SDK's own `createMcpHandler(factory)`: every request goes first to the Rust core's
 * dispatcher, which answers the extension's traffic (`tasks/get`, `tasks/update`,
 * `tasks/cancel`, `subscriptions/listen` with `taskIds`) and decides each `tools/call` by the
 * tool's mode. A call that becomes a task is created durably in the store before the answer;
 * the tool then runs in the background through the SDK (its input validation, its context), and
 * its result or error ends the task. Everything else is the SDK's to serve, unchanged.
 */

import { AsyncLocalStorage } from "node:async_hooks";
import type { IncomingMessage, ServerResponse } from "node:http";

import {
  type AuthInfo,
  type CreateMcpHandlerOptions,
  type McpHttpHandler,
  type McpRequestContext,
  McpServer,
  ProtocolError,
  type Server,
  createMcpHandler,
} from "@modelcontextprotocol/server";

import type * as NativeModule from "../native.js";
import { mapped, mappedSync } from "./errors.js";
import { native } from "./native.js";

/** How a tool's calls run: never a task, a task when the client declared the extension, or
 * only as a task (a non-declaring client gets -32021). */
export type TaskMode = "forbidden" | "optional" | "required";

/** An MRTR round asked before any task exists (`resultType: "input_required"`). */
export interface InputRequired {
  /** What to ask: key -> input request (`{method, params}`). */
  inputRequests: Record<string, unknown>;
  /** What to get back on the retry (any JSON). It travels to the client as `requestState`,
   * sealed by the core (HMAC, bound to the caller and the tool, expiring), and comes back to
   * `prepare` as `PrepareCall.state` only if unaltered. */
  state?: unknown;
}

/** A `tools/call` as `prepare` sees it. */
export interface PrepareCall {
  name: string;
  arguments: Record<string, unknown>;
  /** This round's answers, when the client retries an MRTR round. */
  inputResponses?: Record<string, unknown>;
  /** The `state` the previous round asked to get back, verified (a forged, altered, foreign
   * or expired `requestState` is refused with -32602 before `prepare` runs). */
  state?: unknown;
  /** The caller the task will be bound to. */
  principal: string;
}

/** How one tool runs as a task. */
export interface TaskToolConfig {
  /** Defaults to `optional`. */
  mode?: TaskMode;
  /** The task's lifetime: absent takes the server default, `null` is unlimited. */
  ttlMs?: number | null;
  /** The `pollIntervalMs` clients are told; absent takes the server default. */
  pollIntervalMs?: number;
  /**
   * The synchronous MRTR phase, run on every round before a task exists: return the input to
   * ask for, or nothing to create the task. The tool later reads the answers of the last round
   * in `ctx.mcpReq.inputResponses`. A thrown `ProtocolError` refuses the call with its code.
   */
  prepare?: (call: PrepareCall) => InputRequired | undefined | Promise<InputRequired | undefined>;
}

/** Who a request comes from, as `principal` sees it. */
export interface PrincipalInfo {
  /** What the caller's auth middleware validated (the same `authInfo` the SDK passes to tools). */
  authInfo?: AuthInfo;
  /** The HTTP request. */
  request: Request;
}

/** Options of `TasksServer.open`. Absent settings take the core's defaults. */
export interface TasksServerOptions {
  /**
   * Where tasks live: `sqlite:///path/to/tasks.db` (the default is `sqlite:///mcp-tasks.db`:
   * every write is in the store's redo log before it is acknowledged; add `?durability=full` to
   * also survive power loss), `memory://`, or `postgres://user:pass@host/db` (shared by many
   * workers behind a load balancer).
   */
  store?: string;
  /** Per tool: its mode, or its full configuration. */
  tools?: Record<string, TaskMode | TaskToolConfig>;
  /** The mode of tools not in `tools`; defaults to `forbidden`. */
  defaultMode?: TaskMode;
  /** The lifetime of tasks whose tool sets none; `null` is unlimited. */
  defaultTtlMs?: number | null;
  /** The `pollIntervalMs` of tasks whose tool sets none. */
  defaultPollIntervalMs?: number;
  /** How long an expired task stays readable before it is purged. */
  purgeGraceMs?: number;
  /** The largest request body read (bytes); a larger one is answered 413 before parsing. */
  maxBodyBytes?: number;
  /** The key sealing MRTR `requestState`: random per process by default; give every process
   * serving one endpoint the same key. */
  requestStateKey?: string;
  /**
   * The caller a task is bound to; only that caller can read, answer or cancel it. Defaults to
   * `client:{authInfo.clientId}`, or `anonymous` without auth. Returning `undefined` answers
   * 401.
   */
  principal?: (info: PrincipalInfo) => string | undefined;
  /** Tests and shared vectors only: a manual clock starting here (see `advanceClock`). */
  clockStartMs?: number;
  /** Tests and shared vectors only: sequential task ids `{prefix}-1`, `{prefix}-2`, ... */
  idPrefix?: string;
}

/** The running task, as its tool code sees it (from `currentTask()`). */
export interface CurrentTask {
  /** The task id the client polls. */
  readonly taskId: string;
  /** The caller the task is bound to. */
  readonly principal: string;
  /** Fires when the task is cancelled (`tasks/cancel`) or expires. The SDK's
   * `ctx.mcpReq.signal` fires then too. */
  readonly signal: AbortSignal;
  /** Sets the task's `statusMessage`, seen by `tasks/get` and listeners. */
  setStatus(message: string): Promise<void>;
  /**
   * Moves the task to `input_required` with these input requests (key -> `{method, params}`)
   * and resolves to the answers once `tasks/update` has given every one. Returning
   * `inputRequired(...)` from the tool does the same, then runs the tool again with the answers
   * in `ctx.mcpReq.inputResponses`, as an MRTR retry would.
   */
  requestInput(requests: Record<string, unknown>): Promise<Record<string, unknown>>;
}

/** One run of a task's tool through the SDK. */
interface Run {
  task: CurrentTask;
  /** A `ProtocolError` the tool threw (the SDK turns it into an `isError` result). */
  thrown?: ProtocolError;
}

const runs = new AsyncLocalStorage<Run>();

/** The task the calling tool code runs as, or `undefined` when it runs synchronously. */
export function currentTask(): CurrentTask | undefined {
  return runs.getStore()?.task;
}

/** What `TasksServer.handler` returns: the SDK handler's faces, in front of core. */
export interface TasksHandler {
  /** The web-standard face (`Request` -> `Response`): Hono's `c.req.raw`, Bun, Deno, Workers
   * on Node, Next route handlers. `authInfo` is what your auth middleware validated. */
  fetch(request: Request, options?: { authInfo?: AuthInfo }): Promise<Response>;
  /** The `node:http` / Express face: `http.createServer(handler.node)`, `app.post("/mcp",
   * handler.node)`. An Express `req.auth` (`AuthInfo`) is used as the auth info. */
  node(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** Stops the handler: in-flight SDK exchanges are aborted. Running tasks keep running. */
  close(): Promise<void>;
  /** The SDK handler (its `notify` and `bus` serve listens that name no tasks). */
  readonly sdk: McpHttpHandler;
}

type Native = typeof NativeModule;
type HttpReply = NativeModule.HttpReply;

/** A `Response` carrying a reply core built. */
function toResponse(reply: HttpReply): Response {
  const body = reply.body === "" ? null : reply.body;
  return new Response(body, { status: reply.status, headers: reply.headers });
}

/** The tasks extension for TypeScript servers: core's dispatcher and engine over one store. */
export class TasksServer {
  readonly #native: NativeModule.NativeServer;
  readonly #tools = new Map<string, TaskToolConfig>();
  readonly #principal: (info: PrincipalInfo) => string | undefined;
  readonly #running = new Set<Promise<void>>();

  private constructor(nativeServer: NativeModule.NativeServer, options: TasksServerOptions) {
    this.#native = nativeServer;
    this.#principal =
      options.principal ?? (({ authInfo }) => (native as Native).defaultPrincipal(authInfo?.clientId ?? null));
    for (const [name, config] of Object.entries(options.tools ?? {})) {
      this.configure(name, config);
    }
  }

  /** Opens the store and builds the server; throws `McpTaskError`s for bad options or a store
   * that does not open. */
  static async open(options: TasksServerOptions = {}): Promise<TasksServer> {
    const { tools: _tools, defaultMode, principal: _principal, maxBodyBytes, requestStateKey, ...engine } = options;
    const nativeServer = await mapped(() =>
      native.NativeServer.open(
        JSON.stringify(engine),
        defaultMode ?? "forbidden",
        maxBodyBytes ?? null,
        requestStateKey ?? null,
      ),
    );
    return new TasksServer(nativeServer, options);
  }

  /** Sets how `tool` runs as a task (a mode, or the full configuration). */
  configure(tool: string, config: TaskMode | TaskToolConfig): void {
    const full: TaskToolConfig = typeof config === "string" ? { mode: config } : config;
    mappedSync(() => this.#native.configure(tool, full.mode ?? "optional"));
    this.#tools.set(tool, full);
  }

  /** Tasks whose tool is still running in this process. */
  get running(): number {
    return this.#running.size;
  }

  /**
   * The HTTP handler serving `factory`'s servers with tasks. `options` go to the SDK's
   * `createMcpHandler` (for what it serves: `legacy`, `responseMode`, `bus`, ...).
   */
  handler(
    factory: (ctx: McpRequestContext) => McpServer | Server | Promise<McpServer | Server>,
    options: CreateMcpHandlerOptions = {},
  ): TasksHandler {
    const capabilities = JSON.parse(this.#native.capabilities()) as Record<string, Record<string, object>>;
    const wrapped = async (ctx: McpRequestContext): Promise<McpServer | Server> => {
      const product = await factory(ctx);
      const server = product instanceof McpServer ? product.server : product;
      if (ctx.era === "modern") {
        server.registerCapabilities(capabilities);
      }
      const run = runs.getStore();
      if (run !== undefined && product instanceof McpServer) {
        catchProtocolErrors(product, run);
      }
      return product;
    };
    const sdk = createMcpHandler(wrapped, options);
    const fetch = (request: Request, requestOptions?: { authInfo?: AuthInfo }): Promise<Response> =>
      this.#serve(sdk, request, requestOptions?.authInfo, undefined);
    const node = (req: IncomingMessage, res: ServerResponse): Promise<void> => this.#serveNode(sdk, req, res);
    return { fetch, node, close: () => sdk.close(), sdk };
  }

  /** Waits for the tools still running in this process (tests, graceful shutdown). */
  async drain(): Promise<void> {
    while (this.#running.size > 0) {
      await Promise.allSettled([...this.#running]);
    }
  }

  /** Stops the store's background sweeper. Tasks still running end `failed` at the next start
   * on the same store (SQLite), or by another worker's sweep (PostgreSQL). */
  close(): void {
    this.#native.close();
  }

  /** Tests and vectors: moves the manual clock (`clockStartMs`) forward. */
  advanceClock(ms: number): void {
    mappedSync(() => this.#native.advanceClock(ms));
  }

  /** Tests and vectors: runs one TTL sweep; resolves to `[expired, purged]`. */
  sweep(): Promise<number[]> {
    return mapped(() => this.#native.sweep());
  }

  async #serve(
    sdk: McpHttpHandler,
    request: Request,
    authInfo: AuthInfo | undefined,
    raw: { headers: string[]; body: Buffer | null } | undefined,
  ): Promise<Response> {
    const limit = this.#native.maxBodyBytes;
    const body = raw !== undefined ? raw.body : request.method === "POST" ? await readBounded(request, limit) : null;
    const headers = raw?.headers ?? [...request.headers].flat();
    const principal = this.#principal({ ...(authInfo !== undefined && { authInfo }), request });
    const handled = await mapped(() => this.#native.handle(request.method, headers, body, principal ?? null));
    if (handled.delegate) {
      const forwarded = new Request(request.url, {
        method: request.method,
        headers: request.headers,
        signal: request.signal,
        ...(body !== null && request.method !== "GET" && request.method !== "HEAD" && { body: new Uint8Array(body) }),
      });
      return sdk.fetch(forwarded, authInfo !== undefined ? { authInfo } : undefined);
    }
    const reply = handled.reply;
    if (reply != null) {
      return toResponse(reply);
    }
    const listen = handled.listen;
    if (listen != null) {
      return listenResponse(listen, request.signal);
    }
    const call = handled.call;
    if (call == null || body === null) {
      throw new Error("mcp-tasks: the native dispatcher decided nothing");
    }
    return this.#startTask(sdk, call, request, authInfo, body);
  }

  async #startTask(
    sdk: McpHttpHandler,
    call: NativeModule.NativeToolCall,
    request: Request,
    authInfo: AuthInfo | undefined,
    body: Buffer,
  ): Promise<Response> {
    const config = this.#tools.get(call.name) ?? {};
    if (config.prepare !== undefined) {
      let ask: InputRequired | undefined;
      try {
        ask = await config.prepare({
          name: call.name,
          arguments: JSON.parse(call.argumentsJson) as Record<string, unknown>,
          ...(call.inputResponsesJson != null && {
            inputResponses: JSON.parse(call.inputResponsesJson) as Record<string, unknown>,
          }),
          ...(call.stateJson != null && { state: JSON.parse(call.stateJson) as unknown }),
          principal: call.principal,
        });
      } catch (error) {
        const [code, message, data] = rpcError(error);
        return toResponse(mappedSync(() => call.error(code, message, data)));
      }
      if (ask !== undefined) {
        return toResponse(
          mappedSync(() =>
            call.inputRequired(
              JSON.stringify(ask.inputRequests),
              ask.state === undefined ? null : JSON.stringify(ask.state),
            ),
          ),
        );
      }
    }
    const options = {
      ...(config.ttlMs !== undefined && { ttlMs: config.ttlMs }),
      ...(config.pollIntervalMs !== undefined && { pollIntervalMs: config.pollIntervalMs }),
    };
    // Durable before the answer: the creation reply is sent only once the store has the task.
    const task = await mapped(() => call.createTask(JSON.stringify(options)));
    const message = JSON.parse(body.toString("utf8")) as { id: unknown; params: Record<string, unknown> };
    const running = runTask(sdk, task, call.principal, request, authInfo, message).finally(() => {
      this.#running.delete(running);
    });
    this.#running.add(running);
    return toResponse(task.creationReply);
  }

  async #serveNode(sdk: McpHttpHandler, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const abort = new AbortController();
    res.on("close", () => abort.abort());
    try {
      const limit = this.#native.maxBodyBytes;
      const method = req.method ?? "GET";
      // An Express body parser has drained the stream already: its parsed body stands in.
      const parsed = (req as { body?: unknown }).body;
      const body =
        method !== "POST"
          ? null
          : parsed !== undefined
            ? Buffer.from(JSON.stringify(parsed))
            : await readNodeBounded(req, limit);
      const url = `http://${req.headers.host ?? "localhost"}${req.url ?? "/"}`;
      const headers = new Headers();
      for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
        headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
      }
      const request = new Request(url, {
        method,
        headers,
        signal: abort.signal,
        ...(body !== null && { body: new Uint8Array(body) }),
      });
      const authInfo = (req as { auth?: AuthInfo }).auth;
      // Core sees the raw header pairs, so a repeated header is refused, not merged.
      const response = await this.#serve(sdk, request, authInfo, { headers: req.rawHeaders, body });
      if (method === "POST" && body === null) {
        // The rest of an oversized body was never read: the connection cannot carry another
        // request, so it closes after the 413 instead of being reused mid-body.
        res.setHeader("connection", "close");
      }
      await writeNode(response, res);
    } catch (error) {
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "text/plain" });
      }
      res.end(error instanceof Error ? error.message : String(error));
    }
  }
}

/** `[code, message, dataJson]` of an error thrown where a JSON-RPC error is answered. */
function rpcError(error: unknown): [number, string, string | null] {
  if (error instanceof ProtocolError) {
    return [error.code, error.message, error.data === undefined ? null : JSON.stringify(error.data)];
  }
  const kind = error instanceof Error ? error.name : typeof error;
  const text = error instanceof Error ? error.message : String(error);
  return [-32603, `tool ${kind}: ${text}`, null];
}

/**
 * Remembers a `ProtocolError` the tool throws while it runs as a task: the SDK turns every
 * thrown error into an `isError` result, which is right for other errors (the same result the
 * synchronous call gives), but a `ProtocolError` is the tool failing at the protocol level, so
 * the task ends `failed` with it. The SDK has no public hook for this; `executeToolHandler` is
 * the method its `tools/call` handler awaits (2.x), wrapped on this one instance only.
 */
function catchProtocolErrors(server: McpServer, run: Run): void {
  const target = server as unknown as { executeToolHandler?: (...args: unknown[]) => Promise<unknown> };
  const original = target.executeToolHandler;
  if (typeof original !== "function") {
    throw new Error("mcp-tasks/server needs @modelcontextprotocol/server 2.x (McpServer.executeToolHandler)");
  }
  target.executeToolHandler = async function (this: unknown, ...args: unknown[]): Promise<unknown> {
    try {
      return await original.apply(this, args);
    } catch (error) {
      if (error instanceof ProtocolError) {
        run.thrown = error;
      }
      throw error;
    }
  };
}

/**
 * Runs a task's tool through the SDK until it ends the task. Every round is one `tools/call`
 * exchange with the SDK handler, so the tool gets the SDK's validation and context; a round
 * that answers `input_required` moves the task to `input_required`, and the next round carries
 * the answers `tasks/update` gave. Never throws: whatever happens, the task ends terminal.
 */
async function runTask(
  sdk: McpHttpHandler,
  native: NativeModule.NativeTask,
  principal: string,
  request: Request,
  authInfo: AuthInfo | undefined,
  message: { id: unknown; params: Record<string, unknown> },
): Promise<void> {
  const abort = new AbortController();
  void native.cancelled().then((cancelled) => {
    if (cancelled) {
      abort.abort(new Error(`task ${native.taskId} was cancelled or expired`));
    }
  });
  const task: CurrentTask = {
    taskId: native.taskId,
    principal,
    signal: abort.signal,
    setStatus: (text) => mapped(() => native.setStatus(text)),
    requestInput: async (requests) =>
      JSON.parse(await mapped(() => native.requestInput(JSON.stringify(requests)))) as Record<string, unknown>,
  };
  const headers = new Headers(request.headers);
  headers.delete("content-length");
  let params = message.params;
  try {
    for (;;) {
      const run: Run = { task };
      const exchange = new Request(request.url, {
        method: "POST",
        headers,
        signal: abort.signal,
        body: JSON.stringify({ jsonrpc: "2.0", id: message.id, method: "tools/call", params }),
      });
      const response = await runs.run(run, () =>
        sdk.fetch(exchange, authInfo !== undefined ? { authInfo } : undefined),
      );
      if (abort.signal.aborted) {
        return; // cancelled or expired: the task is terminal already
      }
      const answer = (await response.json()) as {
        result?: Record<string, unknown>;
        error?: { code: number; message: string; data?: unknown };
      };
      if (run.thrown !== undefined) {
        const [code, text, data] = rpcError(run.thrown);
        await mapped(() => native.fail(code, text, data));
        return;
      }
      if (answer.error !== undefined) {
        const { code, message: text, data } = answer.error;
        await mapped(() => native.fail(code, text, data === undefined ? null : JSON.stringify(data)));
        return;
      }
      const result = answer.result ?? {};
      if (result.resultType === "input_required") {
        const answers = await task.requestInput((result.inputRequests ?? {}) as Record<string, unknown>);
        const { inputResponses: _old, requestState: _state, ...rest } = params;
        params = {
          ...rest,
          inputResponses: answers,
          ...(typeof result.requestState === "string" && { requestState: result.requestState }),
        };
        continue;
      }
      await mapped(() => native.complete(JSON.stringify(withoutExchangeMeta(result))));
      return;
    }
  } catch (error) {
    if (abort.signal.aborted) {
      return;
    }
    const kind = error instanceof Error ? error.name : typeof error;
    const text = error instanceof Error ? error.message : String(error);
    // The store may refuse too (the task ended meanwhile): nothing is left to do then.
    await native.failException(kind, text).catch(() => false);
  }
}

/** The SDK stamps its `serverInfo` on every result it answers, here on the internal exchange
 * that ran the tool: that stamp describes the exchange, not the tool's result, so the task's
 * result does not keep it (the Rust and Python servers store the tool's result as returned). */
function withoutExchangeMeta(result: Record<string, unknown>): Record<string, unknown> {
  const meta = result._meta as Record<string, unknown> | undefined;
  if (meta === undefined || !("io.modelcontextprotocol/serverInfo" in meta)) {
    return result;
  }
  const { "io.modelcontextprotocol/serverInfo": _stamp, ...rest } = meta;
  const { _meta: _all, ...body } = result;
  return Object.keys(rest).length > 0 ? { ...body, _meta: rest } : body;
}

/** The `text/event-stream` of a listen for tasks: the acknowledgement, each task state, then
 * the closing result, every event framed by core. */
function listenResponse(listen: NativeModule.NativeListen, signal: AbortSignal): Response {
  const encoder = new TextEncoder();
  let done = false;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(encoder.encode(listen.ack));
    },
    async pull(controller) {
      if (done) {
        return;
      }
      const event = await listen.next();
      if (signal.aborted) {
        done = true;
        controller.close();
        return;
      }
      if (event === null) {
        done = true;
        controller.enqueue(encoder.encode(listen.closeEvent));
        controller.close();
        return;
      }
      controller.enqueue(encoder.encode(event));
    },
    cancel() {
      done = true;
    },
  });
  return new Response(stream, {
    status: 200,
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
  });
}

/** The body of a fetch `Request`, or `null` when it is longer than `limit` bytes. */
async function readBounded(request: Request, limit: number): Promise<Buffer | null> {
  if (request.body === null) {
    return Buffer.alloc(0);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limit) {
      return null;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** The body of a `node:http` request, or `null` when it is longer than `limit` bytes. */
async function readNodeBounded(req: IncomingMessage, limit: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > limit) {
      return null;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** Writes a fetch `Response` to a `node:http` response, streaming its body; stops reading it
 * when the client goes away (a listen stream would otherwise wait for its next event). */
async function writeNode(response: Response, res: ServerResponse): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  res.writeHead(response.status, headers);
  if (response.body === null) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  const gone = new Promise<void>((resolve) => res.once("close", resolve));
  void gone.then(() => reader.cancel().catch(() => undefined));
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || res.destroyed) {
        break;
      }
      if (!res.write(value)) {
        await Promise.race([new Promise<void>((resolve) => res.once("drain", resolve)), gone]);
      }
    }
  } catch {
    // The body was cancelled because the client went away: nothing is left to write.
  } finally {
    res.end();
  }
}
