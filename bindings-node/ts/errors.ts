/**
 * The one place native errors become JavaScript ones, with one class per row of core's
 * `ERROR_CLASSES` (the same names in Python and Swift; `test/errors.test.mjs` keeps this file and
 * the table equal). The native module throws `Error`s whose message is
 * `mcp-tasks:{"class", "code", "message", "data", "causes"}`; `toError` turns them into the class
 * core named, with the causes chained as `cause`. Other errors pass through unchanged.
 */

/** Any error from a tasks server or from this library; carries code, message and data. */
export class McpTaskError extends Error {
  /** The JSON-RPC code of the class (`null` for the root and task outcomes). */
  static readonly CODE: number | null = null;
  /** The JSON-RPC error code (-32603 for task outcomes, which have none). */
  readonly code: number;
  /** The error's `data`, when the server sent one. */
  readonly data: unknown;

  constructor(code: number | null, message: string, data?: unknown, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code ?? (new.target as typeof McpTaskError).CODE ?? -32603;
    this.data = data ?? undefined;
  }
}

/** -32700: the message was not valid JSON. */
export class ParseError extends McpTaskError {
  static override readonly CODE: number | null = -32700;
}
/** -32600: the message was not a JSON-RPC request object, or the request was refused. */
export class InvalidRequestError extends McpTaskError {
  static override readonly CODE: number | null = -32600;
}
/** -32600 (HTTP 413): the request body was over the server's limit. */
export class RequestTooLargeError extends InvalidRequestError {
  static override readonly CODE: number | null = -32600;
}
/** -32601: the server does not serve the method. */
export class MethodNotFoundError extends McpTaskError {
  static override readonly CODE: number | null = -32601;
}
/** -32602: missing or malformed params, something over a size limit, or a misuse of this library. */
export class InvalidParamsError extends McpTaskError {
  static override readonly CODE: number | null = -32602;
}
/** -32602 on tasks/*: the task id is unknown, purged, or another principal's. */
export class TaskNotFoundError extends InvalidParamsError {
  static override readonly CODE: number | null = -32602;
}
/** -32020: a standard Mcp-* header was missing, repeated or disagreed with the body. */
export class HeaderMismatchError extends McpTaskError {
  static override readonly CODE: number | null = -32020;
}
/** -32021: the request did not declare a client capability it needs (data.requiredCapabilities). */
export class MissingCapabilityError extends McpTaskError {
  static override readonly CODE: number | null = -32021;
}
/** -32022: the server does not speak the request's protocol version (data.supported). */
export class UnsupportedVersionError extends McpTaskError {
  static override readonly CODE: number | null = -32022;
}
/** -32603 or a code this library does not know: a server fault, or a store failure. */
export class InternalError extends McpTaskError {
  static override readonly CODE: number | null = -32603;
}
/** -32010: the server's cap on live tasks, the caller's or in total, is reached (data.reason, data.limit). */
export class QuotaExceededError extends McpTaskError {
  static override readonly CODE: number | null = -32010;
}
/** The request could not be sent or its answer not read (the cause chain says why). */
export class TransportError extends InternalError {
  static override readonly CODE: number | null = -32603;
}
/** The task ended cancelled (a result was expected). */
export class TaskCancelledError extends McpTaskError {}
/** The server no longer knows a task this client followed (purged or never there). */
export class TaskGoneError extends TaskNotFoundError {
  static override readonly CODE: number | null = -32602;
}
/** The task's ttlMs passed before it finished. */
export class TaskExpiredError extends McpTaskError {}

type ErrorClass = new (code: number | null, message: string, data?: unknown, options?: { cause?: unknown }) => McpTaskError;

/** Every class by name, as core names them. */
export const ERROR_CLASSES: Readonly<Record<string, ErrorClass>> = {
  McpTaskError,
  ParseError,
  InvalidRequestError,
  RequestTooLargeError,
  MethodNotFoundError,
  InvalidParamsError,
  TaskNotFoundError,
  HeaderMismatchError,
  MissingCapabilityError,
  UnsupportedVersionError,
  InternalError,
  QuotaExceededError,
  TransportError,
  TaskCancelledError,
  TaskGoneError,
  TaskExpiredError,
};

const PREFIX = "mcp-tasks:";

/** Maps an error thrown by the native module to the `McpTaskError` subclass core named. */
export function toError(error: unknown): unknown {
  if (!(error instanceof Error) || !error.message.startsWith(PREFIX)) {
    return error;
  }
  const { class: name, code, message, data, causes } = JSON.parse(error.message.slice(PREFIX.length)) as {
    class: string;
    code: number | null;
    message: string;
    data?: unknown;
    causes?: string[];
  };
  // The innermost cause first, so each wraps the next.
  let cause: Error | undefined;
  for (const text of [...(causes ?? [])].reverse()) {
    cause = new Error(text, cause === undefined ? undefined : { cause });
  }
  const Class = ERROR_CLASSES[name] ?? InternalError;
  return new Class(code, message, data ?? undefined, cause === undefined ? undefined : { cause });
}

/** Runs `fn`, rethrowing native errors as `McpTaskError`s. */
export async function mapped<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw toError(error);
  }
}

/** The synchronous form of `mapped`. */
export function mappedSync<T>(fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    throw toError(error);
  }
}
