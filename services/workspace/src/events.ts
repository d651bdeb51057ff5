import { WORKSPACE_EVENTS_TOPIC, type OutboxEvent } from '@agenthub/runtime';
import { roleText, type MemberRecord, type WorkspaceRecord } from './store.js';

/**
 * The workspace and member events of the interface (Events), in the pattern of
 * `workspace.memory.stored`: the workspace, the object's id, and the acting agent. The store
 * writes each in the same transaction as the change it announces.
 */
function event(workspaceId: string, type: string, data: Record<string, unknown>): OutboxEvent {
  return { topic: WORKSPACE_EVENTS_TOPIC, partitionKey: workspaceId, type, data: { workspace_id: workspaceId, ...data } };
}

export const workspaceCreated = (workspace: WorkspaceRecord): OutboxEvent =>
  event(workspace.id, 'workspace.created', { name: workspace.name, owner_agent_id: workspace.ownerAgentId, created_by: workspace.ownerAgentId });

export const workspaceDeleted = (workspaceId: string, agentId: string): OutboxEvent =>
  event(workspaceId, 'workspace.deleted', { deleted_by: agentId });

export const memberAdded = (member: MemberRecord): OutboxEvent =>
  event(member.workspaceId, 'workspace.member.added', { agent_id: member.agentId, role: roleText(member.role), added_by: member.addedBy });

export const memberRemoved = (workspaceId: string, agentId: string, removedBy: string): OutboxEvent =>
  event(workspaceId, 'workspace.member.removed', { agent_id: agentId, removed_by: removedBy });
