import { workspacev1 } from '@agenthub/proto';
import { HubError, Reason, type CallContext, type Caller } from '@agenthub/runtime';
import { requireRole, resolveAccess, type WorkspaceEnv } from './access.js';
import type { MemberRecord } from './store.js';
import * as validate from './validate.js';
import { memberAdded, memberRemoved } from './events.js';
import { membersQuotaExceeded } from './quotas.js';

const { Role } = workspacev1;

/** The wire shape of a member. */
export function memberMessage(member: MemberRecord) {
  return {
    agentId: member.agentId,
    agentName: member.agentName,
    role: member.role,
    addedAt: BigInt(member.addedAt),
    tenantId: member.tenantId,
    addedBy: member.addedBy,
  };
}

/**
 * Admin only. Adds the agent with the role, or changes the role of an existing member; the owner
 * stays admin. An add must give access, so an agent of another tenant than the owner's is added
 * only by an admin of the owner's tenant holding an approved grant with it (GRANT_REQUIRED
 * otherwise): the membership rests on that grant (`added_by` becomes the caller, also for an
 * existing member), which either of the two, one of them on the owner's side, can revoke.
 */
export async function addMember(env: WorkspaceEnv, ctx: CallContext, caller: Caller, request: workspacev1.AddMemberRequest) {
  const workspaceId = validate.workspaceId(request.workspaceId);
  const agentId = validate.agentId(request.agentId);
  const role = validate.role(request.role);
  const access = await resolveAccess(env, ctx, caller, workspaceId);
  requireRole(access, Role.ADMIN);
  const { agent } = await env.identity.getAgent({ agentId }, { parent: ctx });
  const tenantId = agent?.tenantId ?? '';
  if (agentId === access.workspace.ownerAgentId && role !== Role.ADMIN) {
    throw HubError.invalidOperation("Cannot change the workspace owner's role");
  }
  // The caller changing its own role needs no grant with itself: resolveAccess just vouched for it.
  const crossTenant = tenantId !== access.workspace.ownerTenantId && agentId !== caller.agentId;
  if (crossTenant) {
    if (caller.tenantId !== access.workspace.ownerTenantId) {
      throw new HubError(
        Reason.GRANT_REQUIRED,
        "No access grant to target agent the workspace owner's side could revoke: only an admin of the owner's tenant, with an approved grant, adds agents of other tenants.",
      );
    }
    const grant = await env.identity.checkGrant({ agentId: caller.agentId, otherAgentId: agentId }, { parent: ctx });
    if (!grant.approved) throw HubError.grantRequired();
  }
  const maxMembers = await env.overrides.limit(access.workspace.ownerTenantId, 'members_per_workspace', env.quotas.membersPerWorkspace, ctx);
  const stored = await env.store.upsertMember(ctx.signal, {
    workspaceId,
    agentId,
    agentName: agent?.name ?? '',
    tenantId,
    role,
    addedBy: caller.agentId,
    addedAt: Date.now(),
  }, memberAdded, { rebase: crossTenant, maxMembers });
  if (!stored) throw HubError.notFound();
  if (stored === 'full') throw membersQuotaExceeded(maxMembers);
  return { member: memberMessage(stored.member), created: stored.created };
}

/** Admin only; the owner cannot be removed. */
export async function removeMember(env: WorkspaceEnv, ctx: CallContext, caller: Caller, request: workspacev1.RemoveMemberRequest) {
  const workspaceId = validate.workspaceId(request.workspaceId);
  const agentId = validate.agentId(request.agentId);
  const access = await resolveAccess(env, ctx, caller, workspaceId);
  requireRole(access, Role.ADMIN);
  if (agentId === access.workspace.ownerAgentId) throw HubError.invalidOperation('Cannot remove workspace owner');
  if (!(await env.store.removeMember(ctx.signal, workspaceId, agentId, memberRemoved(workspaceId, agentId, caller.agentId)))) throw HubError.notFound('Member not found');
  return { workspaceId, agentId };
}

/** Any member; ordered by added_at, then agent_id. Members whose grant lapsed are listed too. */
export async function listMembers(env: WorkspaceEnv, ctx: CallContext, caller: Caller, request: workspacev1.ListMembersRequest) {
  const access = await resolveAccess(env, ctx, caller, validate.workspaceId(request.workspaceId));
  const members = await env.store.listMembers(ctx.signal, access.workspace.id);
  return { members: members.map(memberMessage) };
}
