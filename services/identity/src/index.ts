/**
 * The identity service: tenants, agents, API keys and cross-tenant access grants, served over
 * gRPC as `agenthub.identity.v1.IdentityService`.
 */
import { identityv1 } from '@agenthub/proto';
import { serveGrpc, type RunningService, type ServiceDeps } from '@agenthub/runtime';
import { createIdentityHandlers } from './server.js';

export { createIdentityHandlers, type IdentityHandlers } from './server.js';

/** Migrates the `identity` schema, then serves IdentityService on `deps.listen`. */
export function startIdentity(deps: ServiceDeps): Promise<RunningService> {
  return serveGrpc(
    'identity',
    deps,
    { schema: 'identity', migrations: new URL('../migrations/', import.meta.url) },
    (server) => server.add(identityv1.IdentityService, createIdentityHandlers(deps)),
  );
}
