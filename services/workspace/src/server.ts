import { workspacev1 } from '@agenthub/proto';
import type { Db, ServiceHandlers } from '@agenthub/runtime';
import { callerOf, resolveAccess, type IdentityClient, type WorkspaceEnv } from './access.js';
import { addMember, listMembers, removeMember } from './members.js';
import { MEMORY_TYPES } from './memory-types.js';
import { WorkspaceStore } from './store.js';
import * as validate from './validate.js';
import { createWorkspace, deleteWorkspace, getWorkspace, listWorkspaces } from './workspaces.js';

/** The handlers of `agenthub.workspace.v1.WorkspaceService` over a migrated database. */
export function createWorkspaceHandlers(deps: { db: Db; identity: IdentityClient }): ServiceHandlers<typeof workspacev1.WorkspaceService.method> {
  const env: WorkspaceEnv = { store: new WorkspaceStore(deps.db), identity: deps.identity };
  // Every handler is async so that callerOf's refusal becomes a rejection: GrpcServer maps
  // rejected promises, not errors thrown synchronously.
  return {
    createWorkspace: async (request, ctx) => createWorkspace(env, ctx, callerOf(ctx), request),
    getWorkspace: async (request, ctx) => getWorkspace(env, ctx, callerOf(ctx), request),
    listWorkspaces: async (_request, ctx) => listWorkspaces(env, ctx, callerOf(ctx)),
    deleteWorkspace: async (request, ctx) => deleteWorkspace(env, ctx, callerOf(ctx), request),
    addMember: async (request, ctx) => addMember(env, ctx, callerOf(ctx), request),
    removeMember: async (request, ctx) => removeMember(env, ctx, callerOf(ctx), request),
    listMembers: async (request, ctx) => listMembers(env, ctx, callerOf(ctx), request),
    listMemoryTypes: async (_request, ctx) => {
      callerOf(ctx);
      return { types: MEMORY_TYPES.map(({ type, description }) => ({ type, description })) };
    },
    resolveAccess: async (request, ctx) => {
      const access = await resolveAccess(env, ctx, callerOf(ctx), validate.workspaceId(request.workspaceId));
      return { role: access.role, owner: access.owner };
    },
  };
}
