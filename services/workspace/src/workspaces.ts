import { secretsv1, workspacev1 } from '@agenthub/proto';
import { HubError, newId, type CallContext, type Caller, type ClientOf } from '@agenthub/runtime';
import { membershipCounts, requireOwner, resolveAccess, type WorkspaceEnv } from './access.js';
import type { WorkspaceRecord } from './store.js';
import type { VectorStore } from './vectors.js';
import * as validate from './validate.js';
import { workspaceCreated, workspaceDeleted } from './events.js';
import { workspacesQuotaExceeded } from './quotas.js';

const { Role } = workspacev1;

/** The wire shape of a workspace. */
export function workspaceMessage(workspace: WorkspaceRecord) {
  return {
    id: workspace.id,
    name: workspace.name,
    description: workspace.description,
    ownerAgentId: workspace.ownerAgentId,
    createdAt: BigInt(workspace.createdAt),
  };
}

/** Creates a workspace owned by the caller, who becomes its first member, with role admin. */
export async function createWorkspace(env: WorkspaceEnv, ctx: CallContext, caller: Caller, request: workspacev1.CreateWorkspaceRequest) {
  const name = validate.workspaceName(request.name);
  const description = validate.workspaceDescription(request.description);
  const { agent } = await env.identity.getAgent({ agentId: caller.agentId }, { parent: ctx });
  const now = Date.now();
  const workspace: WorkspaceRecord = {
    id: newId('ws'),
    name,
    description,
    ownerAgentId: caller.agentId,
    ownerTenantId: caller.tenantId,
    createdAt: now,
  };
  const created = await env.store.createWorkspace(ctx.signal, workspace, {
    workspaceId: workspace.id,
    agentId: caller.agentId,
    agentName: agent?.name ?? '',
    tenantId: caller.tenantId,
    role: Role.ADMIN,
    addedBy: caller.agentId,
    addedAt: now,
  }, workspaceCreated(workspace), env.quotas.workspacesPerTenant);
  if (!created) throw workspacesQuotaExceeded(env.quotas.workspacesPerTenant);
  return { workspace: workspaceMessage(workspace) };
}

/** Any member: the workspace, the caller's role and how many members it has. */
export async function getWorkspace(env: WorkspaceEnv, ctx: CallContext, caller: Caller, request: workspacev1.GetWorkspaceRequest) {
  const access = await resolveAccess(env, ctx, caller, validate.workspaceId(request.workspaceId), { countMembers: true });
  return { workspace: workspaceMessage(access.workspace), role: access.role, memberCount: access.memberCount ?? 0 };
}

/**
 * The workspaces the caller can access now, ordered by creation time then id. Cross-tenant
 * memberships whose grant was revoked are left out, as every other call would deny them.
 */
export async function listWorkspaces(env: WorkspaceEnv, ctx: CallContext, caller: Caller) {
  const memberships = await env.store.listMemberships(ctx.signal, caller.agentId);
  const counts = await Promise.all(memberships.map(({ workspace, member }) => membershipCounts(env, ctx, workspace, member)));
  return {
    workspaces: memberships
      .filter((_, i) => counts[i])
      .map(({ workspace, member }) => ({ workspace: workspaceMessage(workspace), role: member.role })),
  };
}

/** Owner only; members and memories go with the workspace, and so do the memories' vectors. */
/** Runs once a workspace's deletion has committed; a failure is logged, the deletion stands. */
export type AfterDelete = (workspaceId: string, ctx: CallContext) => Promise<void>;

export type DeleteEnv = WorkspaceEnv & { vectors?: VectorStore; afterDelete?: AfterDelete };

type SecretsClient = Pick<ClientOf<typeof secretsv1.SecretsService>, 'deleteWorkspaceSecrets'>;

/**
 * An AfterDelete that has the secrets service destroy the workspace's data key. `secrets` is
 * asked at each deletion, since in one process the secrets service starts after this one.
 */
export function destroySecretsWith(secrets: () => SecretsClient | undefined): AfterDelete {
  return async (workspaceId, ctx) => {
    await secrets()?.deleteWorkspaceSecrets({ workspaceId }, { parent: ctx });
  };
}

export async function deleteWorkspace(env: DeleteEnv, ctx: CallContext, caller: Caller, request: workspacev1.DeleteWorkspaceRequest) {
  const access = await resolveAccess(env, ctx, caller, validate.workspaceId(request.workspaceId));
  requireOwner(access);
  // A concurrent delete may have won since the access check; the loser sees what a later call would.
  if (!(await env.store.deleteWorkspace(ctx.signal, access.workspace.id, workspaceDeleted(access.workspace.id, caller.agentId)))) throw HubError.notFound();
  // Memory rows went by cascade. Vectors left behind by a failure here are never served (every
  // hit is read back from the memory rows), so the deletion stands and the failure is logged.
  await env.vectors?.deleteWorkspace(access.workspace.id).catch((err: unknown) => {
    ctx.log.error({ err, workspaceId: access.workspace.id }, 'deleting the workspace vectors failed');
  });
  // The secrets service also purges a deleted workspace's keys on its next call for it, so a
  // failure here delays the destruction but cannot keep the key alive for good.
  await env.afterDelete?.(access.workspace.id, ctx).catch((err: unknown) => {
    ctx.log.error({ err, workspaceId: access.workspace.id }, 'announcing the workspace deletion failed');
  });
  return { workspaceId: access.workspace.id };
}
