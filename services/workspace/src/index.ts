/**
 * The workspace service: workspaces and their members, with the access rules every workspace
 * call (and other services, through ResolveAccess) relies on.
 */
import { identityv1, workspacev1 } from '@agenthub/proto';
import { createClient, serveGrpc, type RunningService, type ServiceDeps } from '@agenthub/runtime';
import { createWorkspaceHandlers } from './server.js';

export { createWorkspaceHandlers } from './server.js';
export type { IdentityClient } from './access.js';

export interface WorkspaceDeps extends ServiceDeps {
  /** `host:port` of the identity service, asked for agents and grants on every call that needs them. */
  identityAddr: string;
}

/**
 * Migrates the `workspace` schema and serves WorkspaceService. Stopping it also closes its
 * identity client; the database and Kv it was given stay open.
 */
export async function startWorkspace(deps: WorkspaceDeps): Promise<RunningService> {
  const identity = createClient(identityv1.IdentityService, deps.identityAddr, {
    defaultTimeoutMs: deps.grpcTimeoutMs,
    metrics: deps.metrics,
    internalToken: deps.internalToken,
  });
  try {
    const running = await serveGrpc(
      'workspace',
      deps,
      { schema: 'workspace', migrations: new URL('../migrations/', import.meta.url) },
      (server) => server.add(workspacev1.WorkspaceService, createWorkspaceHandlers({ db: deps.db, identity })),
    );
    return {
      name: running.name,
      address: running.address,
      async stop(graceMs) {
        await running.stop(graceMs);
        identity.close();
      },
    };
  } catch (err) {
    identity.close();
    throw err;
  }
}
