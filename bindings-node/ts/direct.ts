/**
 * The direct run of a task's tool: a tool that takes no context runs on an `McpServer` connected
 * to a transport without a wire, instead of through a per-task HTTP exchange with the SDK's
 * handler. The message still goes through the SDK's own dispatch (`Protocol`'s request handling:
 * the `_meta` envelope check, the wire codec's validation of the call and of its result, the
 * input-required seam) and its own `tools/call` handler (lookup, the tool's input schema, the
 * callback, the output schema, the result's projection); what is skipped is the HTTP framing, the
 * per-request transport, the `Request`/`Response` pair and, when the factory reads no request
 * context, the factory's server per task.
 *
 * The SDK has no public way to mark a hand-connected instance as serving the 2026-07-28 era (its
 * HTTP entry does it with a package-internal setter), and no public listing of an `McpServer`'s
 * tools. Both internals are read here only after checking they are there
 * (`_negotiatedProtocolVersion`, the field the SDK's own setter writes; `_registeredTools`); when
 * either is missing every task runs through the exchange, as before. `test/direct.test.mjs`
 * fails if @modelcontextprotocol/server changes them.
 */

import {
  type AuthInfo,
  type JSONRPCMessage,
  McpServer,
  type MessageExtraInfo,
  type Server,
  type Transport,
} from "@modelcontextprotocol/server";

/** The tool as the SDK's registry keeps it (2.x), as much as the choice of path reads. */
interface RegisteredTool {
  enabled?: boolean;
  inputSchema?: unknown;
  handler?: unknown;
  scopeChallenge?: unknown;
}

/** A JSON-RPC request as the SDK reads it. */
export interface CallMessage {
  jsonrpc?: string;
  id?: unknown;
  method: string;
  params?: { name?: unknown } & Record<string, unknown>;
}

/**
 * An SDK transport with no wire: `call` hands a request to the connected server under an id of
 * its own (callers' ids repeat: every client may send `id: 1`) and resolves to the server's
 * answer to it. Notifications the server sends (a tool's progress or log) have nobody to reach:
 * a task's run is not a stream a client reads, so they are dropped, as the exchange's
 * response body was.
 */
export class DirectTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;
  readonly #pending = new Map<number, (answer: JSONRPCMessage) => void>();
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

  /** The server's answer to `message` (a `result` or an `error` response). */
  call(message: CallMessage, extra: MessageExtraInfo): Promise<JSONRPCMessage> {
    const id = ++this.#next;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, resolve);
      try {
        this.onmessage!({ ...message, jsonrpc: "2.0", id } as JSONRPCMessage, extra);
      } catch (error) {
        this.#pending.delete(id);
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }
}

/** An SDK server connected for direct runs, and its transport. */
export interface Direct {
  server: McpServer;
  transport: DirectTransport;
}

/**
 * Connects `product` for direct runs, serving `revision`; `undefined` when it cannot be (a
 * low-level `Server`, an instance serving already, an SDK without the era field).
 */
export async function connectDirect(product: McpServer | Server, revision: string): Promise<Direct | undefined> {
  if (!(product instanceof McpServer) || !knowsTools(product)) {
    return undefined;
  }
  const inner = product.server as unknown as { _negotiatedProtocolVersion?: string; transport?: unknown };
  if (!("_negotiatedProtocolVersion" in inner) || inner.transport !== undefined) {
    return undefined;
  }
  const transport = new DirectTransport();
  await product.connect(transport);
  // What the SDK's HTTP entry does to each instance it serves a 2026-07-28 request with (its
  // internal `setNegotiatedProtocolVersion`): the instance then validates, answers and projects
  // results as that era's.
  inner._negotiatedProtocolVersion = revision;
  return { server: product, transport };
}

/** Whether `product` keeps its tools where `registeredTool` reads them. */
function knowsTools(product: McpServer): boolean {
  const registry = (product as unknown as { _registeredTools?: unknown })._registeredTools;
  return registry !== null && typeof registry === "object";
}

/** `name` in the server's registry (`undefined` when absent). */
function registeredTool(product: McpServer, name: string): RegisteredTool | undefined {
  const registry = (product as unknown as { _registeredTools: Record<string, RegisteredTool | undefined> })
    ._registeredTools;
  return Object.hasOwn(registry, name) ? registry[name] : undefined;
}

/**
 * Whether a task of `name` may run directly on `product`: an enabled tool whose callback declares
 * no context parameter, with no scope challenge and no `x-mcp-header` parameter (the SDK's HTTP
 * entry checks those two against the HTTP request, which a direct run does not have). Any
 * other tool, an unknown one included, runs through the exchange and gets the SDK's answer.
 */
export function runsDirect(product: McpServer, name: string): boolean {
  const tool = registeredTool(product, name);
  if (tool === undefined || tool.enabled === false || tool.scopeChallenge !== undefined) {
    return false;
  }
  // The SDK calls the callback `(args, ctx)` when the tool has an input schema, else `(ctx)`.
  if (!declaresAtMost(tool.handler, tool.inputSchema === undefined ? 0 : 1)) {
    return false;
  }
  const schema = product.toolInputSchemaJson(name);
  return schema === undefined || !JSON.stringify(schema).includes('"x-mcp-header"');
}

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
  const source = Function.prototype.toString.call(fn);
  if (source.includes("[native code]")) {
    return false;
  }
  const params = parameterList(source);
  if (params === undefined) {
    return false;
  }
  if (params.some((param) => param.startsWith("..."))) {
    return false;
  }
  // An arrow function has no `arguments` of its own; any other kind may read its arguments so.
  const arrow = /^(async\s*)?(\(|[\w$]+\s*=>)/.test(source);
  if (!arrow && /\barguments\b/.test(source)) {
    return false;
  }
  return params.length <= count;
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
