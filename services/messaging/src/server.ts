import { messagingv1 } from '@agenthub/proto';
import { HubError, QuotaOverrides, Reason, type Db, type Kv, type ServiceHandlers } from '@agenthub/runtime';
import { ackDelivery, pollInbox } from './inbox.js';
import { InboxRoom } from './inbox-room.js';
import { Recipients } from './recipients.js';
import { sendMessageOnce } from './send-once.js';
import { DeliveryStore } from './delivery-store.js';
import { PushStore } from './push-store.js';
import { SendKeyStore } from './send-key-store.js';
import { TaskStore } from './task-store.js';
import { watchTask } from './streams.js';
import {
  callerOf,
  cancelTask,
  DEFAULT_LIMITS,
  getTask,
  inboxChannel,
  listTasks,
  SettledHandoff,
  updateTask,
  type IdentityClient,
  type MessagingEnv,
  type MessagingLimits,
} from './tasks.js';
import { InboxWakes, LocalFirstKv } from './wake.js';

/** The environment the handlers and the sweeper share. */
export function messagingEnv(deps: {
  db: Db;
  kv: Kv;
  identity: IdentityClient;
  limits?: Partial<MessagingLimits>;
  now?: () => number;
}): MessagingEnv {
  const kv = new LocalFirstKv(deps.kv);
  const deliveries = new DeliveryStore(deps.db);
  return {
    tasks: new TaskStore(deps.db),
    deliveries,
    pushes: new PushStore(deps.db),
    sendKeys: new SendKeyStore(deps.db),
    inboxRoom: new InboxRoom(deliveries),
    identity: deps.identity,
    recipients: new Recipients(deps.identity),
    kv,
    wakes: new InboxWakes(kv, inboxChannel),
    settled: new SettledHandoff(),
    limits: { ...DEFAULT_LIMITS, ...deps.limits },
    overrides: new QuotaOverrides(async (tenantId, signal) => (await deps.identity.getTenantLimits({ tenantId }, { principal: { kind: 'operator' }, signal })).limits?.quotas ?? {}),
    now: deps.now ?? Date.now,
  };
}

/** The handlers of `agenthub.messaging.v1.MessagingService`. */
export function createMessagingHandlers(env: MessagingEnv): ServiceHandlers<typeof messagingv1.MessagingService.method> {
  // Every handler is async so that callerOf's refusal becomes a rejection.
  return {
    sendMessage: async (request, ctx) => sendMessageOnce(env, ctx, callerOf(ctx), request),
    getTask: async (request, ctx) => getTask(env, ctx, callerOf(ctx), request),
    cancelTask: async (request, ctx) => cancelTask(env, ctx, callerOf(ctx), request),
    pollInbox: async (request, ctx) => pollInbox(env, ctx, callerOf(ctx), request),
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
