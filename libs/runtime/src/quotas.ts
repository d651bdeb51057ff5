import type { Logger } from './logger.js';
import type { QuotaUsage } from './metrics.js';

/**
 * Quotas the operator may override per tenant (`agenthub tenants limits <tenant> --quota
 * <name>=<n>`, kept by the identity service with the rate-limit overrides); each is checked by the
 * service owning the resource, against the tenant's override or the configured default.
 */
export const TENANT_QUOTAS = ['agents_per_tenant', 'members_per_workspace', 'queued_deliveries_per_agent'] as const;
export type TenantQuota = (typeof TENANT_QUOTAS)[number];

/** How long a service reuses a tenant's overrides before asking identity again (as the gateway's limits). */
const OVERRIDE_CACHE_MS = 5_000;
/** After a failed read, how long the fallback stands before identity is asked again. */
const FAILURE_CACHE_MS = 1_000;

/**
 * A tenant's quota overrides as a service other than identity sees them: read from identity,
 * cached a few seconds; when identity cannot answer, the last known ones (else the defaults).
 */
export class QuotaOverrides {
  private readonly cache = new Map<string, { value: Readonly<Record<string, bigint | number>>; until: number }>();

  constructor(private readonly read: (tenantId: string, signal?: AbortSignal) => Promise<Readonly<Record<string, bigint | number>>>) {}

  /**
   * The tenant's limit for `quota`: its override, else `fallback` (the HUB_QUOTA_* default).
   * `call` is the call being served: its signal, and its log for a failed read.
   */
  async limit(tenantId: string, quota: TenantQuota, fallback: number, call: { signal?: AbortSignal; log?: Logger } = {}): Promise<number> {
    const override = (await this.overrides(tenantId, call))[quota];
    return override === undefined ? fallback : Number(override);
  }

  /**
   * For the quota gauges: the `top` tenants of `rows` using most of `quota`, each against its
   * limit. Overrides are asked only for those, so a refresh costs at most `top` lookups however
   * many tenants there are.
   */
  async nearest(quota: TenantQuota, rows: readonly { tenant: string; used: number }[], top: number, fallback: number, call: { signal?: AbortSignal } = {}): Promise<QuotaUsage[]> {
    const shown = [...rows].sort((a, b) => b.used - a.used).slice(0, top);
    return Promise.all(shown.map(async (row) => ({ tenant: row.tenant, quota, used: row.used, limit: await this.limit(row.tenant, quota, fallback, call) })));
  }

  private async overrides(tenantId: string, call: { signal?: AbortSignal; log?: Logger }): Promise<Readonly<Record<string, bigint | number>>> {
    const cached = this.cache.get(tenantId);
    if (cached && cached.until > Date.now()) return cached.value;
    let value: Readonly<Record<string, bigint | number>>;
    let ttl = OVERRIDE_CACHE_MS;
    try {
      value = await this.read(tenantId, call.signal);
    } catch (err) {
      call.log?.warn({ err, tenantId }, 'tenant quota overrides unavailable; using the last known or the defaults');
      value = cached?.value ?? {};
      ttl = FAILURE_CACHE_MS;
    }
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(tenantId, { value, until: Date.now() + ttl });
    return value;
  }
}
