import { Metrics } from '@agenthub/runtime';

/**
 * Gauges read at scrape time (metrics.ts): a reader that fails (its database is down) leaves its
 * own samples out and is counted, while the rest of the scrape is served, as docs/operations.md
 * says of agenthub_metrics_read_errors_total.
 */
describe('scrape-time gauges', () => {
  it('serve the other readers when one fails, and count the failure by metric', async () => {
    const metrics = new Metrics();
    metrics.gauge('agenthub_test_good', 'A reader that answers.', ['kind'], async () => [{ labels: { kind: 'a' }, value: 7 }]);
    metrics.gauge('agenthub_test_broken', 'A reader whose database is down.', ['kind'], async () => {
      throw new Error('connection refused');
    });

    const first = await metrics.registry.metrics();
    expect(first).toMatch(/^agenthub_test_good\{kind="a"\} 7$/m);
    expect(first).not.toMatch(/^agenthub_test_broken\{/m);
    // The registry renders the counter before the failing read settles: a failure shows from the next scrape on.
    const errors = (text: string) => Number(/^agenthub_metrics_read_errors_total\{metric="agenthub_test_broken"\} (\d+)$/m.exec(text)?.[1] ?? 0);
    const second = await metrics.registry.metrics();
    expect(second).toMatch(/^agenthub_test_good\{kind="a"\} 7$/m);
    expect(errors(second)).toBeGreaterThanOrEqual(1);
    expect(errors(await metrics.registry.metrics())).toBe(errors(second) + 1);
  });

  it('report a backlog as its count and its oldest item\'s age in seconds, 0 when nothing waits', async () => {
    const metrics = new Metrics();
    let rows: { labels: { queue: string }; count: number; oldestMs: number | null }[] = [{ labels: { queue: 'q' }, count: 4, oldestMs: Date.now() - 90_000 }];
    metrics.backlog('agenthub_test_queued', 'Test items', ['queue'], async () => rows);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^agenthub_test_queued\{queue="q"\} 4$/m);
    const age = Number(/^agenthub_test_queued_oldest_age_seconds\{queue="q"\} (\S+)$/m.exec(text)?.[1]);
    expect(age).toBeGreaterThanOrEqual(90);
    expect(age).toBeLessThan(120);

    rows = [{ labels: { queue: 'q' }, count: 0, oldestMs: null }];
    // One read serves both gauges of a scrape and is kept for a second.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const empty = await metrics.registry.metrics();
    expect(empty).toMatch(/^agenthub_test_queued\{queue="q"\} 0$/m);
    expect(empty).toMatch(/^agenthub_test_queued_oldest_age_seconds\{queue="q"\} 0$/m);
  });
});

describe('one exposition for two processes (addPeer)', () => {
  it('adds the peer\'s series to this process\'s, summing the ones both have, each family once', async () => {
    const gateway = new Metrics({ defaultMetrics: true });
    const services = new Metrics({ defaultMetrics: true });
    gateway.rpcRequests.inc({ method: 'x-hub/workspace.get', code: '0' }, 3);
    services.grpcServerCalls.observe({ service: 'agenthub.workspace.v1.WorkspaceService', method: 'GetWorkspace', code: 'OK' }, 0.002);
    gateway.limited('key', 'acme');
    services.limited('key', 'acme');
    gateway.addPeer(() => services.snapshot());

    const { contentType, text } = await gateway.exposition();
    expect(contentType).toContain('text/plain');
    expect(text).toMatch(/^agenthub_jsonrpc_requests_total\{method="x-hub\/workspace.get",code="0"\} 3$/m);
    expect(text).toMatch(/^agenthub_grpc_server_handling_seconds_count\{service="agenthub.workspace.v1.WorkspaceService",method="GetWorkspace",code="OK"\} 1$/m);
    expect(text).toMatch(/^agenthub_limited_requests_total\{reason="key",tenant="acme"\} 2$/m);
    const families = [...text.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]);
    expect(families).toContain('process_cpu_seconds_total');
    expect(new Set(families).size).toBe(families.length);
  });

  it('without a peer is this process\'s registry as it is', async () => {
    const alone = new Metrics();
    alone.rpcRequests.inc({ method: 'SendMessage', code: '0' });
    expect((await alone.exposition()).text).toBe(await alone.registry.metrics());
  });
});
