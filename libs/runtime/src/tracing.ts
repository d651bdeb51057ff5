import { AsyncLocalStorage } from 'node:async_hooks';
import {
  context,
  propagation,
  trace,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  type Attributes,
  type Context,
  type ContextManager,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { HubConfig } from './config.js';
import { HubError, isFailure, Reason } from './errors.js';

export { SpanKind, SpanStatusCode };

/** The W3C header that carries a trace across HTTP, gRPC metadata, the outbox and the event log. */
export const TRACEPARENT = 'traceparent';

/**
 * Set while tracing runs. Every helper below checks it first, so with tracing off (the default)
 * the hot path pays one comparison and creates no span, context or header.
 */
let tracer: Tracer | undefined;

/** The active context through async calls (what the SDK's Node context manager does, without its package). */
class AsyncLocalContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.storage.run(ctx, () => fn.apply(thisArg, args));
  }

  bind<T>(ctx: Context, target: T): T {
    if (typeof target !== 'function') return target;
    const run = (...args: unknown[]) => this.with(ctx, () => (target as (...a: unknown[]) => unknown)(...args));
    return run as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.storage.disable();
    return this;
  }
}

/** Whether this process traces: the one check callers make before preparing span attributes. */
export function tracingOn(): boolean {
  return tracer !== undefined;
}

/** Whether the configuration asks for traces: an OTLP endpoint or `OTEL_TRACES_EXPORTER=otlp`, unless the SDK is disabled. */
export function tracingRequested(config: Pick<HubConfig, 'OTEL_SDK_DISABLED' | 'OTEL_TRACES_EXPORTER' | 'OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'>): boolean {
  if (config.OTEL_SDK_DISABLED || config.OTEL_TRACES_EXPORTER === 'none') return false;
  return config.OTEL_TRACES_EXPORTER === 'otlp' || config.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined || config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined;
}

export interface TracingOptions {
  /** `service.name` of every span (OTEL_SERVICE_NAME overrides it when set). */
  serviceName: string;
  /** Where spans go; the OTLP/HTTP exporter (reading the standard OTEL_EXPORTER_OTLP_* variables) when absent. */
  exporter?: SpanExporter;
  /** Export each span as it ends instead of in batches (tests with an in-memory exporter). */
  immediate?: boolean;
}

/**
 * Starts tracing for this process, once, when the configuration asks for it (see
 * tracingRequested) or an exporter is given; returns how to flush and stop. Registers the global
 * tracer provider, W3C trace-context propagation and the async context manager. The SDK and its
 * exporter (a few hundred modules) are loaded only then.
 */
export async function startTracing(config: HubConfig, options: TracingOptions): Promise<() => Promise<void>> {
  if (tracer || (!options.exporter && !tracingRequested(config))) return async () => undefined;
  const [{ W3CTraceContextPropagator }, { resourceFromAttributes }, { BasicTracerProvider, BatchSpanProcessor, SimpleSpanProcessor }] = await Promise.all([
    import('@opentelemetry/core'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace-base'),
  ]);
  const exporter = options.exporter ?? new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
  // Another call may have started tracing while this one loaded the SDK.
  if (tracer) return async () => undefined;
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.OTEL_SERVICE_NAME ?? options.serviceName }),
    spanProcessors: [options.immediate ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(exporter)],
  });
  context.setGlobalContextManager(new AsyncLocalContextManager());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  tracer = provider.getTracer('agenthub');
  return async () => {
    if (!tracer) return;
    tracer = undefined;
    await provider.forceFlush().catch(() => undefined);
    await provider.shutdown().catch(() => undefined);
    trace.disable();
    propagation.disable();
    context.disable();
  };
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The parent; the active context when absent. */
  parent?: Context;
  /** Only start a span when there is an active one to hang it under (database statements). */
  childOnly?: boolean;
}

/**
 * Runs `work` inside a new span that ends when it settles (an exception marks it failed). Without
 * tracing, runs `work` as is.
 */
export function withSpan<T>(name: string, options: SpanOptions, work: (span: Span | undefined) => Promise<T>): Promise<T> {
  if (!tracer) return work(undefined);
  const parent = options.parent ?? context.active();
  if (options.childOnly && !trace.getSpan(parent)) return work(undefined);
  return tracer.startActiveSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes }, parent, async (span) => {
    try {
      return await work(span);
    } catch (err) {
      if (isFailure(err)) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR });
      } else if (err instanceof HubError) {
        span.setAttribute('hub.error_reason', Reason[err.reason] ?? String(err.reason));
      }
      throw err;
    } finally {
      span.end();
    }
  });
}

/** A span its caller ends, and the `traceparent` that makes it the parent of the receiver's work. */
export interface OpenSpan {
  readonly traceparent: string;
  /** Ends the span; a thrown value marks it failed as withSpan does. */
  end(err?: unknown): void;
}

/**
 * Starts a span that stays open across work shared with other spans (one publish carrying
 * messages of several traces), unlike withSpan's. Undefined without tracing or without `parent`.
 */
export function openSpan(name: string, options: SpanOptions & { parent: Context | undefined }): OpenSpan | undefined {
  if (!tracer || !options.parent) return undefined;
  const span = tracer.startSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes }, options.parent);
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(options.parent, span), carrier);
  return {
    traceparent: carrier[TRACEPARENT]!,
    end(err?: unknown) {
      if (err !== undefined && isFailure(err)) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    },
  };
}

/** Runs `work` with the trace context `headers` carry (a `traceparent`) as the active one. */
export function withRemoteParent<T>(headers: Record<string, string | string[] | undefined> | undefined, work: () => T): T {
  if (!tracer || !headers) return work();
  return context.with(propagation.extract(ROOT_CONTEXT, headers), work);
}

/** The context `traceparent` names, for a span that continues a trace stored earlier (outbox, delivery rows). */
export function contextOf(traceparent: string | null | undefined): Context | undefined {
  if (!tracer || !traceparent) return undefined;
  return propagation.extract(ROOT_CONTEXT, { [TRACEPARENT]: traceparent });
}

/** The active span's `traceparent`, to store or send on; undefined without tracing or a span. */
export function currentTraceparent(): string | undefined {
  if (!tracer) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier[TRACEPARENT];
}

/** Adds the active trace context to outgoing headers (HTTP or gRPC metadata through `set`). */
export function injectTraceparent(set: (name: string, value: string) => void): void {
  const traceparent = currentTraceparent();
  if (traceparent) set(TRACEPARENT, traceparent);
}

/** `{ trace_id }` of the active span for a log line, or nothing (pino's mixin). */
export function traceFields(): { trace_id?: string } {
  if (!tracer) return {};
  const span = trace.getSpan(context.active());
  return span ? { trace_id: span.spanContext().traceId } : {};
}
