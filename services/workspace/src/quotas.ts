import { detachedSignal, HubError, Reason, type CallContext, type HubConfig, type Metrics, type QuotaOverrides, type QuotaUsage } from '@agenthub/runtime';
import type { WorkspaceEnv } from './access.js';
import type { WorkspaceStore } from './store.js';

/** Per-tenant and per-workspace quotas of the workspace service (HUB_QUOTA_*). */
export interface WorkspaceQuotas {
  workspacesPerTenant: number;
  memoriesPerWorkspace: number;
  /** Bytes of memory content (UTF-8) one workspace holds. */
  memoryBytesPerWorkspace: number;
  /** Members of one workspace, its owner included; overridable per tenant (the owner's). */
  membersPerWorkspace: number;
}

/** The defaults of HUB_QUOTA_*, for services started without a configuration (tests). */
export const DEFAULT_WORKSPACE_QUOTAS: WorkspaceQuotas = {
  workspacesPerTenant: 1_000,
  memoriesPerWorkspace: 100_000,
  memoryBytesPerWorkspace: 256 * 1024 * 1024,
  membersPerWorkspace: 1_000,
};

export function workspaceQuotas(config: HubConfig): WorkspaceQuotas {
  return {
    workspacesPerTenant: config.HUB_QUOTA_WORKSPACES_PER_TENANT,
    memoriesPerWorkspace: config.HUB_QUOTA_MEMORIES_PER_WORKSPACE,
    memoryBytesPerWorkspace: config.HUB_QUOTA_MEMORY_BYTES_PER_WORKSPACE,
    membersPerWorkspace: config.HUB_QUOTA_MEMBERS_PER_WORKSPACE,
  };
}

export function workspacesQuotaExceeded(max: number): HubError {
  return HubError.quotaExceeded('workspaces_per_tenant', `Quota exceeded: a tenant owns at most ${max} workspaces; delete one first`);
}

export function membersQuotaExceeded(max: number): HubError {
  return HubError.quotaExceeded('members_per_workspace', `Quota exceeded: a workspace has at most ${max} members; remove one first`);
}

export function memoriesQuotaExceeded(quota: 'memories_per_workspace' | 'memory_bytes_per_workspace', max: number): HubError {
  const what = quota === 'memories_per_workspace' ? `${max} memories` : `${max} bytes of memories`;
  return HubError.quotaExceeded(quota, `Quota exceeded: a workspace holds at most ${what}; forget some first`);
}

/** Operator only: the tenant's workspaces against their quota, and each one's memories against theirs. */
export async function tenantUsage(env: WorkspaceEnv, ctx: CallContext, tenantId: string) {
  if (ctx.principal?.kind !== 'operator') throw new HubError(Reason.PERMISSION_REQUIRED, 'Operator access required');
  const rows = await env.store.tenantUsage(ctx.signal, tenantId);
  const q = env.quotas;
  const maxMembers = await env.overrides.limit(tenantId, 'members_per_workspace', q.membersPerWorkspace, ctx);
  const usage = (quota: string, scope: string, used: number, limit: number) => ({ quota, scope, used: BigInt(used), limit: BigInt(limit) });
  return {
    usage: [
      usage('workspaces_per_tenant', '', rows.length, q.workspacesPerTenant),
      ...rows.flatMap((r) => [
        usage('memories_per_workspace', r.id, r.memories, q.memoriesPerWorkspace),
        usage('memory_bytes_per_workspace', r.id, Number(r.bytes), q.memoryBytesPerWorkspace),
        usage('members_per_workspace', r.id, r.members, maxMembers),
      ]),
    ],
  };
}

/**
 * The workspace service's quotas in /metrics: each tenant's workspaces, and its fullest
 * workspace's memories, bytes and members. Members may be overridden per tenant: the overrides
 * are asked (of identity, cached) only for the `top` tenants nearest the default limit, so a
 * refresh costs at most that many identity calls however many tenants there are.
 */
export function reportQuotaUsage(metrics: Metrics, store: WorkspaceStore, quotas: WorkspaceQuotas, overrides: QuotaOverrides): () => void {
  return metrics.quotaUsage(async (top) => {
    const rows = await store.quotaUsageByTenant(detachedSignal());
    const usage = (tenant: string, quota: string, used: number, limit: number): QuotaUsage => ({ tenant, quota, used, limit });
    const members = await overrides.nearest('members_per_workspace', rows.map((r) => ({ tenant: r.tenant, used: r.members })), top, quotas.membersPerWorkspace);
    return [
      ...rows.flatMap((r) => [
        usage(r.tenant, 'workspaces_per_tenant', r.workspaces, quotas.workspacesPerTenant),
        usage(r.tenant, 'memories_per_workspace', r.memories, quotas.memoriesPerWorkspace),
        usage(r.tenant, 'memory_bytes_per_workspace', Number(r.bytes), quotas.memoryBytesPerWorkspace),
      ]),
      ...members,
    ];
  });
}
