import { eventsv1, messagingv1 } from '@agenthub/proto';
import type { CallOptions } from '@agenthub/runtime';
import { bad, isObject, str, type Json } from '../fields.js';
import type { RpcContext, RpcMethod } from '../jsonrpc.js';
import type { Clients } from '../route.js';

/**
 * A2A 1.0 task push notification configs on the strict endpoint: the task must be one the caller
 * sent or received (asked of the messaging service as the caller: TASK_NOT_FOUND otherwise), then
 * the events service keeps the config and delivers every transition of the task to its URL as an
 * A2A StreamResponse, with Standard Webhooks signatures, retries and the config's authentication.
 */

type Client = Record<string, (request: unknown, options: CallOptions) => Promise<unknown>>;

function clientOf(clients: Clients, typeName: string): Client {
  const client = clients.get(typeName);
  if (!client) throw new Error(`No client for ${typeName}`);
  return client as unknown as Client;
}

const options = (ctx: RpcContext): CallOptions => ({ principal: ctx.principal, signal: ctx.signal });

/** A2A's TaskPushNotificationConfig in ProtoJSON (empty fields left out). */
export function configOut(c: eventsv1.TaskPushConfig | undefined): Json {
  if (!c) return {};
  return {
    id: c.id,
    taskId: c.taskId,
    url: c.url,
    ...(c.token ? { token: c.token } : {}),
    ...(c.authScheme ? { authentication: { scheme: c.authScheme, ...(c.authCredentials ? { credentials: c.authCredentials } : {}) } } : {}),
  };
}

/** The config a Create (or a SendMessage's `taskPushNotificationConfig`) names, for `taskId`. */
export function configIn(raw: unknown, at: string, taskId: string) {
  if (!isObject(raw)) throw bad(at, 'must be an object');
  const p = at ? `${at}.` : '';
  const auth = raw.authentication;
  if (auth !== undefined && auth !== null && !isObject(auth)) throw bad(`${p}authentication`, 'must be an object');
  return {
    id: str(raw, 'id', p, false) ?? '',
    taskId,
    url: str(raw, 'url', p, true)!,
    token: str(raw, 'token', p, false) ?? '',
    authScheme: isObject(auth) ? (str(auth, 'scheme', `${p}authentication.`, true) ?? '') : '',
    authCredentials: isObject(auth) ? (str(auth, 'credentials', `${p}authentication.`, false) ?? '') : '',
  };
}

/** Refuses (TASK_NOT_FOUND) unless the caller sent or received the task. */
async function visible(clients: Clients, ctx: RpcContext, taskId: string): Promise<void> {
  await clientOf(clients, messagingv1.MessagingService.typeName).getTask!({ taskId, historyLength: 0 }, options(ctx));
}

/** Creates the config for a task already known to be the caller's. */
export async function createConfig(clients: Clients, ctx: RpcContext, config: ReturnType<typeof configIn>): Promise<Json> {
  const events = clientOf(clients, eventsv1.EventsService.typeName);
  const r = (await events.createTaskPushConfig!({ config }, options(ctx))) as eventsv1.CreateTaskPushConfigResponse;
  // The signing secret is the hub's addition to A2A's shape: shown once, like a webhook's.
  return { ...configOut(r.config), signingSecret: r.signingSecret };
}

export function pushConfigMethods(clients: Clients): [string, RpcMethod][] {
  const events = () => clientOf(clients, eventsv1.EventsService.typeName);
  const taskIdOf = (p: Json) => str(p, 'taskId', '', true)!;
  return [
    ['CreateTaskPushNotificationConfig', {
      async invoke(p, ctx) {
        const taskId = taskIdOf(p);
        const config = configIn(p, '', taskId);
        await visible(clients, ctx, taskId);
        return createConfig(clients, ctx, config);
      },
    }],
    ['GetTaskPushNotificationConfig', {
      async invoke(p, ctx) {
        const taskId = taskIdOf(p);
        const id = str(p, 'id', '', true)!;
        await visible(clients, ctx, taskId);
        return configOut(((await events().getTaskPushConfig!({ taskId, id }, options(ctx))) as eventsv1.GetTaskPushConfigResponse).config);
      },
    }],
    ['ListTaskPushNotificationConfigs', {
      async invoke(p, ctx) {
        const taskId = taskIdOf(p);
        await visible(clients, ctx, taskId);
        const r = (await events().listTaskPushConfigs!({ taskId }, options(ctx))) as eventsv1.ListTaskPushConfigsResponse;
        // At most ten per task and agent: one page, so nextPageToken is always "".
        return { configs: r.configs.map(configOut), nextPageToken: '' };
      },
    }],
    ['DeleteTaskPushNotificationConfig', {
      async invoke(p, ctx) {
        const taskId = taskIdOf(p);
        const id = str(p, 'id', '', true)!;
        await visible(clients, ctx, taskId);
        await events().deleteTaskPushConfig!({ taskId, id }, options(ctx));
        return {};
      },
    }],
  ];
}
