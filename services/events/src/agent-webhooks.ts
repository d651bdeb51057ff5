import { workspacev1 } from '@agenthub/proto';
import { HubError, Reason } from '@agenthub/runtime';
import type { EventsEnv } from './env.js';

/**
 * Agent-wide webhooks (created without a workspace): every event of a workspace their creator
 * owns or administers when the event is taken from the log, including workspaces created after
 * the webhook. `workspace.created` goes to its owner's, `workspace.deleted` to its deleter's (the
 * workspace is gone, so no role can be asked); every other event to those whose creator the
 * workspace service says is an admin, asked as that agent, so grants and demotions count.
 */
export async function matchAgentWebhooks(
  env: EventsEnv,
  event: { workspaceId: string; eventId: string; type: string; payload: string; occurredAt: number | undefined },
  signal: AbortSignal,
): Promise<string[]> {
  const hooks = await env.webhooks.agentWebhooks(signal, event.type, event.occurredAt);
  if (hooks.length === 0) return [];
  const data = (JSON.parse(event.payload) as { data?: Record<string, unknown> }).data ?? {};
  const admins = new Map<string, boolean>();
  const matched: string[] = [];
  for (const hook of hooks) {
    let takes: boolean;
    if (event.type === 'workspace.created') takes = data.owner_agent_id === hook.agentId;
    else if (event.type === 'workspace.deleted') takes = data.deleted_by === hook.agentId;
    else {
      if (!admins.has(hook.agentId)) admins.set(hook.agentId, await isAdmin(env, event.workspaceId, hook, signal));
      takes = admins.get(hook.agentId)!;
    }
    if (takes) matched.push(hook.id);
  }
  return env.deliveries.intakeFor(signal, matched, event, env.clock());
}

async function isAdmin(env: EventsEnv, workspaceId: string, agent: { agentId: string; tenantId: string }, signal: AbortSignal): Promise<boolean> {
  try {
    const access = await env.workspace.resolveAccess({ workspaceId }, { principal: { kind: 'agent', agentId: agent.agentId, tenantId: agent.tenantId }, signal });
    return access.role >= workspacev1.Role.ADMIN;
  } catch (err) {
    // No longer a member, or the workspace went since: nothing to deliver. Anything else (the
    // workspace service down) fails the intake, so the event is consumed again.
    if (err instanceof HubError && (err.reason === Reason.NOT_FOUND || err.reason === Reason.ACCESS_DENIED)) return false;
    throw err;
  }
}
