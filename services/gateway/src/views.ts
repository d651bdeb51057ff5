import { identityv1, workspacev1 } from '@agenthub/proto';
import type { Principal } from '@agenthub/runtime';

/** Proto messages as the interface's JSON: snake_case fields, lowercase enum words, epoch ms. */

/** int64 timestamps arrive as bigint; epoch milliseconds fit a JSON number exactly. */
function ms(value: bigint): number {
  return Number(value);
}

const roleNames: Record<workspacev1.Role, string | undefined> = {
  [workspacev1.Role.UNSPECIFIED]: undefined,
  [workspacev1.Role.READ]: 'read',
  [workspacev1.Role.WRITE]: 'write',
  [workspacev1.Role.ADMIN]: 'admin',
};

export const roleOf: Record<'read' | 'write' | 'admin', workspacev1.Role> = {
  read: workspacev1.Role.READ,
  write: workspacev1.Role.WRITE,
  admin: workspacev1.Role.ADMIN,
};

export function roleName(role: workspacev1.Role): string | undefined {
  return roleNames[role];
}

export function workspaceView(ws: workspacev1.Workspace | undefined) {
  if (!ws) return undefined;
  return {
    id: ws.id,
    name: ws.name,
    description: ws.description,
    owner_agent_id: ws.ownerAgentId,
    created_at: ms(ws.createdAt),
  };
}

/** A memory; `score` only where the result is ranked (query, forget by query). */
export function memoryView(m: workspacev1.Memory | undefined, options: { score?: boolean } = {}) {
  if (!m) return undefined;
  return {
    id: m.id,
    workspace_id: m.workspaceId,
    content: m.content,
    type: m.type,
    tags: m.tags,
    ...(options.score ? { score: m.score } : {}),
    created_at: ms(m.createdAt),
    created_by: m.createdBy,
    updated_at: ms(m.updatedAt),
    updated_by: m.updatedBy,
  };
}

export function memberView(m: workspacev1.Member | undefined) {
  if (!m) return undefined;
  return { agent_id: m.agentId, agent_name: m.agentName, role: roleName(m.role), added_at: ms(m.addedAt) };
}

const grantStatusNames: Record<identityv1.GrantStatus, string> = {
  [identityv1.GrantStatus.UNSPECIFIED]: 'unspecified',
  [identityv1.GrantStatus.PENDING]: 'pending',
  [identityv1.GrantStatus.APPROVED]: 'approved',
  [identityv1.GrantStatus.REVOKED]: 'revoked',
};

export const grantStatusOf: Record<'pending' | 'approved' | 'revoked', identityv1.GrantStatus> = {
  pending: identityv1.GrantStatus.PENDING,
  approved: identityv1.GrantStatus.APPROVED,
  revoked: identityv1.GrantStatus.REVOKED,
};

export function grantView(g: identityv1.Grant | undefined) {
  if (!g) return undefined;
  return {
    id: g.id,
    requester_agent_id: g.requesterAgentId,
    target_agent_id: g.targetAgentId,
    status: grantStatusNames[g.status],
    created_at: ms(g.createdAt),
    updated_at: ms(g.updatedAt),
  };
}

export function tenantView(t: identityv1.Tenant | undefined) {
  if (!t) return undefined;
  return { id: t.id, name: t.name, created_at: ms(t.createdAt) };
}

export function agentView(a: identityv1.Agent | undefined) {
  if (!a) return undefined;
  return {
    id: a.id,
    tenant_id: a.tenantId,
    name: a.name,
    endpoint_url: a.endpointUrl || null,
    output_modes: a.outputModes,
    created_at: ms(a.createdAt),
  };
}

/**
 * An agent as `principal` may see it: the operator and agents of its own tenant see everything;
 * an agent of another tenant learns only its id and name (not its tenant, push endpoint or
 * output modes), grant or not.
 */
export function agentViewFor(a: identityv1.Agent | undefined, principal: Principal) {
  if (!a) return undefined;
  if (principal.kind === 'operator' || principal.tenantId === a.tenantId) return agentView(a);
  return { id: a.id, name: a.name };
}

export function keyView(k: identityv1.ApiKey | undefined) {
  if (!k) return undefined;
  return {
    id: k.id,
    agent_id: k.agentId,
    prefix: k.prefix,
    created_at: ms(k.createdAt),
    revoked_at: k.revokedAt ? ms(k.revokedAt) : null,
  };
}
