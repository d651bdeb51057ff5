import type { GenService, GenServiceMethods } from '@bufbuild/protobuf/codegenv2';
import { identityv1, messagingv1 } from '@agenthub/proto';
import { HubError, type CallOptions } from '@agenthub/runtime';
import { isFinal } from '@agenthub/tasks';
import type { RpcContext, RpcMethod, StreamEvent } from '../jsonrpc.js';
import { resumeVersion, STREAM_MAX_MS, WAITING_CALL_MS, type StreamOptions } from '../methods/messaging-streams.js';
import type { Clients, Route } from '../route.js';
import { bad, isObject, optionalBool, optionalInt, str, type Json } from '../fields.js';
import { messageIn, stateIn, stateOut, streamItems, taskOut } from './codec.js';
import { sentTaskStream } from '../task-stream.js';
import { A2aError } from './errors.js';
import { extendedAgentCard, type Reach } from './cards.js';
import { configIn, createConfig, pushConfigMethods } from './push-configs.js';

/**
 * The methods of the strict A2A 1.0 endpoint (`POST /agents/{agentId}/a2a/v1`, the path naming
 * the recipient), each forwarded to the messaging service and answered in ProtoJSON. The tasks
 * are the hub's: the interface's dialect and connected agents' inboxes see the same ones.
 */


type Client = Record<string, (request: unknown, options: CallOptions) => unknown>;
type Streaming = (request: unknown, options: CallOptions) => AsyncIterable<messagingv1.WatchTaskResponse>;

const taskId = (params: Json) => str(params, 'id', '', true)!;

const options = (ctx: RpcContext, timeoutMs?: number): CallOptions => ({ principal: ctx.principal, signal: ctx.signal, ...(timeoutMs ? { timeoutMs } : {}) });

/**
 * SendMessageRequest → the service's request. Blocking unless `returnImmediately` (A2A's default,
 * the opposite of the interface's dialect). A contextId naming another conversation than the
 * continued task's is refused rather than ignored (A2A §3.4.3).
 */
async function sendRequest(params: Json, ctx: RpcContext, client: Client) {
  const inbound = messageIn(params.message, 'message');
  const cfg = params.configuration ?? {};
  if (!isObject(cfg)) throw bad('configuration', 'must be an object');
  const c = 'configuration.';
  const modes = cfg.acceptedOutputModes ?? [];
  if (!Array.isArray(modes) || modes.some((m) => typeof m !== 'string')) throw bad(`${c}acceptedOutputModes`, 'must be an array of strings');
  if (inbound.taskId && inbound.contextId) {
    const { task } = (await client.getTask!({ taskId: inbound.taskId, historyLength: 0 }, options(ctx))) as messagingv1.GetTaskResponse;
    if (task && task.contextId !== inbound.contextId) throw bad('message.contextId', 'does not match the contextId of the task named by message.taskId');
  }
  return {
    recipientAgentId: ctx.targetAgentId ?? '',
    message: inbound.message,
    contextId: inbound.contextId,
    taskId: inbound.taskId,
    historyLength: optionalInt(cfg, 'historyLength', c, 0),
    acceptedOutputModes: modes as string[],
    blocking: !(optionalBool(cfg, 'returnImmediately', c) ?? false),
  };
}

/**
 * A task's stream as A2A StreamResponses: the task first (unless resuming after an event id), then
 * its updates, ending after a terminal or input-required state, when the client leaves, or after
 * `maxMs` (HUB_STREAM_MAX_MS; the client resubscribes and loses nothing). The first item is read before the
 * stream is answered, so refusals come back as ordinary JSON-RPC errors.
 */
async function watch(
  client: Client,
  request: messagingv1.WatchTaskRequest | Json,
  ctx: RpcContext,
  refuseFinished: boolean,
  maxMs: number,
  /** The task a send just answered with: streamed first, the watch resuming after its version. */
  sent?: messagingv1.Task,
): Promise<AsyncIterable<StreamEvent>> {
  const limit = AbortSignal.timeout(maxMs);
  const signal = ctx.signal ? AbortSignal.any([ctx.signal, limit]) : limit;
  const source = (client.watchTask as Streaming)(request, { principal: ctx.principal, signal, timeoutMs: maxMs + 60_000 });
  const iterator = (sent ? sentTaskStream(sent, source) : source)[Symbol.asyncIterator]();
  const first = await iterator.next();
  const event = first.done ? undefined : first.value.event;
  if (refuseFinished && event?.case === 'task' && isFinal(event.value.state)) {
    await iterator.return?.();
    throw A2aError.unsupportedOperation(`Task is ${stateOut(event.value.state)}, a terminal state: there is nothing to subscribe to (use GetTask)`);
  }
  return (async function* () {
    try {
      for (let item = first; !item.done; item = await iterator.next()) {
        for (const e of streamItems(item.value)) {
          yield { id: e.id, result: e.result };
          if (e.last) return;
        }
      }
    } catch (err) {
      if (!signal.aborted) throw err;
    } finally {
      // Ends the service's stream too when this one ends first (input-required).
      await iterator.return?.();
    }
  })();
}

/**
 * ListTasks `status` values meaning "any state": UNSPECIFIED, and UNRECOGNIZED, which
 * `@a2a-js/sdk` (ts-proto) writes for a request that leaves `status` out (`listTasks({})`).
 */
const NO_STATE_FILTER: ReadonlySet<string> = new Set(['TASK_STATE_UNSPECIFIED', 'UNRECOGNIZED']);


type IdentityClient = {
  getAgent(request: { agentId: string }, options: CallOptions): Promise<identityv1.GetAgentResponse>;
  checkGrant(request: { agentId: string; otherAgentId: string }, options: CallOptions): Promise<identityv1.CheckGrantResponse>;
};

/**
 * The path's agent's card for the authenticated caller. The agent is looked up as the gateway
 * itself, as for the public card; the grant check runs as the caller, as a send's would.
 */
async function extendedCard(clients: Clients, ctx: RpcContext): Promise<unknown> {
  const identity = clients.get(identityv1.IdentityService.typeName) as unknown as IdentityClient | undefined;
  if (!identity) throw new Error(`No client for ${identityv1.IdentityService.typeName}`);
  const { agent } = await identity.getAgent({ agentId: ctx.targetAgentId ?? '' }, { principal: { kind: 'operator' }, signal: ctx.signal });
  if (!agent) throw HubError.notFound('Agent not found');
  const caller = ctx.principal;
  let reach: Reach = 'same-tenant';
  if (caller.kind === 'agent' && caller.tenantId !== agent.tenantId) {
    const grant = await identity.checkGrant({ agentId: caller.agentId, otherAgentId: agent.id }, options(ctx));
    reach = grant.approved ? 'grant-approved' : 'grant-required';
  }
  return extendedAgentCard(agent, ctx.baseUrl ?? '', reach);
}

/** SendMessage's `configuration.taskPushNotificationConfig`, when given. */
function pushConfigOf(params: Json): unknown {
  const cfg = isObject(params.configuration) ? params.configuration : {};
  const push = cfg.taskPushNotificationConfig;
  return push === undefined || push === null ? undefined : push;
}

export function a2aMethods(clients: Clients, streams: StreamOptions = {}): Map<string, RpcMethod> {
  const streamMaxMs = streams.streamMaxMs ?? STREAM_MAX_MS;
  const service = messagingv1.MessagingService;
  const client = (): Client => {
    const found = clients.get(service.typeName);
    if (!found) throw new Error(`No client for ${service.typeName}`);
    return found as unknown as Client;
  };
  /** A unary method on one messaging RPC (`service`/`rpc` let the contract test walk it). */
  const unary = (rpc: keyof typeof service.method & string, call: (params: Json, ctx: RpcContext, c: Client) => Promise<unknown>): Route => ({
    service: service as unknown as GenService<GenServiceMethods>,
    rpc,
    invoke: (params, ctx) => call(params, ctx, client()),
  });
  const streaming = (rpc: keyof typeof service.method & string, open: (params: Json, ctx: RpcContext, c: Client) => Promise<AsyncIterable<StreamEvent>>): Route => ({
    service: service as unknown as GenService<GenServiceMethods>,
    rpc,
    stream: (params, ctx) => open(params, ctx, client()),
  });

  return new Map<string, RpcMethod>([
    ['SendMessage', unary('sendMessage', async (p, ctx, c) => {
      const raw = pushConfigOf(p);
      const push = raw === undefined ? undefined : configIn(raw, 'configuration.taskPushNotificationConfig', '');
      const request = await sendRequest(p, ctx, c);
      // With a push config the send returns at once, and the config is made for the new task
      // right away: the task's updates go to it rather than to a waiting answer.
      const sent = push ? { ...request, blocking: false } : request;
      const response = (await c.sendMessage!(sent, { ...options(ctx, WAITING_CALL_MS), grouped: !sent.blocking })) as messagingv1.SendMessageResponse;
      if (push) await createConfig(clients, ctx, { ...push, taskId: response.task!.id });
      return { task: taskOut(response.task!) };
    })],
    ['SendStreamingMessage', streaming('watchTask', async (p, ctx, c) => {
      const request = { ...(await sendRequest(p, ctx, c)), blocking: false };
      const { task } = (await c.sendMessage!(request, options(ctx))) as messagingv1.SendMessageResponse;
      return watch(c, { taskId: task!.id, afterVersion: task!.version }, ctx, false, streamMaxMs, task!);
    })],
    ['GetTask', unary('getTask', async (p, ctx, c) => {
      const request = { taskId: taskId(p), historyLength: optionalInt(p, 'historyLength', '', 0) };
      return taskOut(((await c.getTask!(request, options(ctx))) as messagingv1.GetTaskResponse).task!);
    })],
    ['CancelTask', unary('cancelTask', async (p, ctx, c) =>
      taskOut(((await c.cancelTask!({ taskId: taskId(p) }, options(ctx))) as messagingv1.CancelTaskResponse).task!),
    )],
    ['SubscribeToTask', streaming('watchTask', async (p, ctx, c) => {
      const afterVersion = resumeVersion(ctx.lastEventId);
      return watch(c, { taskId: taskId(p), afterVersion }, ctx, afterVersion === undefined, streamMaxMs);
    })],
    ['ListTasks', unary('listTasks', async (p, ctx, c) => {
      const status = str(p, 'status', '', false);
      const after = str(p, 'statusTimestampAfter', '', false);
      if (after !== undefined && Number.isNaN(Date.parse(after))) throw bad('statusTimestampAfter', 'must be an RFC 3339 timestamp');
      const includeArtifacts = optionalBool(p, 'includeArtifacts', '') ?? false;
      const pageSize = optionalInt(p, 'pageSize', '', 1, 100) ?? 50;
      const request = {
        contextId: str(p, 'contextId', '', false) ?? '',
        state: status === undefined || NO_STATE_FILTER.has(status) ? messagingv1.TaskState.UNSPECIFIED : stateIn(status, 'status'),
        pageSize,
        pageToken: str(p, 'pageToken', '', false) ?? '',
        historyLength: optionalInt(p, 'historyLength', '', 0),
        updatedAfter: after === undefined ? 0n : BigInt(Date.parse(after)),
        includeArtifacts,
        // The path's agent: its endpoint lists the caller's tasks with that agent only.
        peerAgentId: ctx.targetAgentId ?? '',
      };
      const r = (await c.listTasks!(request, options(ctx))) as messagingv1.ListTasksResponse;
      // nextPageToken is always present, empty on the last page (A2A §3.1.4).
      return { tasks: r.tasks.map((t) => taskOut(t, { artifacts: includeArtifacts })), nextPageToken: r.nextPageToken, pageSize, totalSize: r.totalSize };
    })],
    ...pushConfigMethods(clients),
    ['GetExtendedAgentCard', { invoke: (_p, ctx) => extendedCard(clients, ctx) }],
  ]);
}
