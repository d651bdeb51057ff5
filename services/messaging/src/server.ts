import { messagingv1 } from '@agenthub/proto';
import { callerOf, type ServiceHandlers } from '@agenthub/runtime';
import type { MessagingEnv } from './env.js';
import { ackDelivery, pollInbox } from './inbox.js';
import { sendMessageOnce } from './send-once.js';
import { watchTask } from './streams.js';
import { cancelTask, getTask, listTasks, updateTask } from './tasks.js';

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
  };
}
