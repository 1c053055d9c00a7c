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

import { type IncomingMessage, type ServerResponse, createServer, type Server as HttpServer } from "node:http";
import type { Socket } from "node:net";

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
import {
  SDK_EXECUTE_TOOL_HANDLER,
  type CallMessage,
  type Direct,
  type DirectTransport,
  declaresAtMost,
  directServer,
  dispatcher,
  factoryContext,
  runDirect,
  runsDirect,
  runsShared,
} from "./direct.js";
import { mapped, mappedSync } from "./errors.js";
import * as otel from "./otel.js";
import { native } from "./native.js";

/** How a tool's calls run: never a task, a task when the client declared the extension, or
 * only as a task (a non-declaring client gets -32021). */
export type TaskMode = "forbidden" | "optional" | "required";

/** The content type of `TasksServer.metrics()`'s text, for a scrape's answer. */
export const METRICS_CONTENT_TYPE: string = native.METRICS_CONTENT_TYPE;

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
  /**
   * Makes the tool resumable: when the process running one of its tasks dies, the task runs
   * again (under the same task id, through the SDK as the first call did, up to `maxAttempts`
   * attempts in all) instead of failing, from the checkpoint its code saved
   * (`currentTask(ctx).checkpoint(value)`). Execution is at least once, so the tool must be
   * idempotent; completion stays exactly once.
   */
  maxAttempts?: number;
  /** The wait before the second attempt (each later one waits twice as long); core's default
   * when absent. */
  backoffMs?: number;
}

/** Who a request comes from, as `principal` sees it. */
export interface PrincipalInfo {
  /** What the caller's auth middleware validated (the same `authInfo` the SDK passes to tools). */
  authInfo?: AuthInfo;
  /** The HTTP request (built when first read: reading one header through `header` is cheaper). */
  request: Request;
  /** The value of the request header `name` (any case; the first when repeated), or `undefined`. */
  header(name: string): string | undefined;
}

/** Options of `TasksServer.open`. Absent settings take the core's defaults. */
export interface TasksServerOptions {
  /**
   * Where tasks live: `sqlite:///path/to/tasks.db` (the default is `sqlite://mcp-tasks.db`, in the
   * working directory: every write is in the store's redo log before it is acknowledged; add `?durability=full` to
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
  /**
   * The most live (`working` or `input_required`) tasks one caller may have: a call that would
   * create one more is answered -32010 (`QuotaExceededError`, `data.reason` `principal_quota`).
   * No cap by default; on PostgreSQL it counts every worker's tasks.
   */
  maxLiveTasksPerPrincipal?: number;
  /** The most live tasks of all callers together (`data.reason` `server_quota`); no cap by default. */
  maxLiveTasks?: number;
  /** On PostgreSQL: how long this worker's lease lasts (ms; core's default is 15 s), so how long
   * after it dies its tasks are failed, or resumed by another worker. */
  workerLeaseMs?: number;
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
  /**
   * Where task calls run: `"local"` (the default) runs them here, and also runs again the
   * resumable tasks a dead process left; `"workers"` makes a front-end that only accepts: each
   * task is stored with its call and answered, and worker processes run it (a `TasksServer`
   * with the same tools over the same PostgreSQL store, its `handler(...)` built; it need not
   * listen). Cancels, input requests and answers cross through the store.
   */
  execution?: "local" | "workers";
  /** Tests and shared vectors only: a manual clock starting here (see `advanceClock`). */
  clockStartMs?: number;
  /** Tests and shared vectors only: sequential task ids `{prefix}-1`, `{prefix}-2`, ... */
  idPrefix?: string;
}

/** The running task, as its tool code sees it (from `currentTask(ctx)`). */
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
  /** This run's attempt: 1 at first, 2 or more when a resumable tool runs again after the
   * process running it died. */
  readonly attempt: number;
  /** The checkpoint saved last (by this attempt or an earlier one), or `undefined`. */
  readonly savedCheckpoint: unknown;
  /** Saves `value` (JSON, 64 KiB at most) durably with the task, for a later attempt to resume
   * from if this one is cut short. */
  checkpoint(value: unknown): Promise<void>;
}

/** One run of a tool through the SDK: a task's (with its task), or a synchronous call's. */
interface Run {
  task?: CurrentTask;
  /** A `ProtocolError` the tool threw (the SDK turns it into an `isError` result). */
  thrown?: ProtocolError;
}

/** Where the request a tool's run is handed keeps that run: the SDK hands that same request to
 * the factory (`requestInfo`) and to the tool (`ctx.http.req`). A property of the request the
 * run made, not an `AsyncLocalStorage`, which would slow every promise of the process, nor a
 * `WeakMap`, whose entries (one per running task) the collector marks as ephemerons, a pass
 * of their own on every full collection. Private to this copy of the module. */
const RUN = Symbol("mcp-tasks/server.run");

/** A request that carries its run (`RUN`). */
type RunRequest = Request & { [RUN]?: Run };

/** `request`, marked as the request of `run`. */
function carrying(request: Request, run: Run): Request {
  (request as RunRequest)[RUN] = run;
  return request;
}

/** The run of a tool's context (its last argument), found by the request the run made. */
function runOf(ctx: ToolContext | undefined): Run | undefined {
  return (ctx?.http?.req as RunRequest | undefined)?.[RUN];
}

/** As much of a tool's context as finding its run reads. */
type ToolContext = { http?: { req?: Request } };

/** The task the tool runs as, from the tool's context (its last argument), or `undefined` when
 * it runs synchronously:
 * `server.registerTool("render", config, async (args, ctx) => { currentTask(ctx)?.setStatus(...) })`. */
export function currentTask(ctx: { http?: { req?: Request } } | undefined): CurrentTask | undefined {
  return runOf(ctx)?.task;
}

/**
 * The bounds on a `node:http` server's connections, so slow or hostile clients cannot hold it
 * down (the same as the Rust host's and the Python server's; defaults in `DEFAULT_SERVE_LIMITS`,
 * from core).
 */
export interface ServeLimits {
  /** How long a request header may take to arrive (default 10 s): `headersTimeout`. */
  headerReadTimeoutMs: number;
  /** How long its body may take after it (default 30 s): `requestTimeout` is the two together. */
  bodyReadTimeoutMs: number;
  /** How long a connection may stay open between requests (default 60 s): `keepAliveTimeout`. */
  idleTimeoutMs: number;
  /** The most connections open at once (default: the descriptor limit less a reserve). At the
   * cap the oldest connection that completed no request is closed to make room, so a legitimate
   * request is served during a flood (`maxConnections` would refuse the new one instead). */
  maxConnections: number;
  /** The largest request header section (default 64 KiB): `maxHeaderSize`, set only when the
   * server is created (`nodeServer()`). */
  maxHeaderBytes: number;
  /** How long a connection's peer may take none of the bytes waiting to be sent (default 30 s:
   * a listen stream's reader that stopped reading, once the socket's buffers are full) before
   * the connection is closed. The reader gets what was buffered, then the end in the middle of
   * its response; other connections are written meanwhile as ever. */
  writeStallTimeoutMs: number;
}

/** Core's default `ServeLimits` for this process. */
export const DEFAULT_SERVE_LIMITS: Readonly<ServeLimits> = Object.freeze(
  JSON.parse((native as typeof NativeModule).serveLimits()) as ServeLimits,
);

/**
 * A `node:http` server for `node` (a `TasksHandler.node`) with `limits` (core's defaults for
 * what is left out): header, body and idle timeouts, a header size limit, a connection cap that
 * sheds, and the table's JSON-RPC answer (408, 431, 400) where `node:http` refuses a request
 * before it reaches core, sent before a lingering close so the client reads it instead of a reset.
 */
export function createNodeServer(
  node: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>,
  limits: Partial<ServeLimits> = {},
): HttpServer {
  const l = { ...DEFAULT_SERVE_LIMITS, ...limits };
  const server = createServer(
    {
      maxHeaderSize: l.maxHeaderBytes,
      // How often node:http looks for late headers and bodies (its default, 30 s, would let a
      // half-sent header live up to 40 s).
      connectionsCheckingInterval: Math.max(100, Math.min(1_000, l.headerReadTimeoutMs)),
    },
    (req, res) => void node(req, res),
  );
  protectNodeServer(server, l);
  return server;
}

/** The connections of a protected server, oldest first, with whether each has had a request
 * and is serving one, and for a stalled write, the bytes the kernel had taken and since when
 * that has not grown. */
type Tracked = Map<Socket, { requested: boolean; busy: boolean; taken: number; stalledSince: number | undefined }>;

/**
 * Applies `limits` to a `node:http` server made elsewhere (Express's `app.listen`, your own
 * `createServer`): the timeouts, the shedding cap and core's answers to what `node:http` refuses.
 * `maxHeaderBytes` can only be set when a server is created: use `createNodeServer`, or pass
 * `maxHeaderSize` yourself.
 */
export function protectNodeServer(server: HttpServer, limits: Partial<ServeLimits> = {}): void {
  const l = { ...DEFAULT_SERVE_LIMITS, ...limits };
  server.headersTimeout = l.headerReadTimeoutMs;
  server.requestTimeout = l.headerReadTimeoutMs + l.bodyReadTimeoutMs;
  server.keepAliveTimeout = l.idleTimeoutMs;
  const limitsJson = JSON.stringify(l);
  const open: Tracked = new Map();
  server.on("connection", (socket: Socket) => {
    if (open.size >= l.maxConnections && !shedOne(open)) {
      socket.destroy(); // every connection is serving a request: this one waits its turn elsewhere
      return;
    }
    open.set(socket, { requested: false, busy: false, taken: 0, stalledSince: undefined });
    socket.once("close", () => open.delete(socket));
  });
  // Stalled writes are looked for by one timer for all connections (a timer per write would
  // cost more than the look: 10,000 listen streams take well under a millisecond).
  const every = Math.max(50, Math.min(1_000, l.writeStallTimeoutMs / 4));
  const stalls = setInterval(() => closeStalled(open, l.writeStallTimeoutMs), every).unref();
  server.once("close", () => clearInterval(stalls));
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const entry = open.get(req.socket);
    if (entry !== undefined) {
      entry.requested = entry.busy = true;
      res.once("close", () => (entry.busy = false));
    }
  });
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Socket) => {
    const kind =
      error.code === "HPE_HEADER_OVERFLOW"
        ? "headers_too_large"
        : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? open.get(socket)?.busy
            ? "body_timeout"
            : "header_timeout"
          : error.code === "ECONNRESET" || error.code === "EPIPE"
            ? null
            : "malformed";
    if (kind === null || !socket.writable) {
      socket.destroy();
      return;
    }
    // Core writes the whole response (an empty 400 for bytes that are no HTTP request).
    socket.end((native as typeof NativeModule).refusalResponse(kind, limitsJson));
    // A lingering close: what the client still sends is read and dropped for a moment (not fed
    // to the failed parser, which would close at once), so its kernel does not answer our close
    // with a reset that loses the reply.
    socket.removeAllListeners("data");
    socket.on("data", () => {});
    socket.resume();
    setTimeout(() => socket.destroy(), 2_000).unref();
  });
}

/** Closes every connection whose peer has taken none of the bytes waiting to be sent for
 * `boundMs`. The kernel has taken what was handed to the socket (`bytesWritten`) less what is
 * still buffered (`writableLength`); while something is buffered and that does not grow, the
 * peer is not reading. */
function closeStalled(open: Tracked, boundMs: number): void {
  const now = performance.now();
  for (const [socket, entry] of open) {
    const waiting = socket.writableLength;
    if (waiting === 0) {
      entry.stalledSince = undefined;
      continue;
    }
    const taken = socket.bytesWritten - waiting;
    if (entry.stalledSince === undefined || taken !== entry.taken) {
      entry.taken = taken;
      entry.stalledSince = now;
    } else if (now - entry.stalledSince >= boundMs) {
      open.delete(socket);
      socket.destroy();
    }
  }
}

/** Closes the oldest connection that has had no request and is not serving one (a flood's
 * half-sent header), else the oldest idle one; false when every connection is serving. */
function shedOne(open: Tracked): boolean {
  let idle: Socket | undefined;
  for (const [socket, entry] of open) {
    if (!entry.requested && !entry.busy) {
      open.delete(socket);
      socket.destroy();
      return true;
    }
    if (!entry.busy && idle === undefined) {
      idle = socket;
    }
  }
  if (idle !== undefined) {
    open.delete(idle);
    idle.destroy();
    return true;
  }
  return false;
}

/** What `TasksServer.handler` returns: the SDK handler's faces, in front of core. */
export interface TasksHandler {
  /** The web-standard face (`Request` -> `Response`): Hono's `c.req.raw`, Bun, Deno, Workers
   * on Node, Next route handlers. `authInfo` is what your auth middleware validated. */
  fetch(request: Request, options?: { authInfo?: AuthInfo }): Promise<Response>;
  /** The `node:http` / Express face: `http.createServer(handler.node)`, `app.post("/mcp",
   * handler.node)`. An Express `req.auth` (`AuthInfo`) is used as the auth info. */
  node(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** A `node:http` server for `node`, with core's bounds on its connections (`createNodeServer`):
   * `handler.nodeServer().listen(8080)`. */
  nodeServer(limits?: Partial<ServeLimits>): HttpServer;
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

/** Core's principal of a caller without auth, asked once. */
const ANONYMOUS: string = (native as Native).defaultPrincipal(null);

/** Core's default principal: `client:{clientId}`, or `anonymous` without auth. */
function defaultPrincipal(clientId: string | undefined): string {
  return clientId === undefined ? ANONYMOUS : (native as Native).defaultPrincipal(clientId);
}

/** The request headers core reads; only these cross into the native module. */
const READ_HEADERS = new Set((native as Native).readHeaders());

/** One HTTP request as either face received it, with what is costly built only when needed. */
interface Incoming {
  method: string;
  url: string;
  /** Raw header pairs, flat (`[name, value, ...]`). */
  rawHeaders: string[];
  /** The body read (at most the limit); `null` when over it, or for a method without one. */
  body: Buffer | null;
  authInfo: AuthInfo | undefined;
  /** The request as a fetch `Request` (for the SDK and the principal function). */
  request(): Request;
}

/** The requests about tasks a span is recorded for (a listen lasts: it gets none). */
const TRACED = new Set(["tools/call", "tasks/get", "tasks/update", "tasks/cancel"]);

/** What to send back: a reply core built, or a `Response` (the SDK's, a listen stream). */
type Answer = { reply: HttpReply } | { response: Response } | { listen: NativeModule.NativeListen };

/** The first value of header `name` in flat raw pairs, any case. */
function rawHeader(raw: string[], name: string): string | undefined {
  const wanted = name.toLowerCase();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === wanted) {
      return raw[i + 1];
    }
  }
  return undefined;
}

/** Every header core reads, as flat pairs (repeats kept, so core can refuse them). */
function coreHeaders(raw: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (READ_HEADERS.has(raw[i]!.toLowerCase())) {
      out.push(raw[i]!, raw[i + 1]!);
    }
  }
  return out;
}

/** A running task of this process, how to stop its work, and its run (to drain). */
interface Running {
  task: NativeModule.NativeTask;
  /** Why the work was stopped (cancel or expiry), once it was. */
  stopped?: Error;
  /** Made when a signal is first asked for (`signalOf`): a ctx-free tool's run never does, nor
   * one through the SDK's dispatch whose tool never reads `currentTask(ctx).signal`. */
  abort?: AbortController;
  /** Cancels the SDK call running the work (a run through the SDK's dispatch), once stopped. */
  cancel?: (reason: string) => void;
  run?: Promise<void>;
  /** This run's `task.run` span, where the application records spans. */
  span?: otel.Span | null;
}

/** The signal that fires when `entry`'s work is stopped (already fired if it was). */
function signalOf(entry: Running): AbortSignal {
  if (entry.abort === undefined) {
    entry.abort = new AbortController();
    if (entry.stopped !== undefined) {
      entry.abort.abort(entry.stopped);
    }
  }
  return entry.abort.signal;
}

/** The tasks extension for TypeScript servers: core's dispatcher and engine over one store. */
export class TasksServer {
  readonly #native: NativeModule.NativeServer;
  /** The store it was opened on (its web view opens the same). */
  readonly #store: string;
  readonly #tools = new Map<string, TaskToolConfig>();
  /** The caller of a request: the `principal` option, or `undefined` for core's default. */
  readonly #principal: ((info: PrincipalInfo) => string | undefined) | undefined;
  readonly #running = new Map<string, Running>();
  /** The tools the SDK's servers were seen to serve (see `#sdkServes`). */
  readonly #sdkTools = new Set<string>();
  #checker: ReturnType<typeof setInterval> | undefined;
  #executing = false;
  /** The server that runs ctx-free tools directly when the factory reads no request context:
   * made once, on the first task that can use it (`undefined` once it turned out it cannot). */
  #shared: Promise<Direct | undefined> | undefined;
  /** Tools seen to need the exchange on a factory that reads the request context (so its
   * server is not made twice per task for them). */
  readonly #exchangeTools = new Set<string>();

  private constructor(nativeServer: NativeModule.NativeServer, options: TasksServerOptions) {
    this.#native = nativeServer;
    this.#store = options.store ?? "sqlite://mcp-tasks.db";
    this.#principal = options.principal;
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
    const options = {
      ...(full.ttlMs !== undefined && { ttlMs: full.ttlMs }),
      ...(full.pollIntervalMs !== undefined && { pollIntervalMs: full.pollIntervalMs }),
      ...(full.maxAttempts !== undefined && {
        resume: { maxAttempts: full.maxAttempts, ...(full.backoffMs !== undefined && { backoffMs: full.backoffMs }) },
      }),
    };
    mappedSync(() =>
      this.#native.configure(tool, full.mode ?? "optional", JSON.stringify(options), full.prepare !== undefined),
    );
    this.#tools.set(tool, full);
  }

  /** The operator's web view of this server's store as a `node:http` handler (see
   * `webHandler`); a `memory://` store has none (nothing outside the engine can read it). */
  webHandler(options: WebViewOptions = {}): Promise<(req: IncomingMessage, res: ServerResponse) => void> {
    return webHandler(this.#store, options);
  }

  /** The engine's metrics in the Prometheus exposition format (OpenMetrics text): answer a
   * scrape with it and `METRICS_CONTENT_TYPE`. The metric names are core's (docs/operating.md,
   * "Metrics and traces"). */
  metrics(): string {
    return this.#native.metrics();
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
    catchProtocolErrors();
    const wrapped = async (ctx: McpRequestContext): Promise<McpServer | Server> => {
      const product = await factory(ctx);
      const server = product instanceof McpServer ? product.server : product;
      if (ctx.era === "modern") {
        server.registerCapabilities(capabilities);
      }
      learnTools(product, this.#sdkTools);
      return product;
    };
    const sdk = createMcpHandler(wrapped, options);
    this.#factory = wrapped;
    // A factory declaring no parameter makes the same server for every request: one instance
    // of it can run every task of a ctx-free tool. One that reads the request context (its
    // caller, its headers) makes a server per task for it, still without an exchange.
    this.#factoryReadsContext = !declaresAtMost(factory, 0);
    this.#shared = undefined;
    this.#exchangeTools.clear();
    // Resumable tasks a dead process left run again through this handler's SDK (the first
    // handler's, when there are several).
    if (!this.#executing && !this.#native.acceptsOnly) {
      this.#executing = true;
      this.#native.startExecutor((claim) => this.#runClaimed(sdk, claim));
    }
    const fetch = async (request: Request, requestOptions?: { authInfo?: AuthInfo }): Promise<Response> => {
      const incoming = await fromFetch(request, requestOptions?.authInfo, this.#native.maxBodyBytes);
      const answer = await this.#answer(sdk, incoming);
      return "reply" in answer
        ? toResponse(answer.reply)
        : "listen" in answer
          ? listenResponse(answer.listen, incoming.request().signal)
          : answer.response;
    };
    const node = (req: IncomingMessage, res: ServerResponse): Promise<void> => this.#serveNode(sdk, req, res);
    const nodeServer = (limits?: Partial<ServeLimits>): HttpServer => createNodeServer(node, limits);
    return { fetch, node, nodeServer, close: () => sdk.close(), sdk };
  }

  /** Waits for the tools still running in this process (tests, graceful shutdown). */
  async drain(): Promise<void> {
    while (this.#running.size > 0) {
      await Promise.allSettled([...this.#running.values()].map((entry) => entry.run));
    }
  }

  /** Stops the store's background sweeper and the claiming of resumable tasks. Tasks still
   * running end `failed` at the next start on the same store (SQLite), or by another worker's
   * sweep (PostgreSQL), unless their tool is resumable: then they run again there. */
  close(): void {
    this.#native.close();
  }

  /** Tests and vectors: moves the manual clock (`clockStartMs`) forward. */
  advanceClock(ms: number): void {
    mappedSync(() => this.#native.advanceClock(ms));
  }

  /** Tests and vectors: runs one TTL sweep; resolves to `[expired, purged]`. */
  async sweep(): Promise<number[]> {
    const counts = await mapped(() => this.#native.sweep());
    this.#stopCancelled();
    return counts;
  }

  /** Core's answer to one request, or the SDK's when core hands it over; where the application
   * records spans (its own OpenTelemetry), a task request's span around it (`otel.ts`). */
  async #answer(sdk: McpHttpHandler, incoming: Incoming): Promise<Answer> {
    const method = rawHeader(incoming.rawHeaders, "mcp-method");
    const tracer = method !== undefined && TRACED.has(method) && incoming.body != null ? otel.tracing() : null;
    if (tracer === null) {
      return this.#decide(sdk, incoming, null);
    }
    const caller = otel.parseCarrier(this.#native.traceOf(incoming.body!));
    const tool = method === "tools/call" ? rawHeader(incoming.rawHeaders, "mcp-name") : undefined;
    const span = otel.requestSpan(tracer, method!, tool, caller);
    try {
      const answer = await otel.within(span, () => this.#decide(sdk, incoming, span, caller?.baggage));
      if ("reply" in answer && answer.reply.status >= 400) {
        otel.failed(span, answer.reply.status);
      }
      return answer;
    } finally {
      span.end();
    }
  }

  /** What `#answer` answers; `span` (when recorded) is the request's, whose context a task
   * created here keeps, and which links to the task a `tasks/*` request names. */
  async #decide(sdk: McpHttpHandler, incoming: Incoming, span: otel.Span | null, baggage?: string): Promise<Answer> {
    const { authInfo } = incoming;
    let principal: string | undefined;
    if (this.#principal === undefined) {
      principal = defaultPrincipal(authInfo?.clientId);
    } else {
      let request: Request | undefined;
      principal = this.#principal({
        ...(authInfo !== undefined && { authInfo }),
        get request() {
          return (request ??= incoming.request());
        },
        header: (name) => rawHeader(incoming.rawHeaders, name),
      });
    }
    const kept = span === null ? null : JSON.stringify(otel.carrierOf(span, baggage));
    const decided = mappedSync(() =>
      this.#native.handle(incoming.method, coreHeaders(incoming.rawHeaders), incoming.body, principal ?? null, kept),
    );
    if (!(decided instanceof native.Handled)) {
      // The common answers, in one crossing: a reply, or (a task call of a tool without
      // `prepare`) the creation reply with the task core created in the same call.
      if ("task" in decided) {
        span?.setAttribute("mcp.task.id", decided.task.taskId);
        this.#run(sdk, decided.task, principal ?? "", incoming);
      } else if (span !== null) {
        // A `tasks/*` request core answered at once (a read from memory): its task is the one
        // the request names (`Mcp-Name`).
        const named = rawHeader(incoming.rawHeaders, "mcp-name");
        if (named !== undefined && rawHeader(incoming.rawHeaders, "mcp-method")?.startsWith("tasks/")) {
          span.setAttribute("mcp.task.id", named);
          otel.link(span, otel.parseCarrier(await this.#native.taskTrace(principal ?? "", named)));
        }
      }
      return { reply: decided };
    }
    let handled = decided;
    if (handled.pending) {
      handled = await mapped(() => handled.perform());
    }
    const taskId = handled.taskId;
    if (taskId != null) {
      // A cancel, or a read that noticed an expiry, stops the work now, not at the next check.
      this.#stopIfCancelled(taskId);
      if (span !== null) {
        span.setAttribute("mcp.task.id", taskId);
        otel.link(span, otel.parseCarrier(await this.#native.taskTrace(principal ?? "", taskId)));
      }
    }
    const creation = handled.takeCreation();
    if (creation != null) {
      const created = await mapped(() => creation.wait());
      return { reply: this.#started(sdk, created, principal ?? "", incoming, span) };
    }
    const reply = handled.reply;
    if (reply != null) {
      return { reply };
    }
    const listen = handled.listen;
    if (listen != null) {
      return { listen };
    }
    const call = handled.call;
    if (call != null) {
      return { reply: await this.#prepareTask(sdk, call, incoming, principal ?? "", span) };
    }
    const options = incoming.authInfo !== undefined ? { authInfo: incoming.authInfo } : undefined;
    const tool = handled.delegatedTool;
    if (tool == null) {
      return { response: await sdk.fetch(incoming.request(), options) };
    }
    // A synchronous call: core answers, from the table, what the SDK would answer its own way
    // (an unknown tool with HTTP 200; a ProtocolError the tool throws as an isError result).
    if (!(await this.#sdkServes(tool, incoming))) {
      return { reply: handled.unknownToolReply() };
    }
    const run: Run = {};
    const response = await sdk.fetch(carrying(incoming.request(), run), options);
    if (run.thrown !== undefined) {
      await response.body?.cancel();
      const [code, message, data] = rpcError(run.thrown);
      return { reply: mappedSync(() => handled.toolErrorReply(code, message, data)) };
    }
    return { response };
  }

  /** The factory of the latest `handler(...)`, wrapped (for `#sdkServes`). */
  #factory: ((ctx: McpRequestContext) => Promise<McpServer | Server>) | undefined;
  /** Whether that factory declares a parameter (see `handler`). */
  #factoryReadsContext = true;

  /**
   * How a task of `tool` runs without an exchange: its callback called directly (a ctx-free
   * tool), or the SDK's dispatch on the factory's one long-lived server (a tool that takes `ctx`,
   * when the factory declares no parameter); `undefined` when the task runs through an SDK
   * exchange (a factory that reads the request context for a tool that takes `ctx`, a low-level
   * `Server`, an SDK without what the direct run reads: see `direct.ts`).
   */
  async #routeFor(tool: string, exchange: Exchange): Promise<Route | undefined> {
    const factory = this.#factory;
    if (factory === undefined) {
      return undefined;
    }
    if (!this.#factoryReadsContext) {
      // A factory that throws fails this task (as the SDK answers 500 to its request), and the
      // next task asks it again.
      this.#shared ??= (async () =>
        directServer(await factory(factoryContext(undefined, exchangeRequest(exchange))), PROTOCOL_VERSION))().catch(
        (error: unknown) => {
          this.#shared = undefined;
          throw error;
        },
      );
      const direct = await this.#shared;
      if (direct === undefined) {
        return undefined;
      }
      if (runsDirect(direct.server, tool)) {
        return { direct };
      }
      const transport = runsShared(direct.server, tool) ? await dispatcher(direct, PROTOCOL_VERSION) : undefined;
      return transport === undefined ? undefined : { transport };
    }
    if (this.#exchangeTools.has(tool)) {
      return undefined;
    }
    const product = await factory(factoryContext(exchange.authInfo, exchangeRequest(exchange)));
    const direct = product instanceof McpServer && runsDirect(product, tool) ? directServer(product, PROTOCOL_VERSION) : undefined;
    if (direct === undefined) {
      this.#exchangeTools.add(tool);
      return undefined;
    }
    return { direct };
  }

  /**
   * Whether the SDK serves `tool`: a tool its servers were seen to serve, or else one the server
   * the factory makes for this request has (it may vary by caller). True when that cannot be
   * told (a low-level `Server`, an SDK without the registry read here): the SDK then answers.
   */
  async #sdkServes(tool: string, incoming: Incoming): Promise<boolean> {
    if (this.#sdkTools.has(tool) || this.#factory === undefined) {
      return true;
    }
    const product = await this.#factory({
      era: "modern",
      ...(incoming.authInfo !== undefined && { authInfo: incoming.authInfo }),
      requestInfo: incoming.request(),
    });
    return !learnTools(product, this.#sdkTools) || this.#sdkTools.has(tool);
  }

  /** A task call of a tool with `prepare`: its MRTR phase runs first, then the task is created. */
  async #prepareTask(
    sdk: McpHttpHandler,
    call: NativeModule.NativeToolCall,
    incoming: Incoming,
    principal: string,
    span: otel.Span | null = null,
  ): Promise<HttpReply> {
    const name = call.name;
    const prepare = this.#tools.get(name)?.prepare;
    let ask: InputRequired | undefined;
    try {
      ask = await prepare?.({
        name,
        arguments: JSON.parse(call.argumentsJson) as Record<string, unknown>,
        ...(call.inputResponsesJson != null && {
          inputResponses: JSON.parse(call.inputResponsesJson) as Record<string, unknown>,
        }),
        ...(call.stateJson != null && { state: JSON.parse(call.stateJson) as unknown }),
        principal,
      });
    } catch (error) {
      const [code, message, data] = rpcError(error);
      return mappedSync(() => call.error(code, message, data));
    }
    if (ask !== undefined) {
      return mappedSync(() =>
        call.inputRequired(JSON.stringify(ask.inputRequests), ask.state === undefined ? null : JSON.stringify(ask.state)),
      );
    }
    // Durable before the answer: the creation reply is sent only once the store has the task.
    const creation = call.createTask();
    const created = mappedSync(() => creation.take()) ?? (await mapped(() => creation.wait()));
    return this.#started(sdk, created, principal, incoming, span);
  }

  /** Runs a created task and answers with its creation, or (a front-end's) answers for the
   * task enqueued for a worker. */
  #started(
    sdk: McpHttpHandler,
    created: NativeModule.TaskReply | HttpReply,
    principal: string,
    incoming: Incoming,
    span: otel.Span | null = null,
  ): HttpReply {
    if ("task" in created) {
      span?.setAttribute("mcp.task.id", created.task.taskId);
      this.#run(sdk, created.task, principal, incoming);
    }
    return created;
  }

  /** Runs a created task's tool in the background, registered so a cancel can stop it. */
  #run(sdk: McpHttpHandler, task: NativeModule.NativeTask, principal: string, incoming: Incoming): void {
    const exchange = { url: incoming.url, rawHeaders: incoming.rawHeaders, authInfo: incoming.authInfo };
    this.#start(sdk, task, principal, exchange, incoming.body!);
  }

  /** Runs a claimed task (a resumable task a dead process left): the exchange core made from
   * its stored call, with no client request behind it. */
  #runClaimed(sdk: McpHttpHandler, claim: NativeModule.NativeClaim): void {
    const task = claim.takeTask();
    if (task === null) {
      return;
    }
    const exchange = { url: "http://localhost/mcp", rawHeaders: claim.headers, authInfo: undefined };
    this.#start(sdk, task, claim.principal, exchange, claim.body);
  }

  #start(sdk: McpHttpHandler, task: NativeModule.NativeTask, principal: string, exchange: Exchange, body: Buffer): void {
    const taskId = task.taskId;
    const entry: Running = { task };
    this.#running.set(taskId, entry);
    // A cancel or an expiry this process did not serve (another worker's, a sweep's) is
    // noticed as often as the engine sweeps.
    this.#checker ??= setInterval(() => this.#stopCancelled(), this.#native.sweepIntervalMs).unref();
    const route = (tool: string) => this.#routeFor(tool, exchange);
    // The run's span: a child of the context the task keeps, on whichever process runs it.
    const span = otel.runSpan(taskId, task.attempt, rawHeader(exchange.rawHeaders, "mcp-name"), otel.parseCarrier(task.traceJson));
    entry.span = span;
    entry.run = otel.within(span, () => runTask(sdk, route, entry, taskId, principal, exchange, body)).finally(() => {
      if (span !== null) {
        otel.ended(span, task.status, task.errorCode ?? undefined);
      }
      this.#running.delete(taskId);
      if (this.#running.size === 0 && this.#checker !== undefined) {
        clearInterval(this.#checker);
        this.#checker = undefined;
      }
    });
  }

  /** Stops the work of `taskId` if its task was cancelled or expired. */
  #stopIfCancelled(taskId: string): void {
    const entry = this.#running.get(taskId);
    if (entry !== undefined && entry.stopped === undefined && entry.task.isCancelled()) {
      entry.stopped = new Error(`task ${taskId} was cancelled or expired`);
      entry.abort?.abort(entry.stopped);
      entry.cancel?.(entry.stopped.message);
    }
  }

  /** Stops the work of every task that was cancelled or expired. */
  #stopCancelled(): void {
    for (const taskId of this.#running.keys()) {
      this.#stopIfCancelled(taskId);
    }
  }

  async #serveNode(sdk: McpHttpHandler, req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Only a request handed to the SDK or streamed needs to learn that its client went away;
    // the controller (and its listener) exist only then.
    let abort: AbortController | undefined;
    const signal = (): AbortSignal => {
      if (abort === undefined) {
        const controller = (abort = new AbortController());
        res.once("close", () => {
          if (!res.writableFinished) {
            controller.abort();
          }
        });
      }
      return abort.signal;
    };
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
      // Built only when read (a task's run, a request for the SDK), and from the raw headers:
      // `req.headers` would build Node's header object for every request.
      let url: string | undefined;
      const urlOf = (): string => (url ??= `http://${rawHeader(req.rawHeaders, "host") ?? "localhost"}${req.url ?? "/"}`);
      let request: Request | undefined;
      const incoming: Incoming = {
        method,
        get url() {
          return urlOf();
        },
        rawHeaders: req.rawHeaders,
        body,
        authInfo: (req as { auth?: AuthInfo }).auth,
        request: () =>
          (request ??= new Request(urlOf(), {
            method,
            headers: exchangeHeaders(req.rawHeaders),
            signal: signal(),
            ...(body !== null && { body: new Uint8Array(body) }),
          })),
      };
      const answer = await this.#answer(sdk, incoming);
      if (method === "POST" && body === null) {
        // The rest of an oversized body was never read: the connection cannot carry another
        // request, so it closes after the 413 instead of being reused mid-body.
        res.setHeader("connection", "close");
      }
      if ("reply" in answer) {
        const { status, headers, body: text } = answer.reply;
        res.writeHead(status, headers);
        res.end(text);
      } else if ("listen" in answer) {
        await writeListen(answer.listen, res);
      } else {
        await writeNode(answer.response, res);
      }
    } catch (error) {
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "text/plain" });
      }
      res.end(error instanceof Error ? error.message : String(error));
    }
  }
}

/** An `Incoming` from a fetch `Request` (its body is read here, bounded). */
async function fromFetch(request: Request, authInfo: AuthInfo | undefined, limit: number): Promise<Incoming> {
  const body = request.method === "POST" ? await readBounded(request, limit) : null;
  let rebuilt: Request | undefined;
  return {
    method: request.method,
    url: request.url,
    // fetch's Headers merge repeated names into one value: core then sees the merged value.
    rawHeaders: [...request.headers].flat(),
    body,
    authInfo,
    request: () =>
      body === null
        ? request
        : (rebuilt ??= new Request(request.url, {
            method: request.method,
            headers: request.headers,
            signal: request.signal,
            body: new Uint8Array(body),
          })),
  };
}

/** The headers of the SDK exchange that runs a task's tool: the call's own (its `Mcp-*` and
 * parameter headers), without the framing of the original body. */
function exchangeHeaders(raw: string[]): Headers {
  const headers = new Headers();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.toLowerCase() !== "content-length" && name.toLowerCase() !== "transfer-encoding") {
      headers.append(name, raw[i + 1]!);
    }
  }
  return headers;
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
 * Adds the enabled tools of an SDK server to `into`; false when they cannot be read. The SDK has
 * no public listing of an `McpServer`'s tools: 2.x keeps them in `_registeredTools` (name ->
 * `{enabled, ...}`), the registry its own `tools/call` handler looks a tool up in;
 * `test/server.test.mjs` fails if that changes.
 */
function learnTools(product: McpServer | Server, into: Set<string>): boolean {
  if (!(product instanceof McpServer)) {
    return false;
  }
  const registry = (product as unknown as { _registeredTools?: Record<string, { enabled?: boolean }> })._registeredTools;
  if (registry === null || typeof registry !== "object") {
    return false;
  }
  for (const [name, tool] of Object.entries(registry)) {
    if (tool?.enabled !== false) {
      into.add(name);
    }
  }
  return true;
}

/** Marks `McpServer.prototype` once this module wrapped its `executeToolHandler` (a second copy
 * of the module, with its own runs, wraps the wrapper). */
const CATCHING = Symbol("mcp-tasks/server.catchProtocolErrors");

/**
 * Remembers a `ProtocolError` a tool throws, as a task or synchronously: the SDK turns every
 * thrown error into an `isError` result, which is right for other errors, but a `ProtocolError`
 * is the tool failing at the protocol level, so a task ends `failed` with it and a synchronous
 * call is answered with it as a JSON-RPC error (HTTP 200), as the Rust host and the Python
 * server answer. The SDK has no public hook for this; `executeToolHandler` is
 * the method its `tools/call` handler awaits (2.x, called with the tool's context last). It is
 * wrapped once, on the prototype: a call that is not a task's run (no run for its request)
 * passes through unchanged. Wrapping each task's server instance instead gave every instance
 * an own property, and the SDK's code working on two shapes of server cost 1.4% of creates/s
 * (A/B runs of the two builds under load at the same time).
 */
function catchProtocolErrors(): void {
  const target = McpServer.prototype as unknown as Record<PropertyKey, unknown> & {
    executeToolHandler?: (...args: unknown[]) => Promise<unknown>;
  };
  if (target[CATCHING] === true) {
    return;
  }
  const original = target.executeToolHandler;
  if (typeof original !== "function") {
    throw new Error("mcp-tasks/server needs @modelcontextprotocol/server 2.x (McpServer.executeToolHandler)");
  }
  // The SDK's own method, for the direct run to tell whether it does anything but call the
  // tool's executor (`direct.ts`, `callsExecutorOnly`).
  target[SDK_EXECUTE_TOOL_HANDLER] ??= original;
  // A promise chain rather than an `async` wrapper, whose suspended frame every task of a tool
  // that takes `ctx` would hold for as long as its tool runs.
  target.executeToolHandler = function (this: unknown, ...args: unknown[]): Promise<unknown> {
    const remember = (error: unknown): never => {
      if (error instanceof ProtocolError) {
        const run = runOf(args[args.length - 1] as ToolContext | undefined);
        if (run !== undefined) {
          run.thrown = error;
        }
      }
      throw error;
    };
    try {
      return Promise.resolve(original.apply(this, args)).catch(remember);
    } catch (error) {
      return Promise.reject(error).catch(remember);
    }
  };
  target[CATCHING] = true;
}

/** A running task as its tool sees it: one object per task, its methods shared, and what
 * crosses into the native module read only when the tool asks. */
class RunningTask implements CurrentTask {
  readonly #entry: Running;
  readonly #native: NativeModule.NativeTask;
  readonly taskId: string;
  readonly principal: string;

  constructor(entry: Running, taskId: string, principal: string) {
    this.#entry = entry;
    this.#native = entry.task;
    this.taskId = taskId;
    this.principal = principal;
  }

  /** Made when first read: most tools read `ctx.mcpReq.signal`, if any. */
  get signal(): AbortSignal {
    return signalOf(this.#entry);
  }

  get attempt(): number {
    return this.#native.attempt;
  }

  get savedCheckpoint(): unknown {
    const saved = this.#native.savedCheckpoint();
    return saved == null ? undefined : (JSON.parse(saved) as unknown);
  }

  setStatus(message: string): Promise<void> {
    return mapped(() => this.#native.setStatus(message));
  }

  async requestInput(requests: Record<string, unknown>): Promise<Record<string, unknown>> {
    const keys = Object.keys(requests).length;
    this.#entry.span?.addEvent("task.input_requested", { keys });
    const answers = await mapped(() => this.#native.requestInput(JSON.stringify(requests)));
    this.#entry.span?.addEvent("task.input_received", { keys });
    return JSON.parse(answers) as Record<string, unknown>;
  }

  checkpoint(value: unknown): Promise<void> {
    return mapped(() => this.#native.checkpoint(JSON.stringify(value)));
  }
}

/** How a task runs without an exchange (`TasksServer.#routeFor`). */
type Route = { direct: Direct } | { transport: DirectTransport };

/** What a task's run through the SDK knows of the call that created it. */
interface Exchange {
  url: string;
  /** The call's headers as flat pairs (a `Headers` is built only for an exchange). */
  rawHeaders: string[];
  authInfo: AuthInfo | undefined;
}

/** The fetch `Request` of an exchange, without a body (the SDK is handed the parsed message). */
function exchangeRequest(exchange: Exchange, signal?: AbortSignal): Request {
  const headers = exchangeHeaders(exchange.rawHeaders);
  return new Request(exchange.url, { method: "POST", headers, ...(signal !== undefined && { signal }) });
}

/** The protocol revision core serves, which a direct run's server is set to. */
const PROTOCOL_VERSION: string = (native as Native).PROTOCOL_VERSION;

/**
 * Runs a task's tool through the SDK until it ends the task. Every round is one `tools/call`
 * the SDK answers, so the tool gets the SDK's validation; the first round sends the client's
 * own message. A tool that takes no context runs directly (`runDirectTask`); one that takes
 * `ctx` runs through the SDK's dispatch on the factory's one server, or in an exchange with the
 * SDK's HTTP handler (`routeFor` decides, see `direct.ts`). The core settles the task from each
 * answer (in `settle`, off this thread); an answer that asks for input moves the task to
 * `input_required`, and the next round carries the answers `tasks/update` gave. Never throws:
 * whatever happens, the task ends terminal.
 */
async function runTask(
  sdk: McpHttpHandler,
  routeFor: (tool: string) => Promise<Route | undefined>,
  entry: Running,
  taskId: string,
  principal: string,
  exchange: Exchange,
  body: Buffer,
): Promise<void> {
  const native = entry.task;
  let task: RunningTask | undefined; // what `currentTask(ctx)` gives a tool that takes ctx
  const { authInfo } = exchange;
  try {
    let message = JSON.parse(body.toString("utf8")) as CallMessage;
    const name = String(message.params?.name);
    const route = await routeFor(name);
    if (route !== undefined && "direct" in route) {
      // Returned, not awaited: this frame (the call's headers, its body, the routing closure)
      // ends here, and the run keeps only what it reads.
      return runDirectTask(entry, route.direct, name, message.params?.arguments);
    }
    for (;;) {
      task ??= new RunningTask(entry, taskId, principal);
      const run: Run = { task };
      let bytes: Buffer;
      if (route !== undefined) {
        if (entry.stopped !== undefined) {
          return; // cancelled or expired while it waited for input
        }
        // The tool's `ctx.http.req`, by which `currentTask(ctx)` finds the run: the call's URL
        // and headers, no body (the SDK is handed the message parsed) and no signal (a cancel
        // reaches the tool as the SDK's `ctx.mcpReq.signal`; following one would cost the
        // request a controller, a weak reference and a finalizer for as long as the tool runs).
        const request = carrying(exchangeRequest(exchange), run);
        const extra = authInfo === undefined ? { request } : { authInfo, request };
        const { transport } = route;
        const answer = await transport.call(message, extra, (id) => {
          entry.cancel = (reason) => transport.cancel(id, reason);
        });
        entry.cancel = undefined;
        if (entry.stopped !== undefined || answer === undefined) {
          return; // cancelled or expired: the task is terminal already
        }
        bytes = Buffer.from(JSON.stringify(answer));
      } else {
        const signal = signalOf(entry);
        // The message goes to the SDK parsed (its `parsedBody`, documented as the way to hand
        // it a body already read), so the request carries none: the SDK would otherwise clone
        // the request and read the clone's body stream, which cost more than the parse.
        const options = authInfo === undefined ? { parsedBody: message } : { authInfo, parsedBody: message };
        const response = await sdk.fetch(carrying(exchangeRequest(exchange, signal), run), options);
        if (entry.stopped !== undefined) {
          return; // cancelled or expired: the task is terminal already
        }
        bytes = Buffer.from(await response.arrayBuffer());
      }
      if (run.thrown !== undefined) {
        await failWith(native, run.thrown);
        return;
      }
      const asked = Date.now();
      const next = await settle(native, bytes);
      if (next == null) {
        return;
      }
      // An input round: asked when the tool answered, answered through `tasks/update` now.
      entry.span?.addEvent("task.input_requested", {}, asked);
      entry.span?.addEvent("task.input_received");
      // The tool asked for input and has the answers now: run it again with them, as an MRTR
      // retry would (rare: parsed again here, as the SDK may have changed the object it got).
      const original = JSON.parse(body.toString("utf8")) as CallMessage;
      const { inputResponses: _old, requestState: _state, ...params } = original.params ?? {};
      const answers = JSON.parse(next) as Record<string, unknown>;
      message = { ...original, params: { ...params, ...answers } };
    }
  } catch (error) {
    await failUnlessStopped(entry, error);
  }
}

/**
 * Runs a ctx-free tool's task (`runDirect`) until it ends the task, holding only what the run
 * reads: the tool's name and the call's arguments. A round that asks for input runs again once
 * `tasks/update` has answered (with the same arguments: the tool cannot read the answers). Never
 * throws: whatever happens, the task ends terminal.
 */
async function runDirectTask(entry: Running, direct: Direct, name: string, args: unknown): Promise<void> {
  const native = entry.task;
  try {
    for (;;) {
      const answer = await runDirect(direct, name, args);
      if (entry.stopped !== undefined) {
        return; // cancelled or expired: the task is terminal already
      }
      if ("thrown" in answer) {
        await failWith(native, answer.thrown);
        return;
      }
      const asked = Date.now();
      if ((await settle(native, Buffer.from(JSON.stringify(answer)))) == null) {
        return;
      }
      entry.span?.addEvent("task.input_requested", {}, asked);
      entry.span?.addEvent("task.input_received");
    }
  } catch (error) {
    await failUnlessStopped(entry, error);
  }
}

/** Settles a task from the SDK's answer (a JSON-RPC response's bytes): resolves to the answers
 * of an input round to run again with, or to nothing once the task is terminal. */
async function settle(native: NativeModule.NativeTask, bytes: Buffer): Promise<string | null | undefined> {
  const settled = mappedSync(() => native.settle(bytes));
  return settled === null || typeof settled === "string" ? settled : await mapped(() => settled.wait());
}

/** Fails a task with the `ProtocolError` its tool threw. */
async function failWith(native: NativeModule.NativeTask, thrown: ProtocolError): Promise<void> {
  const [code, message, data] = rpcError(thrown);
  await mapped(() => native.fail(code, message, data));
}

/** Fails a task with an error its run threw, unless it was stopped (then it is terminal). */
async function failUnlessStopped(entry: Running, error: unknown): Promise<void> {
  if (entry.stopped !== undefined) {
    return;
  }
  const kind = error instanceof Error ? error.name : typeof error;
  const text = error instanceof Error ? error.message : String(error);
  // The store may refuse too (the task ended meanwhile): nothing is left to do then.
  await entry.task.failException(kind, text).catch(() => false);
}

/** The response headers of a listen stream. */
const LISTEN_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" };

/** The `text/event-stream` of a listen for tasks, for a fetch handler: the acknowledgement,
 * each task state, then the closing result, every event framed by core. */
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
      const events = await listen.nextEvents();
      if (done) {
        return; // cancelled while it waited
      }
      if (signal.aborted) {
        done = true;
        listen.close();
        controller.close();
        return;
      }
      if (events === null) {
        done = true;
        controller.enqueue(encoder.encode(listen.closeEvent));
        controller.close();
        return;
      }
      controller.enqueue(encoder.encode(events));
    },
    cancel() {
      done = true;
      listen.close();
    },
  });
  return new Response(stream, { status: 200, headers: LISTEN_HEADERS });
}

/** The same stream written to a `node:http` response: core's batches of events written as
 * text, with no fetch `Request`, `Response`, body stream or byte copy per event (at 10,000
 * open streams those were most of the server's heap, and what its collector went through);
 * waits for `drain` when the socket is full, and stops when the client goes away. */
async function writeListen(listen: NativeModule.NativeListen, res: ServerResponse): Promise<void> {
  let gone = false;
  let wake: (() => void) | undefined;
  res.once("close", () => {
    gone = true;
    listen.close();
    wake?.();
  });
  res.writeHead(200, LISTEN_HEADERS);
  res.write(listen.ack);
  for (;;) {
    const events = await listen.nextEvents();
    if (gone) {
      return;
    }
    if (events === null) {
      res.end(listen.closeEvent);
      return;
    }
    if (!res.write(events)) {
      await new Promise<void>((resolve) => {
        wake = resolve;
        res.once("drain", resolve);
      });
      wake = undefined;
      if (gone) {
        return;
      }
    }
  }
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

/** The body of a `node:http` request, or `null` when it is longer than `limit` bytes. Read with
 * listeners rather than `for await`: the stream's async iterator made ~1 KB of promises and
 * closures per request, which under load is garbage V8 promotes and keeps resident. */
function readNodeBounded(req: IncomingMessage, limit: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.byteLength;
      if (size > limit) {
        cleanup();
        req.resume(); // what is left is drained, not read: the connection closes after the 413
        resolve(null);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const cleanup = (): void => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
  });
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

/** How the operator's web view behaves (docs/operating.md, "The web view"). */
export interface WebViewOptions {
  /** The path it is mounted under, such as `/tasks` (no trailing slash); requests carry it. */
  prefix?: string;
  /** A token file: `NAME:SECRET` or `NAME:SECRET:PRINCIPAL,...` a line. Without tokens nothing can be changed. */
  tokenFile?: string;
  /** The same, as text. */
  tokens?: string;
  /** Hide and refuse every action. */
  readOnly?: boolean;
  /** Reading needs no token (default false). With open reads, only requests sent to this machine's
   * names (localhost, 127.0.0.1, [::1]) and `allowedHosts` are answered. */
  openReads?: boolean;
  /** Show results and error data on a task's page (hidden by default). */
  showPayloads?: boolean;
  /** Host names answered besides this machine's (`tasks.example.com`, `name:port`, `.example.com`),
   * for a view behind a proxy. */
  allowedHosts?: string[];
  /** The header a trusted proxy sets to the browser's scheme (`x-forwarded-proto`): the sign-in
   * cookie is then `Secure` when it says https. */
  forwardedProtoHeader?: string;
  /** How long a sign-in lasts, in seconds (default 8 hours). */
  sessionTtlSeconds?: number;
  /** A task page links its trace id here: an http(s) URL with `{trace_id}`
   * (`http://jaeger:16686/trace/{trace_id}`). */
  traceUrl?: string;
}

/** The most bytes of a request body the view reads (forms and logins are small). */
const WEB_MAX_BODY = 64 * 1024;

/** The operator's web view of the store at `store` (`sqlite://` or `postgres://`) as a
 * `node:http` handler: core renders every page (the same bytes as `mcp-tasks web`), this only
 * carries the request to it and its answer back. Route the prefix's requests to it. */
export async function webHandler(
  store: string,
  options: WebViewOptions = {},
): Promise<(req: IncomingMessage, res: ServerResponse) => void> {
  if (options.tokenFile !== undefined && options.tokens !== undefined) {
    throw new TypeError("pass tokenFile or tokens, not both");
  }
  const { readFile } = await import("node:fs/promises");
  const tokens = options.tokenFile !== undefined ? await readFile(options.tokenFile, "utf8") : options.tokens;
  const view = await mapped(() =>
    native.NativeWebView.open(store, {
      prefix: options.prefix,
      tokens,
      readOnly: options.readOnly,
      openReads: options.openReads,
      showPayloads: options.showPayloads,
      allowedHosts: options.allowedHosts,
      forwardedProtoHeader: options.forwardedProtoHeader,
      sessionTtlSeconds: options.sessionTtlSeconds,
      traceUrl: options.traceUrl,
    }),
  );
  return (req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > WEB_MAX_BODY && !refused) {
        refused = true;
        res.writeHead(413, { "content-type": "text/plain" }).end("request body too large");
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (refused) return;
      const headers: string[][] = [];
      for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
      // A TLS socket (node:https): the session cookie is then Secure.
      const https = (req.socket as { encrypted?: boolean }).encrypted === true;
      view.handle(req.method ?? "GET", req.url ?? "/", headers, Buffer.concat(chunks), https).then(
        (answer) => res.writeHead(answer.status, answer.headers).end(answer.body),
        (error: unknown) => res.writeHead(500, { "content-type": "text/plain" }).end(String(error)),
      );
    });
  };
}
