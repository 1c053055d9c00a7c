/**
 * mcp-tasks for Node: a client for servers speaking the MCP tasks extension
 * (`io.modelcontextprotocol/tasks`, SEP-2663, MCP 2026-07-28), on the Rust core.
 *
 * `TasksClient` calls tools over Streamable HTTP and follows the tasks they create: it polls
 * `tasks/get` at the server's `pollIntervalMs`, listens on `subscriptions/listen` when the server
 * offers it, answers input requests through your handler, cancels, and keeps task references in
 * SQLite so `resumeAll()` picks tasks up again after a restart.
 */

import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

import type * as NativeModule from "../native.js";
import { mapped, mappedSync } from "./errors.js";

export {
  HeaderMismatchError,
  InternalError,
  InvalidParamsError,
  McpTaskError,
  MethodNotFoundError,
  MissingCapabilityError,
  toError,
} from "./errors.js";

const native: typeof NativeModule = createRequire(import.meta.url)(
  join(dirname(fileURLToPath(import.meta.url)), "..", `mcp-tasks.${process.platform}-${process.arch}-gnu.node`),
);

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

/** A JSON-RPC error object. */
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
 * ...), or `undefined` to leave it open (answer later with `TaskExecution.answer`).
 */
export type InputHandler = (request: InputRequest) => unknown | Promise<unknown>;

/** Options of `TasksClient`. */
export interface TasksClientOptions {
  /** The server's Streamable HTTP endpoint. */
  url: string;
  /**
   * Where task references are kept: `sqlite:///path/to/file.db`, `memory://` (lost on exit), or
   * absent for the default file (`$MCP_TASKS_CLIENT_DB`, else `$XDG_DATA_HOME/mcp-tasks/client.db`,
   * else `~/.local/share/mcp-tasks/client.db`).
   */
  store?: string;
  /** Headers sent with every request, e.g. the same `Authorization` your other MCP client sends. */
  headers?: Record<string, string>;
  /** The `clientInfo` sent in every request's `_meta`. */
  clientInfo?: { name: string; version: string };
  /** Listen for `notifications/tasks` when the server offers `subscriptions/listen` (default true). */
  notifications?: boolean;
  /** Poll interval when the server gives none (ms, default 1000). */
  defaultPollMs?: number;
  /** The shortest poll interval honoured (ms, default 100). */
  minPollMs?: number;
}

/** Options of one `callTool`. */
export interface CallToolOptions {
  /** Aborting cancels the task (`tasks/cancel`); `result()` then resolves `cancelled`. */
  signal?: AbortSignal;
}

/** A task being followed. Following stops when the object is garbage-collected. */
export class TaskExecution {
  readonly #native: NativeModule.NativeTaskExecution;

  /** @internal */
  constructor(nativeExecution: NativeModule.NativeTaskExecution) {
    this.#native = nativeExecution;
  }

  /** The task id. */
  get taskId(): string {
    return this.#native.taskId;
  }

  /** The latest state seen. */
  latest(): TaskState {
    return JSON.parse(this.#native.latest()) as TaskState;
  }

  /** Every newer state, from polls and notifications, until the task has an outcome. */
  async *updates(): AsyncGenerator<TaskState, void, undefined> {
    for (;;) {
      const next = await mapped(() => this.#native.nextUpdate());
      if (next === null) {
        return;
      }
      yield JSON.parse(next) as TaskState;
    }
  }

  /** Waits for the outcome; it is then marked delivered (`resumeAll` will not return it again). */
  async result(): Promise<Outcome> {
    return JSON.parse(await mapped(() => this.#native.result())) as Outcome;
  }

  /**
   * Sends `tasks/cancel`. `stop` (default): the outcome is `cancelled` once the server
   * acknowledges. `observe`: keep following until the server's final state.
   */
  cancel(mode: "stop" | "observe" = "stop"): void {
    mappedSync(() => this.#native.cancel(mode));
  }

  /** Answers input request `key` (one the handler left open). */
  answer(key: string, response: unknown): void {
    mappedSync(() => this.#native.answer(key, JSON.stringify(response)));
  }
}

/** What `callTool` returned: an immediate result, or a task being followed. */
export type Execution =
  | {
      kind: "immediate";
      /** The tool's result. */
      result(): Promise<Outcome>;
      updates(): AsyncGenerator<TaskState, void, undefined>;
      cancel(): void;
      task: undefined;
      callToolResult: CallToolResult;
    }
  | {
      kind: "task";
      /** The task's outcome. */
      result(): Promise<Outcome>;
      updates(): AsyncGenerator<TaskState, void, undefined>;
      cancel(mode?: "stop" | "observe"): void;
      task: TaskExecution;
      /** The `CreateTaskResult`. */
      created: TaskState;
    };

// eslint-disable-next-line @typescript-eslint/require-yield
async function* none(): AsyncGenerator<TaskState, void, undefined> {}

/** A client of one tasks server. */
export class TasksClient {
  readonly #options: TasksClientOptions;
  #native: NativeModule.NativeClient | undefined;
  #handler: InputHandler | undefined;

  constructor(options: TasksClientOptions) {
    if (!options || typeof options.url !== "string") {
      throw new TypeError("TasksClient needs { url }");
    }
    this.#options = { ...options };
  }

  /** Sets the handler for input requests (replacing any earlier one). */
  onInputRequest(handler: InputHandler | undefined): this {
    this.#handler = handler;
    return this;
  }

  #client(): NativeModule.NativeClient {
    if (this.#native === undefined) {
      const o = this.#options;
      this.#native = mappedSync(
        () =>
          new native.NativeClient(
            {
              url: o.url,
              headers: o.headers,
              store: o.store,
              clientName: o.clientInfo?.name,
              clientVersion: o.clientInfo?.version,
              notifications: o.notifications,
              defaultPollMs: o.defaultPollMs,
              minPollMs: o.minPollMs,
            },
            (taskId, key, requestJson) => this.#answer(taskId, key, requestJson),
          ),
      );
    }
    return this.#native;
  }

  async #answer(taskId: string | null, key: string, requestJson: string): Promise<string | null> {
    const handler = this.#handler;
    if (handler === undefined) {
      return null;
    }
    const request = JSON.parse(requestJson) as { method: string; params?: Record<string, unknown> };
    try {
      const response = await handler({ taskId, key, method: request.method, params: request.params ?? {} });
      return response === undefined ? null : JSON.stringify(response);
    } catch (error) {
      // The request stays open; the application may still answer it.
      queueMicrotask(() => {
        throw error;
      });
      return null;
    }
  }

  /**
   * Calls a tool. A server that makes a task of it answers with a `CreateTaskResult`; the client
   * then follows the task. MRTR rounds before the task go to the input handler.
   */
  async callTool(name: string, args: Record<string, unknown> = {}, opts: CallToolOptions = {}): Promise<Execution> {
    const client = this.#client();
    const call = await mapped(() => client.callTool(name, JSON.stringify(args)));
    const nativeTask = call.takeTask();
    const payload = JSON.parse(call.payload) as Record<string, unknown>;
    if (nativeTask === null) {
      const result = payload as CallToolResult;
      return {
        kind: "immediate",
        result: async () => ({ kind: "completed", result }),
        updates: none,
        cancel: () => {},
        task: undefined,
        callToolResult: result,
      };
    }
    const task = new TaskExecution(nativeTask);
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
      result: () => task.result(),
      updates: () => task.updates(),
      cancel: (mode) => task.cancel(mode),
      task,
      created: payload as TaskState,
    };
  }

  /** Re-attaches to every persisted task whose outcome was not delivered yet (after a restart). */
  async resumeAll(): Promise<TaskExecution[]> {
    const client = this.#client();
    const tasks = await mapped(() => client.resumeAll());
    return tasks.map((t) => new TaskExecution(t));
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
    return JSON.parse(mappedSync(() => native.classifyToolsCall(JSON.stringify(result), declared)));
  },
  TaskDriver: class TaskDriver {
    readonly #native: NativeModule.NativeTaskDriver;

    /** Starts from a `CreateTaskResult` received at `nowMs`. */
    constructor(created: unknown, nowMs: number, config: { defaultPollMs?: number; minPollMs?: number } = {}) {
      this.#native =
        created instanceof Resumed
          ? created.native
          : mappedSync(
              () => new native.NativeTaskDriver(JSON.stringify(created), nowMs, config.defaultPollMs, config.minPollMs),
            );
    }
    /** Re-attaches from a saved `state()` at `nowMs` (after a restart). */
    static resume(
      state: DriverState,
      nowMs: number,
      config: { defaultPollMs?: number; minPollMs?: number } = {},
    ): TaskDriver {
      const resumed = mappedSync(() =>
        native.NativeTaskDriver.resume(JSON.stringify(state), nowMs, config.defaultPollMs, config.minPollMs),
      );
      return new TaskDriver(new Resumed(resumed), nowMs, config);
    }
    /** What survives a restart: task id, last state, surfaced and answered keys, requested cancel. */
    state(): DriverState {
      return JSON.parse(this.#native.state()) as DriverState;
    }
    get taskId(): string {
      return this.#native.taskId;
    }
    latest(): TaskState {
      return JSON.parse(this.#native.latest()) as TaskState;
    }
    outcome(): Outcome | null {
      const o = this.#native.outcome();
      return o === null ? null : (JSON.parse(o) as Outcome);
    }
    handleGet(nowMs: number, result: unknown): void {
      mappedSync(() => this.#native.handleGet(nowMs, JSON.stringify(result)));
    }
    handleNotification(nowMs: number, params: unknown): void {
      mappedSync(() => this.#native.handleNotification(nowMs, JSON.stringify(params)));
    }
    handleGetError(nowMs: number, error: RpcError): void {
      mappedSync(() => this.#native.handleGetError(nowMs, JSON.stringify(error)));
    }
    /** A `tasks/update` or `tasks/cancel` was answered: `error` is its JSON-RPC error, or `null` for the ack. */
    handleAck(nowMs: number, method: "tasks/update" | "tasks/cancel", error: RpcError | null = null): void {
      mappedSync(() => this.#native.handleAck(nowMs, method, error === null ? null : JSON.stringify(error)));
    }
    pollTimeout(): number | null {
      return this.#native.pollTimeout();
    }
    handleTimeout(nowMs: number): void {
      this.#native.handleTimeout(nowMs);
    }
    pollOutgoing(): { method: string; params: Record<string, unknown> } | null {
      const o = this.#native.pollOutgoing();
      return o === null ? null : JSON.parse(o);
    }
    pollEvent():
      | { kind: "status"; task: TaskState }
      | { kind: "input_requested"; key: string; request: { method: string; params?: Record<string, unknown> } }
      | { kind: "finished"; outcome: Outcome }
      | null {
      const e = this.#native.pollEvent();
      return e === null ? null : JSON.parse(e);
    }
    answer(key: string, response: unknown): void {
      mappedSync(() => this.#native.answer(key, JSON.stringify(response)));
    }
    cancel(mode: "stop" | "observe" = "stop"): void {
      mappedSync(() => this.#native.cancel(mode));
    }
  },
};
