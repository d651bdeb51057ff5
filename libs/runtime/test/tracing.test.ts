import { currentTraceparent, loadConfig, tracingRequested, withSpan } from '@agenthub/runtime';

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
