import { z } from 'zod';
import { identityv1, workspacev1 } from '@agenthub/proto';
import { route, type Clients, type Route } from './route.js';
import { field } from './params.js';
import { agentView, grantStatusOf, grantView, memberView, roleName, roleOf, workspaceView } from './views.js';

const noParams = z.object({});
const workspaceParams = z.object({ workspace_id: field.workspaceId });

/**
 * The agent-facing JSON-RPC methods of `POST /a2a` and `POST /agents/{agentId}/a2a`, each
 * forwarded to one RPC. Names and result shapes follow the interface specification; where it
 * gives no shape, the README documents ours.
 */
export function agentMethods(clients: Clients): Map<string, Route> {
  const ws = workspacev1.WorkspaceService;
  const id = identityv1.IdentityService;
  return new Map<string, Route>([
    ['x-hub/workspace.create', route(clients, ws, 'createWorkspace', {
      params: z.object({ name: z.string().trim().min(1).max(200), description: z.string().max(2000).optional() }),
      request: (p) => ({ name: p.name, description: p.description ?? '' }),
      result: (r) => ({ workspace: workspaceView(r.workspace) }),
    })],
    ['x-hub/workspace.get', route(clients, ws, 'getWorkspace', {
      params: workspaceParams,
      request: (p) => ({ workspaceId: p.workspace_id }),
      result: (r) => ({ workspace: workspaceView(r.workspace), role: roleName(r.role), member_count: r.memberCount }),
    })],
    ['x-hub/workspace.list', route(clients, ws, 'listWorkspaces', {
      params: noParams,
      request: () => ({}),
      result: (r) => ({
        workspaces: r.workspaces.map((w) => ({ ...workspaceView(w.workspace), role: roleName(w.role) })),
        count: r.workspaces.length,
      }),
    })],
    ['x-hub/workspace.delete', route(clients, ws, 'deleteWorkspace', {
      params: workspaceParams,
      request: (p) => ({ workspaceId: p.workspace_id }),
      result: (r) => ({ deleted: true, workspace_id: r.workspaceId }),
    })],
    ['x-hub/workspace.members.add', route(clients, ws, 'addMember', {
      params: z.object({ workspace_id: field.workspaceId, agent_id: field.agentId, role: field.role }),
      request: (p) => ({ workspaceId: p.workspace_id, agentId: p.agent_id, role: roleOf[p.role] }),
      result: (r) => ({ member: memberView(r.member), created: r.created }),
    })],
    ['x-hub/workspace.members.remove', route(clients, ws, 'removeMember', {
      params: z.object({ workspace_id: field.workspaceId, agent_id: field.agentId }),
      request: (p) => ({ workspaceId: p.workspace_id, agentId: p.agent_id }),
      result: (r) => ({ removed: true, workspace_id: r.workspaceId, agent_id: r.agentId }),
    })],
    ['x-hub/workspace.members.list', route(clients, ws, 'listMembers', {
      params: workspaceParams,
      request: (p) => ({ workspaceId: p.workspace_id }),
      result: (r) => ({ members: r.members.map(memberView), count: r.members.length }),
    })],
    ['x-hub/workspace.types', route(clients, ws, 'listMemoryTypes', {
      params: noParams,
      request: () => ({}),
      result: (r) => ({
        types: r.types.map((t) => t.type),
        descriptions: Object.fromEntries(r.types.map((t) => [t.type, t.description])),
      }),
    })],
    ['x-hub/grants.request', route(clients, id, 'requestGrant', {
      params: z.object({ agent_id: field.agentId }),
      request: (p) => ({ agentId: p.agent_id }),
      result: (r) => ({ grant: grantView(r.grant), created: r.created }),
    })],
    ['x-hub/grants.approve', route(clients, id, 'approveGrant', {
      params: z.object({ grant_id: field.id }),
      request: (p) => ({ grantId: p.grant_id }),
      result: (r) => ({ grant: grantView(r.grant) }),
    })],
    ['x-hub/grants.revoke', route(clients, id, 'revokeGrant', {
      params: z.object({ grant_id: field.id }),
      request: (p) => ({ grantId: p.grant_id }),
      result: (r) => ({ grant: grantView(r.grant) }),
    })],
    ['x-hub/grants.list', route(clients, id, 'listGrants', {
      params: z.object({ status: z.enum(['pending', 'approved', 'revoked']).optional() }),
      request: (p) => ({ status: p.status ? grantStatusOf[p.status] : identityv1.GrantStatus.UNSPECIFIED }),
      result: (r) => ({ grants: r.grants.map(grantView), count: r.grants.length }),
    })],
    ['x-hub/agents.get', route(clients, id, 'getAgent', {
      params: z.object({ agent_id: field.agentId }),
      request: (p) => ({ agentId: p.agent_id }),
      result: (r) => ({ agent: agentView(r.agent) }),
    })],
  ]);
}
