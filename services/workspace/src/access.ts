import { identityv1, workspacev1 } from '@agenthub/proto';
import { HubError, type CallContext, type Caller, type Client, type QuotaOverrides } from '@agenthub/runtime';
import type { WorkspaceQuotas } from './quotas.js';
import type { MemberRecord, WorkspaceRecord, WorkspaceStore } from './store.js';

const { Role } = workspacev1;
type Role = workspacev1.Role;

/** The part of the identity service this one calls: agent look-ups and grant checks. */
export type IdentityClient = Pick<Client<typeof identityv1.IdentityService.method>, 'getAgent' | 'checkGrant' | 'getTenantLimits'>;

/** What the domain modules work with. */
export interface WorkspaceEnv {
  store: WorkspaceStore;
  identity: IdentityClient;
  quotas: WorkspaceQuotas;
  /** Tenants' overrides of the quotas set per tenant (`members_per_workspace`). */
  overrides: QuotaOverrides;
}

/** The agent a call acts for. */

/** The caller's standing in one workspace, once every access check has passed. */
export interface Access {
  workspace: WorkspaceRecord;
  member: MemberRecord;
  role: Role;
  owner: boolean;
  /** Set when resolveAccess was asked for it (`countMembers`), read in the same query. */
  memberCount?: number;
}

/**
 * Whether a membership gives access right now. Same-tenant members and the owner always do; a
 * member from another tenant only while an approved grant links it with the agent who added it.
 * Identity is asked on every call, never cached, so a revoked grant denies the very next call.
 */
export async function membershipCounts(env: WorkspaceEnv, ctx: CallContext, workspace: WorkspaceRecord, member: MemberRecord): Promise<boolean> {
  if (member.agentId === workspace.ownerAgentId || member.tenantId === workspace.ownerTenantId) return true;
  const grant = await env.identity.checkGrant({ agentId: member.agentId, otherAgentId: member.addedBy }, { parent: ctx });
  return grant.approved;
}

/**
 * Resolves the caller's access to a workspace whose id is already validated: NOT_FOUND when the
 * workspace does not exist, ACCESS_DENIED when the caller is not a member or its cross-tenant
 * membership has no approved grant behind it. Tenant trust alone gives no access.
 */
export async function resolveAccess(env: WorkspaceEnv, ctx: CallContext, caller: Caller, workspaceId: string, options: { countMembers?: boolean } = {}): Promise<Access> {
  const found = await env.store.getWorkspaceWithMember(ctx.signal, workspaceId, caller.agentId, options);
  if (!found) throw HubError.notFound();
  const { workspace, member, memberCount } = found;
  if (!member || !(await membershipCounts(env, ctx, workspace, member))) throw HubError.accessDenied();
  return { workspace, member, role: member.role, owner: caller.agentId === workspace.ownerAgentId, memberCount };
}

// The enum's numbers follow read < write < admin, so comparing them compares privilege.
export function requireRole(access: Access, needed: typeof Role.WRITE | typeof Role.ADMIN): void {
  if (access.role >= needed) return;
  throw HubError.permissionRequired(needed === Role.ADMIN ? 'Admin access required' : 'Write access required');
}

export function requireOwner(access: Access): void {
  if (!access.owner) throw HubError.permissionRequired('Owner access required');
}
