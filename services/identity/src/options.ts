import { egressAllowPrivate, type HubConfig } from '@agenthub/runtime';
import type { IdentityDeps } from './index.js';

/**
 * The identity service's settings from configuration: the one mapping, used by its `main.ts`
 * and by the all-in-one hub, so both modes run it alike.
 */
export function identityOptions(config: HubConfig): Pick<IdentityDeps, 'egress' | 'quotas'> {
  return { egress: { allowPrivate: egressAllowPrivate(config) }, quotas: { agentsPerTenant: config.HUB_QUOTA_AGENTS_PER_TENANT } };
}
