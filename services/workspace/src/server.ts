import { workspacev1 } from '@agenthub/proto';
import { callerOf, groupedHandler, HubError, QuotaOverrides, Reason, type CallContext, type Caller, type Db, type ServiceHandlers } from '@agenthub/runtime';
import { resolveAccess, type IdentityClient, type WorkspaceEnv } from './access.js';
import type { Embedder } from './embedder.js';
import { forgetMemories, listMemories, queryMemories, reembedWorkspace, storeMemory, updateMemory, type MemoryEnv } from './memories.js';
import { addMember, listMembers, removeMember } from './members.js';
import { MEMORY_TYPES } from './memory-types.js';
import { DEFAULT_WORKSPACE_QUOTAS, tenantUsage, type WorkspaceQuotas } from './quotas.js';
import { WorkspaceStore } from './store.js';
import * as validate from './validate.js';
import { createWorkspace, deleteWorkspace, getWorkspace, listWorkspaces, type AfterDelete, type DeleteEnv } from './workspaces.js';
import type { VectorStore } from './vectors.js';

/**
 * Whose access ResolveAccess resolves: the calling agent's, or, for an operator principal (the
 * events service checking a webhook's creator), the named agent's. Resolving access reads only
 * the agent id (memberships carry their own tenant).
 */
function accessSubject(ctx: CallContext, agentId: string): Caller {
  if (!agentId) return callerOf(ctx);
  if (ctx.principal?.kind !== 'operator') throw new HubError(Reason.ACCESS_DENIED, 'Operator access required');
  return { agentId: validate.agentId(agentId), tenantId: '' };
}

/** The tenants' quota overrides as identity keeps them, read as the operator. */
export function quotaOverridesOf(identity: IdentityClient): QuotaOverrides {
  return new QuotaOverrides(async (tenantId, signal) => (await identity.getTenantLimits({ tenantId }, { principal: { kind: 'operator' }, signal })).limits?.quotas ?? {});
}

/** The handlers of `agenthub.workspace.v1.WorkspaceService` over a migrated database. */
export function createWorkspaceHandlers(deps: {
  db: Db;
  identity: IdentityClient;
  /** Memories need both; without them their RPCs answer UNAVAILABLE. */
  embedder?: Embedder;
  vectors?: VectorStore;
  afterDelete?: AfterDelete;
  quotas?: WorkspaceQuotas;
  /** The tenants' quota overrides; absent, read from `identity` (quotaOverridesOf). */
  overrides?: QuotaOverrides;
}): ServiceHandlers<typeof workspacev1.WorkspaceService.method> {
  const env: DeleteEnv = {
    store: new WorkspaceStore(deps.db),
    identity: deps.identity,
    vectors: deps.vectors,
    afterDelete: deps.afterDelete,
    quotas: deps.quotas ?? DEFAULT_WORKSPACE_QUOTAS,
    overrides: deps.overrides ?? quotaOverridesOf(deps.identity),
  };
  const memory = (): MemoryEnv => {
    if (!deps.embedder || !deps.vectors) throw new HubError(Reason.UNAVAILABLE, 'Memories are not configured on this server');
    return { ...env, db: deps.db, embedder: deps.embedder, vectors: deps.vectors };
  };
  // Every handler is async so that callerOf's refusal becomes a rejection: GrpcServer maps
  // rejected promises, not errors thrown synchronously.
  return {
    createWorkspace: async (request, ctx) => createWorkspace(env, ctx, callerOf(ctx), request),
    getWorkspace: async (request, ctx) => getWorkspace(env, ctx, callerOf(ctx), request),
    getWorkspaces: groupedHandler(),
    listWorkspaces: async (_request, ctx) => listWorkspaces(env, ctx, callerOf(ctx)),
    deleteWorkspace: async (request, ctx) => deleteWorkspace(env, ctx, callerOf(ctx), request),
    addMember: async (request, ctx) => addMember(env, ctx, callerOf(ctx), request),
    removeMember: async (request, ctx) => removeMember(env, ctx, callerOf(ctx), request),
    listMembers: async (request, ctx) => listMembers(env, ctx, callerOf(ctx), request),
    listMemoryTypes: async (_request, ctx) => {
      callerOf(ctx);
      return { types: MEMORY_TYPES.map(({ type, description }) => ({ type, description })) };
    },
    resolveAccesses: groupedHandler(),
    resolveAccess: async (request, ctx) => {
      // The operator administers every workspace that exists (the secrets service rotating one
      // for `agenthub secrets rotate-key` learns that an unknown id is NOT_FOUND).
      if (!request.agentId && ctx.principal?.kind === 'operator') {
        if (!(await env.store.getWorkspace(ctx.signal, validate.workspaceId(request.workspaceId)))) throw HubError.notFound();
        return { role: workspacev1.Role.ADMIN, owner: false };
      }
      const access = await resolveAccess(env, ctx, accessSubject(ctx, request.agentId), validate.workspaceId(request.workspaceId));
      return { role: access.role, owner: access.owner };
    },
    storeMemory: async (request, ctx) => storeMemory(memory(), ctx, callerOf(ctx), request),
    queryMemories: async (request, ctx) => queryMemories(memory(), ctx, callerOf(ctx), request),
    updateMemory: async (request, ctx) => updateMemory(memory(), ctx, callerOf(ctx), request),
    forgetMemories: async (request, ctx) => forgetMemories(memory(), ctx, callerOf(ctx), request),
    listMemories: async (request, ctx) => listMemories(memory(), ctx, callerOf(ctx), request),
    reembedWorkspace: async (request, ctx) => reembedWorkspace(memory(), ctx, request),
    getTenantUsage: async (request, ctx) => tenantUsage(env, ctx, request.tenantId),
  };
}
