/**
 * mcp-tasks for Node: a client for servers speaking the MCP tasks extension
 * (`io.modelcontextprotocol/tasks`, SEP-2663, MCP 2026-07-28), on the Rust core.
 *
 * `TasksClient` calls tools over Streamable HTTP and follows the tasks they create: it polls
 * `tasks/get` at the server's `pollIntervalMs`, listens on `subscriptions/listen` when the server
 * offers it, answers input requests through your handler, cancels, and keeps task references in
 * SQLite so `resumeAll()` picks tasks up again after a restart.
 */

import type * as NativeModule from "../native.js";
import { native } from "./native.js";
import { InvalidParamsError, McpTaskError, mapped, mappedSync } from "./errors.js";
import { parseJson, stringifyJson } from "./json.js";
import * as otel from "./otel.js";

export { parseJson, stringifyJson } from "./json.js";
export {
  ERROR_CLASSES,
  HeaderMismatchError,
  InternalError,
  InvalidParamsError,
  InvalidRequestError,
  McpTaskError,
  MethodNotFoundError,
  MissingCapabilityError,
  ParseError,
  QuotaExceededError,
  RequestTooLargeError,
  TaskCancelledError,
  TaskExpiredError,
  TaskGoneError,
  TaskNotFoundError,
  TransportError,
  UnsupportedVersionError,
  toError,
} from "./errors.js";

/** The extension identifier, `io.modelcontextprotocol/tasks`. */
export const EXTENSION_ID: string = native.EXTENSION_ID;
/** The MCP revision spoken, `2026-07-28`. */
export const PROTOCOL_VERSION: string = native.PROTOCOL_VERSION;

/** A tool's result (`CallToolResult`), as the server sent it. */
export interface CallToolResult {
  content: Array<Record<string, unknown>>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  [key: string]: unknown;
}

/** What a `TaskDriver` keeps across a restart (from `state()`, for `TaskDriver.resume`). */
export interface DriverState {
  task_id: string;
  last: TaskState;
  seen_keys: string[];
  answered_keys: string[];
  cancel: "stop" | "observe" | null;
}

/** A native driver re-attached by `TaskDriver.resume`, handed to the constructor. */
class Resumed {
  constructor(readonly native: NativeModule.NativeTaskDriver) {}
}

/** A JSON-RPC error object. */
export interface RpcError {
  code: number;
  message: string;
  data?: unknown;
}

/** A task's state (`DetailedTask`): the task fields plus `result`, `error` or `inputRequests`. */
export interface TaskState {
  taskId: string;
  status: "working" | "input_required" | "completed" | "failed" | "cancelled";
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs?: number | null;
  pollIntervalMs?: number;
  result?: CallToolResult;
  error?: RpcError;
  inputRequests?: Record<string, { method: string; params?: Record<string, unknown> }>;
  [key: string]: unknown;
}

/** How a call ended, as far as the client is concerned. */
export type Outcome =
  | { kind: "completed"; result: CallToolResult }
  | { kind: "failed"; error: RpcError }
  | { kind: "cancelled" }
  | { kind: "gone" }
  | { kind: "expired" };

/** One input request the server asked (an MRTR round before a task, or a task's input_required). */
export interface InputRequest {
  /** The task asking, or `null` for an MRTR round of `tools/call`. */
  taskId: string | null;
  /** The key the answer goes under. */
  key: string;
  /** `elicitation/create`, `sampling/createMessage`, `roots/list`, ... */
  method: string;
  params: Record<string, unknown>;
}

/**
 * Answers an input request: return the response object (an `ElicitResult`, `CreateMessageResult`,
 * ...), or `undefined` (or `null`) to leave it open (answer later with `TaskExecution.answer`).
 * A handler that throws, or returns anything but an object, ends the call at once: it rejects
 * with an `InternalError` (`data.reason` `input_handler_failed`) whose `cause` is what was thrown,
 * and a task is cancelled (best effort). `onInputRequest` refuses a handler declaring more than
 * one parameter.
 */
export type InputHandler = (request: InputRequest) => unknown | Promise<unknown>;

/** What the input handler threw, by task and key, until the error it caused is thrown (then it
 * becomes that error's `cause`). Bounded: one nobody takes is forgotten after `LIMIT` later ones. */
class HandlerFailures {
  static readonly LIMIT = 256;
  readonly #thrown = new Map<string, unknown>();

  keep(taskId: string | null, key: string, thrown: unknown): void {
    this.#thrown.set(`${taskId ?? ""}\u0000${key}`, thrown);
    while (this.#thrown.size > HandlerFailures.LIMIT) {
      this.#thrown.delete(this.#thrown.keys().next().value as string);
    }
  }

  /** `error` with what the handler threw as its `cause`, when a failing handler caused it. */
  chain(error: unknown): unknown {
    if (error instanceof McpTaskError) {
      const data = (error.data ?? {}) as { reason?: string; taskId?: string | null; key?: string };
      const id = `${data.taskId ?? ""}\u0000${data.key}`;
      if (data.reason === "input_handler_failed" && this.#thrown.has(id)) {
        Object.defineProperty(error, "cause", { value: this.#thrown.get(id), configurable: true, writable: true });
        this.#thrown.delete(id);
      }
    }
    return error;
  }
}

/** Options of `TasksClient`: core's `ClientOptions`; absent ones take core's defaults. */
export interface TasksClientOptions {
  /** The server's Streamable HTTP endpoint (give this or `command`). */
  url?: string;
  /**
   * The program of a stdio server the client starts as its child (give this or `url`). It starts
   * on the first call, again on the next call after it died (its listens are re-sent), and ends
   * on `close()`: stdin closed, then SIGTERM, then SIGKILL.
   */
  command?: string;
  /** The stdio server's arguments. */
  args?: string[];
  /** Environment variables set for the stdio server (added to the inherited ones). */
  env?: Record<string, string>;
  /** The stdio server's working directory (default this process's). */
  cwd?: string;
  /** The stdio server's stderr: `inherit` (default), `capture` (quoted when it exits) or `discard`. */
  stderr?: "inherit" | "capture" | "discard";
  /**
   * Where task references are kept: `sqlite:///path/to/file.db`, `memory://` (lost on exit), or
   * absent for the default file (`$MCP_TASKS_CLIENT_DB`, else `$XDG_DATA_HOME/mcp-tasks/client.db`,
   * else `~/.local/share/mcp-tasks/client.db`).
   */
  store?: string;
  /** Headers sent with every request, e.g. the same `Authorization` your other MCP client sends. */
  headers?: Record<string, string>;
  /** `clientInfo.name` sent in every request's `_meta` (default `mcp-tasks`). */
  clientName?: string;
  /** `clientInfo.version` (default the package version). */
  clientVersion?: string;
  /** Listen for `notifications/tasks` when the server offers `subscriptions/listen` (default true). */
  notifications?: boolean;
  /** Poll interval when the server gives none (ms, default 1000). */
  defaultPollMs?: number;
  /** The shortest poll interval honoured (ms, default 100). */
  minPollMs?: number;
  /** The most MRTR rounds one `callTool` may take (default 8). */
  maxInputRounds?: number;
  /**
   * The client capabilities every request declares besides the tasks extension (default
   * `{ elicitation: {} }`, form elicitation). Servers ask only for input a request declares, so
   * name what `onInput` answers, e.g. `{ elicitation: {}, sampling: {}, roots: {} }`.
   */
  capabilities?: Record<string, unknown>;
}

/** Options of one `callTool`. */
export interface CallToolOptions {
  /** Aborting cancels the task (`tasks/cancel`); `result()` then resolves `cancelled`. */
  signal?: AbortSignal;
}

/** A task being followed. Following stops when the object is garbage-collected. */
export class TaskExecution {
  readonly #native: NativeModule.NativeTaskExecution;
  readonly #failures: HandlerFailures | undefined;

  /** The call's client span (the application's OpenTelemetry), ended with the outcome. */
  #span: otel.Span | null;

  /** @internal */
  constructor(nativeExecution: NativeModule.NativeTaskExecution, failures?: HandlerFailures, span?: otel.Span | null) {
    this.#native = nativeExecution;
    this.#failures = failures;
    this.#span = span ?? null;
  }

  /** The task id. */
  get taskId(): string {
    return this.#native.taskId;
  }

  /** The latest state seen. */
  latest(): TaskState {
    return parseJson(this.#native.latest()) as TaskState;
  }

  /** Every newer state, from polls and notifications, until the task has an outcome. */
  async *updates(): AsyncGenerator<TaskState, void, undefined> {
    for (;;) {
      const next = await mapped(() => this.#native.nextUpdate());
      if (next === null) {
        return;
      }
      yield parseJson(next) as TaskState;
    }
  }

  /** Waits for the outcome; it is then marked delivered (`resumeAll` will not return it again). */
  async result(): Promise<Outcome> {
    const outcome = parseJson(await mapped(() => this.#native.result())) as Outcome;
    const error = (outcome as { error?: { code?: number } }).error;
    otel.ended(this.#span, outcome.kind, outcome.kind === "failed" ? error?.code : undefined);
    this.#span = null;
    return outcome;
  }

  /**
   * Sends `tasks/cancel`. `stop` (default): the outcome is `cancelled` once the server
   * acknowledges. `observe`: keep following until the server's final state.
   */
  cancel(mode: "stop" | "observe" = "stop"): void {
    mappedSync(() => this.#native.cancel(mode));
  }

  /**
   * Answers input request `key` (one the handler left open); rejects with `InvalidParamsError`
   * for a key the server never asked, one already answered, or a finished task.
   */
  async answer(key: string, response: unknown): Promise<void> {
    await mapped(() => this.#native.answer(key, stringifyJson(response)));
  }

  /** The `CallToolResult`, or throws the typed error (`TaskCancelledError`, `TaskGoneError`, ...). */
  async value(): Promise<CallToolResult> {
    const outcome = await this.result();
    try {
      return valueOf(outcome, this.taskId);
    } catch (error) {
      throw this.#failures?.chain(error) ?? error;
    }
  }
}

/** The result of an outcome, or the typed error core names for it (cancelled, gone, expired, failed). */
function valueOf(outcome: Outcome, taskId: string): CallToolResult {
  return parseJson(mappedSync(() => native.outcomeResult(stringifyJson(outcome), taskId))) as CallToolResult;
}

/** What both kinds of execution offer: the same face in every language. */
interface ExecutionFace {
  /** The outcome (an immediate result is `completed`). */
  result(): Promise<Outcome>;
  /** The `CallToolResult`, or throws the typed error for a failed, cancelled, gone or expired task. */
  value(): Promise<CallToolResult>;
  /** Every newer state of the task (none for an immediate result). */
  updates(): AsyncGenerator<TaskState, void, undefined>;
  /** Sends `tasks/cancel` (nothing to cancel for an immediate result). */
  cancel(mode?: "stop" | "observe"): void;
  /** Answers an input request the handler left open (an immediate result asks nothing: rejects). */
  answer(key: string, response: unknown): Promise<void>;
}

/** What `callTool` returned: an immediate result, or a task being followed. */
export type Execution =
  | (ExecutionFace & {
      kind: "immediate";
      taskId: null;
      task: undefined;
      callToolResult: CallToolResult;
    })
  | (ExecutionFace & {
      kind: "task";
      taskId: string;
      task: TaskExecution;
      /** The `CreateTaskResult`. */
      created: TaskState;
    });

// eslint-disable-next-line @typescript-eslint/require-yield
async function* none(): AsyncGenerator<TaskState, void, undefined> {}

/** A client of one tasks server. */
export class TasksClient {
  readonly #options: TasksClientOptions;
  #native: NativeModule.NativeClient | undefined;
  #handler: InputHandler | undefined;

  constructor(options: TasksClientOptions) {
    if (!options || (typeof options.url !== "string" && typeof options.command !== "string")) {
      throw new TypeError("TasksClient needs { url } or { command, args?, env?, cwd? }");
    }
    this.#options = { ...options };
  }

  readonly #failures = new HandlerFailures();

  /** Sets the handler for input requests (replacing any earlier one); throws `TypeError` for one
   * that is no function or declares more than one parameter (it is called with one request). */
  onInputRequest(handler: InputHandler | undefined): this {
    if (handler !== undefined) {
      if (typeof handler !== "function") {
        throw new TypeError(`the input handler must be a function, not ${typeof handler}`);
      }
      if (handler.length > 1) {
        throw new TypeError(
          `the input handler is called with one argument, the InputRequest; ${handler.name || "this one"} declares ${handler.length}`,
        );
      }
    }
    this.#handler = handler;
    return this;
  }

  #client(): NativeModule.NativeClient {
    if (this.#native === undefined) {
      const o = this.#options;
      this.#native = mappedSync(
        () =>
          new native.NativeClient(
            // Core's ClientOptions as they are (core checks how they combine), headers as
            // ordered pairs.
            stringifyJson({ ...o, headers: Object.entries(o.headers ?? {}) }),
            (requestJson) => this.#answer(requestJson),
          ),
      );
    }
    return this.#native;
  }

  async #answer(requestJson: string): Promise<string | null> {
    const handler = this.#handler;
    if (handler === undefined) {
      return null;
    }
    const request = parseJson<InputRequest>(requestJson);
    let response: unknown;
    try {
      response = await handler(request);
    } catch (error) {
      // Core ends the call with this failure; the thrown value becomes the error's `cause`.
      this.#failures.keep(request.taskId, request.key, error);
      throw error;
    }
    // Core checks the shape: anything but an object fails the call, naming what it was.
    return response === undefined || response === null ? null : stringifyJson(response);
  }

  /**
   * Calls a tool. A server that makes a task of it answers with a `CreateTaskResult`; the client
   * then follows the task. MRTR rounds before the task go to the input handler.
   */
  async callTool(name: string, args: Record<string, unknown> = {}, opts: CallToolOptions = {}): Promise<Execution> {
    const client = this.#client();
    // Where the application records spans: a client span until the task's outcome, whose
    // context goes with the call and every request about its task.
    const traced = otel.clientSpan(name);
    let call: NativeModule.NativeCall;
    try {
      const carrier = traced === null ? null : JSON.stringify(traced.carrier);
      call = await mapped(() => client.callTool(name, stringifyJson(args), carrier));
    } catch (error) {
      otel.ended(traced?.span, "failed", (error as { code?: number }).code);
      throw this.#failures.chain(error);
    }
    const nativeTask = call.takeTask();
    const payload = parseJson<Record<string, unknown>>(call.payload);
    if (nativeTask === null) {
      otel.ended(traced?.span, "completed");
      const result = payload as CallToolResult;
      return {
        kind: "immediate",
        taskId: null,
        result: async () => ({ kind: "completed", result }),
        value: async () => result,
        updates: none,
        cancel: () => {},
        answer: async (key) => {
          throw new InvalidParamsError(null, `input key ${stringifyJson(key)} was not requested: the call answered at once`);
        },
        task: undefined,
        callToolResult: result,
      };
    }
    traced?.span.setAttribute("mcp.task.id", nativeTask.taskId);
    const task = new TaskExecution(nativeTask, this.#failures, traced?.span);
    if (opts.signal) {
      const abort = () => task.cancel("stop");
      if (opts.signal.aborted) {
        abort();
      } else {
        opts.signal.addEventListener("abort", abort, { once: true });
      }
    }
    return {
      kind: "task",
      taskId: task.taskId,
      result: () => task.result(),
      value: () => task.value(),
      updates: () => task.updates(),
      cancel: (mode) => task.cancel(mode),
      answer: (key, response) => task.answer(key, response),
      task,
      created: payload as TaskState,
    };
  }

  /** Re-attaches to every persisted task whose outcome was not delivered yet (after a restart). */
  async resumeAll(): Promise<TaskExecution[]> {
    const client = this.#client();
    const tasks = await mapped(() => client.resumeAll());
    return tasks.map((t) => new TaskExecution(t, this.#failures));
  }

  /**
   * Stops following every task (their references stay for `resumeAll`) and closes the
   * transport: a stdio server's child ends. Later calls reject with `TransportError`.
   */
  async close(): Promise<void> {
    await this.#client().close();
  }
}

/**
 * The sans-IO client protocol, for hosts that send JSON-RPC themselves (for example through an
 * existing `@modelcontextprotocol/client` transport): classify a `tools/call` answer and follow
 * one task with a driver fed your responses and a clock you pass in.
 */
export const protocol = {
  /** Classifies a `tools/call` result; throws `InvalidParamsError` for answers the client must refuse. */
  classifyToolsCall(
    result: unknown,
    declared: boolean,
  ):
    | { kind: "complete"; result: CallToolResult }
    | { kind: "input_required"; result: Record<string, unknown> }
    | { kind: "task"; task: TaskState } {
    return parseJson(mappedSync(() => native.classifyToolsCall(stringifyJson(result), declared)));
  },
  TaskDriver: class TaskDriver {
    readonly #native: NativeModule.NativeTaskDriver;

    /** Starts from a `CreateTaskResult` received at `nowMs`. */
    constructor(created: unknown, nowMs: number, config: { defaultPollMs?: number; minPollMs?: number } = {}) {
      this.#native =
        created instanceof Resumed
          ? created.native
          : mappedSync(
              () => new native.NativeTaskDriver(stringifyJson(created), nowMs, config.defaultPollMs, config.minPollMs),
            );
    }
    /** Re-attaches from a saved `state()` at `nowMs` (after a restart). */
    static resume(
      state: DriverState,
      nowMs: number,
      config: { defaultPollMs?: number; minPollMs?: number } = {},
    ): TaskDriver {
      const resumed = mappedSync(() =>
        native.NativeTaskDriver.resume(stringifyJson(state), nowMs, config.defaultPollMs, config.minPollMs),
      );
      return new TaskDriver(new Resumed(resumed), nowMs, config);
    }
    /** What survives a restart: task id, last state, surfaced and answered keys, requested cancel. */
    state(): DriverState {
      return parseJson(this.#native.state()) as DriverState;
    }
    get taskId(): string {
      return this.#native.taskId;
    }
    latest(): TaskState {
      return parseJson(this.#native.latest()) as TaskState;
    }
    outcome(): Outcome | null {
      const o = this.#native.outcome();
      return o === null ? null : (parseJson(o) as Outcome);
    }
    handleGet(nowMs: number, result: unknown): void {
      mappedSync(() => this.#native.handleGet(nowMs, stringifyJson(result)));
    }
    handleNotification(nowMs: number, params: unknown): void {
      mappedSync(() => this.#native.handleNotification(nowMs, stringifyJson(params)));
    }
    handleGetError(nowMs: number, error: RpcError): void {
      mappedSync(() => this.#native.handleGetError(nowMs, stringifyJson(error)));
    }
    /** A `tasks/update` or `tasks/cancel` was answered: `error` is its JSON-RPC error, or `null` for the ack. */
    handleAck(nowMs: number, method: "tasks/update" | "tasks/cancel", error: RpcError | null = null): void {
      mappedSync(() => this.#native.handleAck(nowMs, method, error === null ? null : stringifyJson(error)));
    }
    pollTimeout(): number | null {
      return this.#native.pollTimeout();
    }
    handleTimeout(nowMs: number): void {
      this.#native.handleTimeout(nowMs);
    }
    pollOutgoing(): { method: string; params: Record<string, unknown> } | null {
      const o = this.#native.pollOutgoing();
      return o === null ? null : parseJson(o);
    }
    /** Sends a W3C trace context (`{ traceparent, tracestate?, baggage? }`, as a propagator
     * writes it; `null` for none) in the `_meta` of every later request about the task, and
     * keeps it in `state()`. An invalid one is ignored. */
    setTrace(carrier: Record<string, string> | null): void {
      this.#native.setTrace(carrier === null ? null : stringifyJson(carrier));
    }
    pollEvent():
      | { kind: "status"; task: TaskState }
      | { kind: "input_requested"; key: string; request: { method: string; params?: Record<string, unknown> } }
      | { kind: "finished"; outcome: Outcome }
      | null {
      const e = this.#native.pollEvent();
      return e === null ? null : parseJson(e);
    }
    answer(key: string, response: unknown): void {
      mappedSync(() => this.#native.answer(key, stringifyJson(response)));
    }
    cancel(mode: "stop" | "observe" = "stop"): void {
      mappedSync(() => this.#native.cancel(mode));
    }
  },
};
