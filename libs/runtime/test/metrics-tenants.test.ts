import { Metrics, OTHER_TENANTS } from '../src/index.js';

/** Series of `name` in the registry's text, as `{labels} value` lines. */
async function series(metrics: Metrics, name: string): Promise<string[]> {
  const text = await metrics.registry.metrics();
  return text.split('\n').filter((line) => line.startsWith(`${name}{`));
}

describe('per-tenant metric series are bounded (HUB_METRICS_TENANTS)', () => {
  it('names the first refused tenants and counts later ones as _other, keeping the total', async () => {
    const metrics = new Metrics({ tenantLabels: 2 });
    for (const tenant of ['a', 'b', 'c', 'd', 'a', '']) metrics.limited('key', tenant);
    expect(await series(metrics, 'agenthub_limited_requests_total')).toEqual([
      'agenthub_limited_requests_total{reason="key",tenant="a"} 2',
      'agenthub_limited_requests_total{reason="key",tenant="b"} 1',
      `agenthub_limited_requests_total{reason="key",tenant="${OTHER_TENANTS}"} 2`,
      // Before authentication: no tenant, and not one of the named ones.
      'agenthub_limited_requests_total{reason="key",tenant=""} 1',
    ]);
  });

  it('shows, of each quota, the tenants nearest their limit, and reads usage once per refresh interval', async () => {
    const metrics = new Metrics({ tenantLabels: 2, quotaRefreshMs: 60_000 });
    let reads = 0;
    metrics.quotaUsage(async (top) => {
      reads++;
      expect(top).toBe(2);
      return [
        { tenant: 'low', quota: 'q', used: 1, limit: 10 },
        { tenant: 'full', quota: 'q', used: 10, limit: 10 },
        { tenant: 'half', quota: 'q', used: 50, limit: 100 },
        { tenant: 'low', quota: 'other', used: 1, limit: 4 },
      ];
    });
    expect(await series(metrics, 'agenthub_quota_usage_ratio')).toEqual([
      'agenthub_quota_usage_ratio{tenant="full",quota="q"} 1',
      'agenthub_quota_usage_ratio{tenant="half",quota="q"} 0.5',
      'agenthub_quota_usage_ratio{tenant="low",quota="other"} 0.25',
    ]);
    expect(await series(metrics, 'agenthub_quota_used')).toContain('agenthub_quota_used{tenant="half",quota="q"} 50');
    expect(await series(metrics, 'agenthub_quota_limit')).toContain('agenthub_quota_limit{tenant="half",quota="q"} 100');
    // Three scrapes of three gauges, one read.
    expect(reads).toBe(1);
  });
});
