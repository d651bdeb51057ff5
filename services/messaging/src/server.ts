import { messagingv1 } from '@agenthub/proto';
import { callerOf, groupedHandler, HubError, Reason, type ServiceHandlers } from '@agenthub/runtime';
import type { MessagingEnv } from './env.js';
import { ackDelivery, pollInbox, streamInbox } from './inbox.js';
import { sendMessageOnce } from './send-once.js';
import { watchTask } from './streams.js';
import { cancelTask, getTask, listTasks, updateTask } from './tasks.js';

/** The handlers of `agenthub.messaging.v1.MessagingService`. */
export function createMessagingHandlers(env: MessagingEnv): ServiceHandlers<typeof messagingv1.MessagingService.method> {
  // Every handler is async so that callerOf's refusal becomes a rejection.
  return {
    sendMessage: async (request, ctx) => sendMessageOnce(env, ctx, callerOf(ctx), request),
    sendMessages: groupedHandler((request: messagingv1.SendMessageRequest) => {
      if (request.blocking) throw HubError.invalidParams('blocking', 'a grouped send cannot block: it would hold the whole group');
    }),
    getTask: async (request, ctx) => getTask(env, ctx, callerOf(ctx), request),
    cancelTask: async (request, ctx) => cancelTask(env, ctx, callerOf(ctx), request),
    pollInbox: async (request, ctx) => pollInbox(env, ctx, callerOf(ctx), request),
    streamInbox: (request, ctx) => streamInbox(env, ctx, callerOf(ctx), request),
    ackDelivery: async (request, ctx) => ackDelivery(env, ctx, callerOf(ctx), request),
    updateTask: async (request, ctx) => updateTask(env, ctx, callerOf(ctx), request),
    listTasks: async (request, ctx) => listTasks(env, ctx, callerOf(ctx), request),
    watchTask: (request, ctx) => watchTask(env, ctx, callerOf(ctx), request),
    getAgentsUsage: async (request, ctx) => {
      if (ctx.principal?.kind !== 'operator') throw new HubError(Reason.PERMISSION_REQUIRED, 'Operator access required');
      const inFlight = await env.tasks.inFlightCounts(ctx.signal, request.agentIds);
      const queued = await env.deliveries.queuedCounts(ctx.signal, request.agentIds);
      const maxQueued = await env.overrides.limit(request.tenantId, 'queued_deliveries_per_agent', env.limits.maxQueuedDeliveriesPerAgent, ctx);
      const maxInFlight = env.limits.maxTasksInFlightPerSender;
      return {
        usage: request.agentIds.flatMap((id) => [
          // An unlimited quota (0 in configuration) shows its limit as 0.
          { quota: 'tasks_in_flight_per_sender', scope: id, used: BigInt(inFlight.get(id) ?? 0), limit: BigInt(Number.isFinite(maxInFlight) ? maxInFlight : 0) },
          { quota: 'queued_deliveries_per_agent', scope: id, used: BigInt(queued.get(id) ?? 0), limit: BigInt(Number.isFinite(maxQueued) ? maxQueued : 0) },
        ]),
      };
    },
  };
}
