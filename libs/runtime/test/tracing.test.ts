import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { currentTraceparent, HubError, loadConfig, Reason, SpanStatusCode, startTracing, tracingRequested, withSpan } from '@agenthub/runtime';

describe('tracing configuration', () => {
  const requested = (env: Record<string, string>) => tracingRequested(loadConfig(env));

  it('is off unless an OTLP endpoint or OTEL_TRACES_EXPORTER=otlp is set', () => {
    expect(requested({})).toBe(false);
    expect(requested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toBe(true);
    expect(requested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' })).toBe(true);
    expect(requested({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
  });

  it('OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER=none win over an endpoint', () => {
    expect(requested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' })).toBe(false);
    expect(requested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
  });

  it('refuses an endpoint that is not an http(s) URL, naming the variable', () => {
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
  });

  it('without tracing, spans are not made and nothing is propagated', async () => {
    await withSpan('work', {}, async (span) => {
      expect(span).toBeUndefined();
      expect(currentTraceparent()).toBeUndefined();
    });
  });
});

describe('spans', () => {
  const exporter = new InMemorySpanExporter();
  let stop: () => Promise<void>;
  beforeAll(async () => {
    stop = await startTracing(loadConfig({ OTEL_SERVICE_NAME: 'agenthub-under-test' }), { serviceName: 'test', exporter, immediate: true });
  });
  afterAll(async () => {
    await stop();
  });

  const statusAfter = async (err: unknown) => {
    exporter.reset();
    await expect(withSpan('work', {}, async () => Promise.reject(err))).rejects.toBe(err);
    const [span] = exporter.getFinishedSpans();
    return { status: span!.status.code, reason: span!.attributes['hub.error_reason'] };
  };

  it('names the service by OTEL_SERVICE_NAME when set, over the name the process gives', async () => {
    exporter.reset();
    await withSpan('named', {}, async () => undefined);
    const [span] = exporter.getFinishedSpans();
    expect(span!.resource.attributes['service.name']).toBe('agenthub-under-test');
  });

  it('a refusal is an answer; the hub\'s own trouble fails the span', async () => {
    expect(await statusAfter(HubError.notFound('Workspace not found'))).toEqual({ status: SpanStatusCode.UNSET, reason: 'NOT_FOUND' });
    expect(await statusAfter(new HubError(Reason.UNAVAILABLE, 'down'))).toEqual({ status: SpanStatusCode.ERROR, reason: undefined });
    expect(await statusAfter(new Error('bug'))).toEqual({ status: SpanStatusCode.ERROR, reason: undefined });
  });

  it('a child continues its parent\'s trace, and the traceparent names the active span', async () => {
    exporter.reset();
    await withSpan('parent', {}, async (parent) => {
      await withSpan('child', {}, async (child) => {
        expect(currentTraceparent()).toBe(`00-${child!.spanContext().traceId}-${child!.spanContext().spanId}-01`);
        expect(child!.spanContext().traceId).toBe(parent!.spanContext().traceId);
      });
    });
    const [child, parent] = exporter.getFinishedSpans();
    expect(child!.parentSpanContext?.spanId).toBe(parent!.spanContext().spanId);
  });
});
