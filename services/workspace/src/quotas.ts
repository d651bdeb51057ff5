import { HubError, type HubConfig } from '@agenthub/runtime';

/** Per-tenant and per-workspace quotas of the workspace service (HUB_QUOTA_*). */
export interface WorkspaceQuotas {
  workspacesPerTenant: number;
  memoriesPerWorkspace: number;
  /** Bytes of memory content (UTF-8) one workspace holds. */
  memoryBytesPerWorkspace: number;
}

/** The defaults of HUB_QUOTA_*, for services started without a configuration (tests). */
export const DEFAULT_WORKSPACE_QUOTAS: WorkspaceQuotas = {
  workspacesPerTenant: 1_000,
  memoriesPerWorkspace: 100_000,
  memoryBytesPerWorkspace: 256 * 1024 * 1024,
};

export function workspaceQuotas(config: HubConfig): WorkspaceQuotas {
  return {
    workspacesPerTenant: config.HUB_QUOTA_WORKSPACES_PER_TENANT,
    memoriesPerWorkspace: config.HUB_QUOTA_MEMORIES_PER_WORKSPACE,
    memoryBytesPerWorkspace: config.HUB_QUOTA_MEMORY_BYTES_PER_WORKSPACE,
  };
}

export function workspacesQuotaExceeded(max: number): HubError {
  return HubError.quotaExceeded('workspaces_per_tenant', `Quota exceeded: a tenant owns at most ${max} workspaces; delete one first`);
}

export function memoriesQuotaExceeded(quota: 'memories_per_workspace' | 'memory_bytes_per_workspace', max: number): HubError {
  const what = quota === 'memories_per_workspace' ? `${max} memories` : `${max} bytes of memories`;
  return HubError.quotaExceeded(quota, `Quota exceeded: a workspace holds at most ${what}; forget some first`);
}
