import type { eventsv1 } from '@agenthub/proto';
import { HubError, Reason, type ServiceHandlers } from '@agenthub/runtime';
import { listDeliveries, replayDeliveries, testWebhook } from './deliveries.js';
import type { EventsEnv } from './env.js';
import { createTaskPushConfig, deleteTaskPushConfig, getTaskPushConfig, listTaskPushConfigs } from './task-push.js';
import { createWebhook, deleteWebhook, getWebhook, listWebhooks, rotateWebhookSecret } from './webhooks.js';

/** The handlers of `agenthub.events.v1.EventsService`; every one checks the caller's admin role. */
export function createEventsHandlers(env: EventsEnv): ServiceHandlers<typeof eventsv1.EventsService.method> {
  return {
    createWebhook: async (request, ctx) => createWebhook(env, ctx, request),
    listWebhooks: async (request, ctx) => listWebhooks(env, ctx, request),
    getWebhook: async (request, ctx) => getWebhook(env, ctx, request),
    deleteWebhook: async (request, ctx) => deleteWebhook(env, ctx, request),
    rotateWebhookSecret: async (request, ctx) => rotateWebhookSecret(env, ctx, request),
    testWebhook: async (request, ctx) => testWebhook(env, ctx, request),
    listDeliveries: async (request, ctx) => listDeliveries(env, ctx, request),
    replayDeliveries: async (request, ctx) => replayDeliveries(env, ctx, request),
    createTaskPushConfig: async (request, ctx) => createTaskPushConfig(env, ctx, request),
    getTaskPushConfig: async (request, ctx) => getTaskPushConfig(env, ctx, request),
    listTaskPushConfigs: async (request, ctx) => listTaskPushConfigs(env, ctx, request),
    deleteTaskPushConfig: async (request, ctx) => deleteTaskPushConfig(env, ctx, request),
    getUsage: async (request, ctx) => {
      if (ctx.principal?.kind !== 'operator') throw new HubError(Reason.PERMISSION_REQUIRED, 'Operator access required');
      const counts = await env.webhooks.webhookCounts(ctx.signal, request.workspaceIds, request.agentIds);
      const limit = BigInt(env.limits.maxWebhooksPerWorkspace);
      const row = (quota: string, scope: string, key: string) => ({ quota, scope, used: BigInt(counts.get(key) ?? 0), limit });
      return {
        usage: [
          ...request.workspaceIds.map((id) => row('webhooks_per_workspace', id, id)),
          ...request.agentIds.map((id) => row('webhooks_per_agent', id, `agent:${id}`)),
        ],
      };
    },
  };
}
