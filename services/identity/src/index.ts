/**
 * The identity service: tenants, agents, API keys and cross-tenant access grants, served over
 * gRPC as `agenthub.identity.v1.IdentityService`.
 */
import { identityv1 } from '@agenthub/proto';
import { detachedSignal, egressPolicy, serveGrpc, type Resolver, type RunningService, type ServiceDeps } from '@agenthub/runtime';
import { createIdentityHandlers, DEFAULT_IDENTITY_QUOTAS, type IdentityQuotas } from './server.js';
import { IdentityStore } from './store.js';

/** The service's settings from configuration; its main.ts and the all-in-one hub both use it. */
export { identityOptions } from './options.js';
/** The IdentityService handlers over the service's database and the shared Kv (revocations reach the gateway's key cache before they are answered). */
export { createIdentityHandlers, type IdentityHandlers } from './server.js';

export interface IdentityDeps extends ServiceDeps {
  /**
   * The egress guard's policy a push agent's endpoint_url is checked against at registration:
   * HUB_EGRESS_ALLOW_PRIVATE (default false: global unicast addresses only) and the resolver.
   */
  egress?: { allowPrivate: boolean; resolve?: Resolver };
  /** HUB_QUOTA_AGENTS_PER_TENANT; absent, the default. */
  quotas?: IdentityQuotas;
}

/** Migrates the `identity` schema, then serves IdentityService on `deps.listen`. */
export async function startIdentity(deps: IdentityDeps): Promise<RunningService> {
  const egress = egressPolicy(deps.egress?.allowPrivate ?? false, deps.egress?.resolve);
  const running = await serveGrpc(
    'identity',
    deps,
    { schema: 'identity', migrations: new URL('../migrations/', import.meta.url) },
    (server) => server.add(identityv1.IdentityService, createIdentityHandlers({ db: deps.db, kv: deps.kv, egress, quotas: deps.quotas })),
  );
  const maxAgents = deps.quotas?.agentsPerTenant ?? DEFAULT_IDENTITY_QUOTAS.agentsPerTenant;
  const store = new IdentityStore(deps.db);
  // Each tenant's agents against agents_per_tenant, in /metrics (the tenants nearest it).
  const stopQuotaGauges = deps.metrics.quotaUsage(async () =>
    (await store.agentCounts(detachedSignal())).map((row) => ({ tenant: row.tenant, quota: 'agents_per_tenant', used: row.agents, limit: row.quota === null ? maxAgents : Number(row.quota) })),
  );
  return {
    name: running.name,
    address: running.address,
    async stop(graceMs) {
      stopQuotaGauges();
      await running.stop(graceMs);
    },
  };
}
