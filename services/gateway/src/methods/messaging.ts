import type { GenService, GenServiceMethods } from '@bufbuild/protobuf/codegenv2';
import { messagingv1 } from '@agenthub/proto';
import { STATE_WORDS, stateOfWord, UPDATE_TARGETS } from '@agenthub/tasks';
import type { RpcContext } from '../jsonrpc.js';
import { bad, isObject, optionalBool, optionalInt, str, type Json } from '../fields.js';
import type { Clients, Route } from '../route.js';
import { checked, MESSAGING_PARAMS } from './messaging-params.js';
import { deliveryOut, messageIn, partsIn, sendRequest, taskOut } from './messaging-codec.js';
import { bounded, inboxEvents, resumeVersion, STREAM_MAX_MS, streamMethod, WAITING_CALL_MS, watch, type StreamOptions } from './messaging-streams.js';

/**
 * Messaging and tasks as JSON-RPC methods, each forwarded to one messaging RPC: `SendMessage`,
 * `GetTask`, `CancelTask`, `ListTasks`, the streams `SendStreamingMessage` and `SubscribeToTask`;
 * and the inbox of connected agents (`x-hub/inbox.poll`, `x-hub/inbox.stream`, `x-hub/inbox.ack`,
 * `x-hub/tasks.update`). The dialect is messaging-codec.ts's, the streams messaging-streams.ts's.
 */

const { TaskState } = messagingv1;

/** A method forwarding to one messaging RPC (the contract test walks `service` and `rpc`). */
function method(
  clients: Clients,
  rpc: keyof typeof messagingv1.MessagingService.method & string,
  build: (params: Json, ctx: RpcContext) => unknown,
  result: (response: any, params: Json) => unknown,
  timeoutMs?: number,
  /** Whether a request may share a round trip with others of its RPC (CallOptions.grouped). */
  grouped?: (request: any) => boolean,
): Route {
  const service = messagingv1.MessagingService;
  return {
    service: service as unknown as GenService<GenServiceMethods>,
    rpc,
    async invoke(params, ctx) {
      const request = build(params, ctx);
      const client = clients.get(service.typeName);
      if (!client) throw new Error(`No client for ${service.typeName}`);
      const response = await client[rpc]!(request, { principal: ctx.principal, signal: ctx.signal, grouped: grouped?.(request), ...(timeoutMs ? { timeoutMs } : {}) });
      return result(response, params);
    },
  };
}

const taskId = (params: Json) => str(params, 'id', '', true)!;

export function messagingMethods(clients: Clients, options: StreamOptions = {}): [string, Route][] {
  return unchecked(clients, options.streamMaxMs ?? STREAM_MAX_MS).map(([name, route]) => [name, checked(route, MESSAGING_PARAMS[name])]);
}

function unchecked(clients: Clients, streamMaxMs: number): [string, Route][] {
  const withHistory = (params: Json) => {
    const cfg = isObject(params.configuration) ? params.configuration : {};
    return cfg.historyLength !== undefined || cfg.blocking === true;
  };
  return [
    // A send that shows no history asks for none: the service would encode it for nothing.
    ['SendMessage', method(
      clients,
      'sendMessage',
      (p, ctx) => (withHistory(p) ? sendRequest(p, ctx) : { ...sendRequest(p, ctx), historyLength: 0 }),
      (r, p) => taskOut(r.task, { messages: withHistory(p) }),
      WAITING_CALL_MS,
      (r) => !r.blocking,
    )],
    ['GetTask', method(
      clients,
      'getTask',
      (p) => ({ taskId: taskId(p), historyLength: optionalInt(p, 'historyLength', '', 0) }),
      (r) => taskOut(r.task, { messages: true }),
    )],
    ['CancelTask', method(clients, 'cancelTask', (p) => ({ taskId: taskId(p) }), (r) => taskOut(r.task, { messages: false }))],
    ['x-hub/inbox.poll', method(
      clients,
      'pollInbox',
      (p) => ({ waitMs: optionalInt(p, 'wait_ms', '', 0, 30_000) ?? 0, max: optionalInt(p, 'max', '', 1, 100) ?? 10 }),
      (r: messagingv1.PollInboxResponse) => ({ deliveries: r.deliveries.map(deliveryOut) }),
      WAITING_CALL_MS,
    )],
    ['SendStreamingMessage', streamMethod(clients, 'watchTask', async (p, ctx, client) => {
      const request = { ...sendRequest(p, ctx), blocking: false };
      const { task } = (await client.sendMessage!(request, { principal: ctx.principal, signal: ctx.signal })) as messagingv1.SendMessageResponse;
      return watch(client, { taskId: task!.id, afterVersion: task!.version }, ctx, streamMaxMs, task!);
    })],
    ['SubscribeToTask', streamMethod(clients, 'watchTask', async (p, ctx, client) =>
      watch(client, { taskId: taskId(p), afterVersion: resumeVersion(ctx.lastEventId), historyLength: optionalInt(p, 'historyLength', '', 0) }, ctx, streamMaxMs),
    )],
    ['ListTasks', method(
      clients,
      'listTasks',
      (p) => {
        const status = str(p, 'status', '', false);
        const state = status === undefined ? TaskState.UNSPECIFIED : stateOfWord(status);
        if (state === undefined) throw bad('status', `must be one of ${STATE_WORDS.join(', ')}`);
        const after = str(p, 'lastUpdatedAfter', '', false);
        if (after !== undefined && Number.isNaN(Date.parse(after))) throw bad('lastUpdatedAfter', 'must be an ISO 8601 timestamp');
        return {
          contextId: str(p, 'contextId', '', false) ?? '',
          state,
          pageSize: optionalInt(p, 'pageSize', '', 1, 100) ?? 0,
          pageToken: str(p, 'pageToken', '', false) ?? '',
          historyLength: optionalInt(p, 'historyLength', '', 0),
          updatedAfter: after === undefined ? 0n : BigInt(Date.parse(after)),
          includeArtifacts: optionalBool(p, 'includeArtifacts', '') ?? false,
        };
      },
      (r: messagingv1.ListTasksResponse) => ({
        tasks: r.tasks.map((t) => taskOut(t, { messages: true })),
        nextPageToken: r.nextPageToken,
        totalSize: r.totalSize,
      }),
    )],
    ['x-hub/inbox.stream', streamMethod(clients, 'streamInbox', async (p, ctx, client) => {
      const max = optionalInt(p, 'max', '', 1, 100) ?? 10;
      return bounded((signal) => inboxEvents(client, max, ctx, signal, streamMaxMs), ctx, streamMaxMs);
    })],
    ['x-hub/inbox.ack', method(clients, 'ackDelivery', (p) => ({ deliveryId: str(p, 'delivery_id', '', true)! }), (r) => ({ acked: r.acked }))],
    ['x-hub/tasks.update', method(
      clients,
      'updateTask',
      (p) => {
        const state = str(p, 'state', '', true)!;
        if (!UPDATE_TARGETS.has(state as never)) throw bad('state', `must be one of ${[...UPDATE_TARGETS].join(', ')}`);
        const artifacts = p.artifacts ?? [];
        if (!Array.isArray(artifacts)) throw bad('artifacts', 'must be an array');
        return {
          taskId: str(p, 'task_id', '', true)!,
          state: stateOfWord(state),
          message: p.message === undefined ? undefined : messageIn(p.message, 'message', 'agent'),
          artifacts: artifacts.map((a: unknown, i: number) => {
            const at = `artifacts[${i}]`;
            if (!isObject(a)) throw bad(at, 'must be an object');
            return {
              name: str(a, 'name', `${at}.`, false) ?? '',
              mimeType: str(a, 'mimeType', `${at}.`, false) ?? '',
              parts: partsIn(a.parts, `${at}.parts`),
            };
          }),
        };
      },
      (r) => taskOut(r.task, { messages: true }),
    )],
  ];
}
