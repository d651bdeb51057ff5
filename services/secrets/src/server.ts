import { secretsv1 } from '@agenthub/proto';
import { callerOf, groupedHandler, HubError, Reason, type Db, type ServiceHandlers } from '@agenthub/runtime';
import { DEFAULT_LIMITS, type SecretsEnv, type SecretsLimits, type WorkspaceClient } from './access.js';
import type { KeyWrapper } from './keys.js';
import { deleteWorkspaceSecrets, rotateKek, rotateWorkspaceKey } from './rotation.js';
import { deleteSecret, getSecret, listSecrets, setSecret } from './secrets.js';
import { SecretsStore } from './store.js';

/** The handlers of `agenthub.secrets.v1.SecretsService` over a migrated database. */
export function createSecretsHandlers(deps: {
  db: Db;
  workspace: WorkspaceClient;
  keyWrapper: KeyWrapper;
  limits?: Partial<SecretsLimits>;
}): ServiceHandlers<typeof secretsv1.SecretsService.method> {
  const env: SecretsEnv = {
    store: new SecretsStore(deps.db),
    workspace: deps.workspace,
    keys: deps.keyWrapper,
    limits: { ...DEFAULT_LIMITS, ...deps.limits },
  };
  // Every handler is async so that callerOf's refusal becomes a rejection.
  return {
    setSecret: async (request, ctx) => setSecret(env, ctx, callerOf(ctx), request),
    getSecret: async (request, ctx) => getSecret(env, ctx, callerOf(ctx), request),
    getSecrets: groupedHandler(),
    listSecrets: async (request, ctx) => listSecrets(env, ctx, callerOf(ctx), request),
    deleteSecret: async (request, ctx) => deleteSecret(env, ctx, callerOf(ctx), request),
    rotateWorkspaceKey: async (request, ctx) => rotateWorkspaceKey(env, ctx, request),
    rotateKek: async (_request, ctx) => rotateKek(env, ctx),
    deleteWorkspaceSecrets: async (request, ctx) => deleteWorkspaceSecrets(env, ctx, request),
    getWorkspacesUsage: async (request, ctx) => {
      if (ctx.principal?.kind !== 'operator') throw new HubError(Reason.PERMISSION_REQUIRED, 'Operator access required');
      const ids = request.workspaceIds;
      const counts = await env.store.secretCounts(ctx.signal, ids);
      const limit = BigInt(env.limits.maxSecretsPerWorkspace);
      return { usage: ids.map((id) => ({ quota: 'secrets_per_workspace', scope: id, used: BigInt(counts.get(id) ?? 0), limit })) };
    },
  };
}
