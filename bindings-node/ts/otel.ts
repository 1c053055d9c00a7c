// Task traces through the application's own OpenTelemetry API (SEP-414 trace context).
//
// mcp-tasks brings no OpenTelemetry SDK or exporter: where the application has
// `@opentelemetry/api` and registered a tracer provider, the server records a span per task
// request (a child of the caller's `_meta` context; the create's is what the task keeps, so every
// run is its child), a `task.run` span per run attempt on whichever process runs it, and the
// client a span per call that lasts until the task's outcome. Without the API, or without a
// provider, nothing here records anything, and core keeps the caller's `_meta` context.
import { createRequire } from "node:module";

/** The W3C trace context as a propagator's carrier (core validated it). */
export type Carrier = Record<string, string>;

interface SpanContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote?: boolean;
  traceState?: { serialize(): string };
}

/** The part of an OpenTelemetry span this module uses. */
export interface Span {
  spanContext(): SpanContext;
  setAttribute(key: string, value: string | number): Span;
  addEvent(name: string, attributes?: Record<string, number>, time?: number): Span;
  addLink(link: { context: SpanContext }): Span;
  setStatus(status: { code: number }): Span;
  updateName(name: string): Span;
  end(time?: number): void;
}

interface Api {
  trace: {
    getTracer(name: string): { startSpan(name: string, options?: object, context?: unknown): Span };
    getTracerProvider(): { getDelegate?(): object };
    setSpanContext(context: unknown, spanContext: SpanContext): unknown;
    setSpan(context: unknown, span: Span): unknown;
    getActiveSpan(): Span | undefined;
    getSpanContext(context: unknown): SpanContext | undefined;
  };
  context: { active(): unknown; with<T>(context: unknown, fn: () => T): T };
  ROOT_CONTEXT: unknown;
  createTraceState(raw?: string): { serialize(): string };
  SpanKind: { INTERNAL: number; SERVER: number; CLIENT: number };
  SpanStatusCode: { ERROR: number };
}

let loaded: Api | null | undefined;

/** The application's `@opentelemetry/api`, if it has one (an optional peer dependency). */
function api(): Api | null {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)("@opentelemetry/api") as Api;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}

/** The API when the application registered a tracer provider (the API's own proxy delegates to
 * a no-op one until then): only then is a request's trace context worth reading. */
export function tracing(): Api | null {
  const otel = api();
  const delegate = otel?.trace.getTracerProvider().getDelegate?.();
  return delegate === undefined || delegate.constructor.name === "NoopTracerProvider" ? null : otel;
}

/** The context of a carrier, as a remote parent. */
function parentOf(otel: Api, carrier: Carrier | null): unknown {
  const parts = carrier?.traceparent?.split("-");
  if (carrier == null || parts === undefined || parts.length < 4) {
    return otel.ROOT_CONTEXT;
  }
  return otel.trace.setSpanContext(otel.ROOT_CONTEXT, {
    traceId: parts[1]!,
    spanId: parts[2]!,
    traceFlags: Number.parseInt(parts[3]!, 16) & 1,
    isRemote: true,
    ...(carrier.tracestate !== undefined && { traceState: otel.createTraceState(carrier.tracestate) }),
  });
}

/** The carrier that hands `span` on as the parent, with `baggage` carried along. */
export function carrierOf(span: Span, baggage?: string): Carrier {
  const context = span.spanContext();
  const carrier: Carrier = {
    traceparent: `00-${context.traceId}-${context.spanId}-${context.traceFlags & 1 ? "01" : "00"}`,
  };
  const state = context.traceState?.serialize();
  if (state) {
    carrier.tracestate = state;
  }
  if (baggage !== undefined) {
    carrier.baggage = baggage;
  }
  return carrier;
}

/** Parses a carrier core gave as JSON. */
export function parseCarrier(json: string | null | undefined): Carrier | null {
  return json == null ? null : (JSON.parse(json) as Carrier);
}

/** The span of one request core serves (OpenTelemetry semantic conventions for MCP: kind
 * server, named `{mcp.method.name} {tool}`), a child of the caller's context. */
export function requestSpan(otel: Api, method: string, tool: string | undefined, caller: Carrier | null): Span {
  const attributes: Record<string, string> = { "mcp.method.name": method };
  if (method === "tools/call" && tool !== undefined) {
    attributes["gen_ai.tool.name"] = tool;
    attributes["gen_ai.operation.name"] = "execute_tool";
  }
  return otel.trace
    .getTracer("mcp-tasks")
    .startSpan(tool === undefined ? method : `${method} ${tool}`, { kind: otel.SpanKind.SERVER, attributes }, parentOf(otel, caller));
}

/** Links `span` to the trace a task keeps. */
export function link(span: Span, carrier: Carrier | null): void {
  const otel = api();
  if (otel === null || carrier === null) {
    return;
  }
  const parent = parentOf(otel, carrier);
  const context = otel.trace.getSpanContext(parent);
  if (context !== undefined) {
    span.addLink({ context });
  }
}

/** Marks a span failed with a JSON-RPC error code (the message may quote the user: not kept). */
export function failed(span: Span, code: number | string): void {
  const otel = api();
  span.setAttribute("error.type", String(code));
  if (otel !== null) {
    span.setStatus({ code: otel.SpanStatusCode.ERROR });
  }
}

/** The span of one run of a task: `task.run`, a child of the context the task keeps (a fresh
 * trace without one), with `task.attempt`; `null` when nothing records. */
export function runSpan(taskId: string, attempt: number, tool: string | undefined, kept: Carrier | null): Span | null {
  const otel = tracing();
  if (otel === null) {
    return null;
  }
  const attributes: Record<string, string | number> = { "mcp.task.id": taskId, "task.attempt": attempt };
  if (tool !== undefined) {
    attributes["gen_ai.tool.name"] = tool;
  }
  return otel.trace
    .getTracer("mcp-tasks")
    .startSpan("task.run", { kind: otel.SpanKind.INTERNAL, attributes }, parentOf(otel, kept));
}

/** Runs `fn` with `span` active, so the tool's own spans are its children. */
export function within<T>(span: Span | null, fn: () => T): T {
  const otel = api();
  return span === null || otel === null ? fn() : otel.context.with(otel.trace.setSpan(otel.context.active(), span), fn);
}

/** The client span of one `tools/call` (kind client), a child of the active span, and the carrier
 * to send; `null` when nothing records. */
export function clientSpan(tool: string): { span: Span; carrier: Carrier } | null {
  const otel = tracing();
  if (otel === null) {
    return null;
  }
  const span = otel.trace.getTracer("mcp-tasks").startSpan(
    `tools/call ${tool}`,
    {
      kind: otel.SpanKind.CLIENT,
      attributes: { "mcp.method.name": "tools/call", "gen_ai.tool.name": tool, "gen_ai.operation.name": "execute_tool" },
    },
    otel.context.active(),
  );
  return { span, carrier: carrierOf(span) };
}

/** Ends a span with the task's outcome (`task.status`; `error.type` for a failure). */
export function ended(span: Span | null | undefined, status: string, code?: number): void {
  if (span == null) {
    return;
  }
  span.setAttribute("task.status", status);
  if (code !== undefined) {
    failed(span, code);
  }
  span.end();
}
