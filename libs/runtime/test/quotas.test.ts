import { QuotaOverrides } from '@agenthub/runtime';

/** How services read a tenant's quota overrides from identity: cached, and never failing a call. */
describe('QuotaOverrides', () => {
  it('applies the tenant’s override, else the default, asking identity once per tenant for a while', async () => {
    const asked: string[] = [];
    const overrides = new QuotaOverrides(async (tenantId): Promise<Record<string, bigint>> => {
      asked.push(tenantId);
      return tenantId === 'big' ? { members_per_workspace: 5000n } : {};
    });
    expect(await overrides.limit('big', 'members_per_workspace', 1000)).toBe(5000);
    expect(await overrides.limit('big', 'agents_per_tenant', 10)).toBe(10);
    expect(await overrides.limit('small', 'members_per_workspace', 1000)).toBe(1000);
    expect(asked).toEqual(['big', 'small']);
  });

  it('falls back to the default when identity cannot answer, logging why', async () => {
    const warnings: unknown[] = [];
    const log = { warn: (...args: unknown[]) => warnings.push(args) } as never;
    const overrides = new QuotaOverrides(async () => {
      throw new Error('identity is down');
    });
    expect(await overrides.limit('t', 'queued_deliveries_per_agent', 7, { log })).toBe(7);
    expect(warnings).toHaveLength(1);
  });
});
