import type { HubConfig } from '@agenthub/runtime';
import type { WorkspaceDeps } from './index.js';
import { workspaceQuotas } from './quotas.js';

/**
 * The workspace service's settings from configuration (EMBEDDINGS_*, QDRANT_*, HUB_QUOTA_*): the one mapping,
 * used by its `main.ts` and by the all-in-one hub, so both modes run it alike.
 */
export function workspaceOptions(config: HubConfig): Pick<WorkspaceDeps, 'memory' | 'quotas'> {
  return { memory: config, quotas: workspaceQuotas(config) };
}
