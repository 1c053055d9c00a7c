/**
 * The one place native errors become JavaScript ones. The native module throws `Error`s whose
 * message is `mcp-tasks:{"code", "message", "data"}`; `toError` turns them into the subclass of
 * `McpTaskError` for the JSON-RPC code. Other errors pass through unchanged.
 */

/** An error from a tasks server or from this client, carrying the JSON-RPC `code`. */
export class McpTaskError extends Error {
  /** The JSON-RPC error code. */
  readonly code: number;
  /** The error's `data`, when the server sent one. */
  readonly data: unknown;

  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.data = data ?? undefined;
  }
}

/** -32602: bad params, or a task this caller may not see (unknown, purged, another principal's). */
export class InvalidParamsError extends McpTaskError {}
/** -32601: the server does not serve the method. */
export class MethodNotFoundError extends McpTaskError {}
/** -32020: a standard HTTP header disagreed with the body. */
export class HeaderMismatchError extends McpTaskError {}
/** -32021: the request lacked a client capability (`data.requiredCapabilities`). */
export class MissingCapabilityError extends McpTaskError {}
/** -32603 or any other code: a server fault, a transport failure, or a store failure. */
export class InternalError extends McpTaskError {}

const CLASSES: Record<number, new (code: number, message: string, data?: unknown) => McpTaskError> = {
  [-32602]: InvalidParamsError,
  [-32601]: MethodNotFoundError,
  [-32020]: HeaderMismatchError,
  [-32021]: MissingCapabilityError,
};

const PREFIX = "mcp-tasks:";

/** Maps an error thrown by the native module to its `McpTaskError` subclass. */
export function toError(error: unknown): unknown {
  if (!(error instanceof Error) || !error.message.startsWith(PREFIX)) {
    return error;
  }
  const { code, message, data } = JSON.parse(error.message.slice(PREFIX.length)) as {
    code: number;
    message: string;
    data?: unknown;
  };
  const Class = CLASSES[code] ?? InternalError;
  return new Class(code, message, data ?? undefined);
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
