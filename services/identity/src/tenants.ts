import { create } from '@bufbuild/protobuf';
import { identityv1 } from '@agenthub/proto';
import { HubError, TENANT_QUOTAS } from '@agenthub/runtime';
import type { IdentityStore, StoredLimits, TenantRecord } from './store.js';

/** Creates the tenant, or returns the existing one unchanged (`created` false). */
export async function createTenant(store: IdentityStore, signal: AbortSignal, id: string, name: string): Promise<{ tenant: TenantRecord; created: boolean }> {
  const inserted = await store.insertTenant(signal, { id, name, at: Date.now() });
  if (inserted) return { tenant: inserted, created: true };
  const existing = await store.tenant(signal, id);
  // Tenants are never deleted, so the row that blocked the insert is still there.
  if (!existing) throw new Error(`Tenant ${id} conflicted on insert but cannot be read`);
  return { tenant: existing, created: false };
}

export function listTenants(store: IdentityStore, signal: AbortSignal): Promise<TenantRecord[]> {
  return store.tenants(signal);
}

/** Most tokens a second and largest burst an override may set. */
const MAX_PER_SEC = 1_000_000;
const MAX_BURST = 10_000_000;

function rateIn(rate: identityv1.RateLimit | undefined, field: string): { per_sec: number; burst: number } | undefined {
  if (!rate) return undefined;
  if (!Number.isFinite(rate.perSec) || rate.perSec < 0 || rate.perSec > MAX_PER_SEC) {
    throw HubError.invalidParams(`${field}.per_sec`, `must be between 0 and ${MAX_PER_SEC}`);
  }
  if (rate.burst < 1 || rate.burst > MAX_BURST) throw HubError.invalidParams(`${field}.burst`, `must be between 1 and ${MAX_BURST}`);
  return { per_sec: rate.perSec, burst: rate.burst };
}

/** Largest quota an override may set. */
const MAX_QUOTA = 1_000_000_000;

function limitsOut(stored: StoredLimits): identityv1.TenantLimits {
  const rate = (r: { per_sec: number; burst: number } | undefined) => (r ? create(identityv1.RateLimitSchema, { perSec: r.per_sec, burst: r.burst }) : undefined);
  const quotas = Object.fromEntries(Object.entries(stored.quotas ?? {}).map(([name, n]) => [name, BigInt(n)]));
  return create(identityv1.TenantLimitsSchema, { key: rate(stored.key), tenant: rate(stored.tenant), maxWaitingPerAgent: stored.max_waiting_per_agent, quotas });
}

function quotasIn(quotas: Record<string, bigint> | undefined): Record<string, number> | undefined {
  const entries = Object.entries(quotas ?? {});
  if (!entries.length) return undefined;
  for (const [name, n] of entries) {
    if (!(TENANT_QUOTAS as readonly string[]).includes(name)) throw HubError.invalidParams(`limits.quotas.${name}`, `is not a quota set per tenant (${TENANT_QUOTAS.join(', ')})`);
    if (n < 1n || n > BigInt(MAX_QUOTA)) throw HubError.invalidParams(`limits.quotas.${name}`, `must be between 1 and ${MAX_QUOTA}`);
  }
  return Object.fromEntries(entries.map(([name, n]) => [name, Number(n)]));
}

/** The tenant's agents against `agents_per_tenant`. */
export async function getTenantUsage(store: IdentityStore, signal: AbortSignal, tenantId: string, maxAgents: number): Promise<{ quota: string; scope: string; used: bigint; limit: bigint }[]> {
  const stored = await store.tenantLimits(signal, tenantId);
  if (!stored) throw HubError.notFound('Tenant not found');
  const limit = stored.quotas?.agents_per_tenant ?? maxAgents;
  return [{ quota: 'agents_per_tenant', scope: '', used: BigInt(await store.agentCount(signal, tenantId)), limit: BigInt(limit) }];
}

export async function getTenantLimits(store: IdentityStore, signal: AbortSignal, tenantId: string): Promise<identityv1.TenantLimits> {
  const stored = await store.tenantLimits(signal, tenantId);
  if (!stored) throw HubError.notFound('Tenant not found');
  return limitsOut(stored);
}

export async function setTenantLimits(store: IdentityStore, signal: AbortSignal, tenantId: string, limits: identityv1.TenantLimits | undefined): Promise<identityv1.TenantLimits> {
  const stored: StoredLimits = {};
  const key = rateIn(limits?.key, 'limits.key');
  const tenant = rateIn(limits?.tenant, 'limits.tenant');
  if (key) stored.key = key;
  if (tenant) stored.tenant = tenant;
  if (limits?.maxWaitingPerAgent !== undefined) stored.max_waiting_per_agent = limits.maxWaitingPerAgent;
  const quotas = quotasIn(limits?.quotas);
  if (quotas) stored.quotas = quotas;
  if (!(await store.setTenantLimits(signal, tenantId, stored))) throw HubError.notFound('Tenant not found');
  return limitsOut(stored);
}
