import { z } from 'zod';
import { workspacev1 } from '@agenthub/proto';
import { route, type Clients, type Route } from '../route.js';
import { field } from '../params.js';
import { memberView, roleName, roleOf, workspaceView } from '../views.js';

const noParams = z.object({});
const workspaceParams = z.object({ workspace_id: field.workspaceId });

/** Workspaces and members (`x-hub/workspace.*`). */
export function workspaceMethods(clients: Clients): [string, Route][] {
  const ws = workspacev1.WorkspaceService;
  return [
    ['x-hub/workspace.create', route(clients, ws, 'createWorkspace', {
      params: z.object({ name: z.string().trim().min(1).max(200), description: z.string().max(2000).optional() }),
      request: (p) => ({ name: p.name, description: p.description ?? '' }),
      result: (r) => ({ workspace: workspaceView(r.workspace) }),
    })],
    ['x-hub/workspace.get', route(clients, ws, 'getWorkspace', {
      params: workspaceParams,
      request: (p) => ({ workspaceId: p.workspace_id }),
      result: (r) => ({ workspace: workspaceView(r.workspace), role: roleName(r.role), member_count: r.memberCount }),
      grouped: true,
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
  ];
}
