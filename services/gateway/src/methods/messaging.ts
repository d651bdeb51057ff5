import type { GenService, GenServiceMethods } from '@bufbuild/protobuf/codegenv2';
import { messagingv1 } from '@agenthub/proto';
import type { CallOptions } from '@agenthub/runtime';
import { partFromInterface, partToInterface, STATE_WORDS, stateOfWord, UPDATE_TARGETS, wordOf, type DecodeOptions } from '@agenthub/tasks';
import type { RpcContext, StreamEvent } from '../jsonrpc.js';
import { bad, isObject, optionalBool, optionalInt, str, type Json } from '../fields.js';
import type { Clients, Route } from '../route.js';
import { checked, MESSAGING_PARAMS } from './messaging-params.js';
import { sentTaskStream } from '../task-stream.js';

/**
 * Messaging and tasks in the interface's dialect (A2A: camelCase, parts tagged by `kind`,
 * lowercase states, ISO timestamps): `SendMessage`, `GetTask`, `CancelTask`; and the inbox of
 * connected agents (`x-hub/inbox.poll`, `x-hub/inbox.ack`, `x-hub/tasks.update`).
 *
 * Params are checked here by hand so that each malformed part is named by index and field
 * (`message.parts[2].mimeType`); the messaging service checks them again.
 */

/** Largest inline `data` of a file part, in base64 characters (512 KiB decoded). */
export const MAX_INLINE_DATA_CHARS = 4 * Math.ceil((512 * 1024) / 3);
/** Parts per message or artifact. */
export const MAX_PARTS = 100;
/** Calls that may wait (blocking sends, inbox long-polls) get this long before the gateway gives up. */
export const WAITING_CALL_MS = 70_000;
/**
 * A stream is closed (cleanly) after this long; the client reconnects with Last-Event-ID and
 * loses nothing. Bounding it lets deadlines, deploys and load balancers work as for other calls.
 * The default of HUB_STREAM_MAX_MS.
 */
export const STREAM_MAX_MS = 30 * 60_000;

/** The gateway's bound on its streams (HUB_STREAM_MAX_MS); STREAM_MAX_MS when unset. */
export interface StreamOptions {
  streamMaxMs?: number;
}
/** Longest `x-ttl`, in seconds (ten years): a delivery may wait that long for an offline recipient. */
export const MAX_TTL_SECONDS = 10 * 365 * 24 * 3600;
/** Each long-poll behind `x-hub/inbox.stream`. */
const INBOX_STREAM_POLL_MS = 25_000;

const { TaskState } = messagingv1;
const stateWord = (state: messagingv1.TaskState) => wordOf(state) ?? 'unknown';

/** How the part decoders report a bad field: -32602 naming it. */
export const PART_DECODING: DecodeOptions = { invalid: bad, maxInlineChars: MAX_INLINE_DATA_CHARS };

const partIn = (raw: unknown, at: string) => partFromInterface(raw, at, PART_DECODING);

function partsIn(raw: unknown, at: string): messagingv1.Part[] {
  if (!Array.isArray(raw)) throw bad(at, raw === undefined ? 'is required' : 'must be an array');
  if (raw.length === 0) throw bad(at, 'must have at least 1 items');
  if (raw.length > MAX_PARTS) throw bad(at, `must have at most ${MAX_PARTS} items`);
  return raw.map((part, i) => partIn(part, `${at}[${i}]`));
}

function messageIn(raw: unknown, at: string, defaultRole: string): messagingv1.Message {
  if (!isObject(raw)) throw bad(at, raw === undefined ? 'is required' : 'must be an object');
  const role = str(raw, 'role', `${at}.`, false) ?? defaultRole;
  if (role !== 'user' && role !== 'agent') throw bad(`${at}.role`, 'must be one of user, agent');
  return {
    $typeName: 'agenthub.messaging.v1.Message',
    role,
    parts: partsIn(raw.parts, `${at}.parts`),
    messageId: str(raw, 'messageId', `${at}.`, false) ?? '',
  };
}

function artifactOut(a: messagingv1.Artifact) {
  return {
    id: a.id,
    ...(a.name ? { name: a.name } : {}),
    ...(a.mimeType ? { mimeType: a.mimeType } : {}),
    parts: a.parts.map(partToInterface),
  };
}

function messageOut(m: messagingv1.Message) {
  return { role: m.role, parts: m.parts.map(partToInterface), ...(m.messageId ? { messageId: m.messageId } : {}) };
}

/** A Task as the interface shows it; `messages` only where asked for (GetTask, blocking sends). */
export function taskOut(task: messagingv1.Task | undefined, options: { messages: boolean }) {
  if (!task) return undefined;
  return {
    id: task.id,
    contextId: task.contextId,
    status: { state: stateWord(task.state), timestamp: new Date(Number(task.updatedAt)).toISOString() },
    ...(options.messages ? { messages: task.messages.map(messageOut) } : {}),
    artifacts: task.artifacts.map(artifactOut),
  };
}

/** A method forwarding to one messaging RPC (the contract test walks `service` and `rpc`). */
function method(
  clients: Clients,
  rpc: keyof typeof messagingv1.MessagingService.method & string,
  build: (params: Json, ctx: RpcContext) => unknown,
  result: (response: any, params: Json) => unknown,
  timeoutMs?: number,
): Route {
  const service = messagingv1.MessagingService;
  return {
    service: service as unknown as GenService<GenServiceMethods>,
    rpc,
    async invoke(params, ctx) {
      const request = build(params, ctx);
      const client = clients.get(service.typeName);
      if (!client) throw new Error(`No client for ${service.typeName}`);
      const response = await client[rpc]!(request, { principal: ctx.principal, signal: ctx.signal, ...(timeoutMs ? { timeoutMs } : {}) });
      return result(response, params);
    },
  };
}

function sendRequest(params: Json, ctx: RpcContext) {
  const message = messageIn(params.message, 'message', 'user');
  const raw = params.configuration ?? {};
  if (!isObject(raw)) throw bad('configuration', 'must be an object');
  const c = 'configuration.';
  const agentId = str(raw, 'agentId', c, false);
  const msg = params.message as Json;
  const contextId = str(raw, 'contextId', c, false) ?? str(msg, 'contextId', 'message.', false);
  const taskId = str(raw, 'taskId', c, false) ?? str(msg, 'taskId', 'message.', false);
  const target = ctx.targetAgentId ?? agentId;
  if (ctx.targetAgentId && agentId && agentId !== ctx.targetAgentId) throw bad(`${c}agentId`, 'must match the agent of the path');
  if (!target && !taskId) throw bad(`${c}agentId`, 'is required');
  const modes = raw.acceptedOutputModes;
  if (modes !== undefined && (!Array.isArray(modes) || modes.some((m) => typeof m !== 'string'))) {
    throw bad(`${c}acceptedOutputModes`, 'must be an array of strings');
  }
  const historyLength = optionalInt(raw, 'historyLength', c, 0);
  const ttl = optionalInt(raw, 'x-ttl', c, 0, MAX_TTL_SECONDS);
  return {
    recipientAgentId: target ?? '',
    message,
    contextId: contextId ?? '',
    taskId: taskId ?? '',
    historyLength,
    acceptedOutputModes: (modes as string[] | undefined) ?? [],
    blocking: optionalBool(raw, 'blocking', c) ?? false,
    ttlSeconds: ttl === undefined ? undefined : BigInt(ttl),
  };
}

const taskId = (params: Json) => str(params, 'id', '', true)!;

/**
 * The SSE events of a task stream, in the interface's dialect: the task (`kind: "task"`), then per
 * transition its artifacts (`artifact-update`) and its status (`status-update`, `final` on the
 * last). Event ids are the task version (`7`), or version and artifact index (`7.0`) for
 * artifacts, so a client resuming after either id misses nothing.
 */
function* taskEvents(item: messagingv1.WatchTaskResponse): Iterable<StreamEvent> {
  const e = item.event;
  if (e.case === 'task') {
    yield { id: String(e.value.version), result: { kind: 'task', ...taskOut(e.value, { messages: true }) } };
  } else if (e.case === 'transition') {
    const t = e.value;
    const version = String(t.version);
    for (const [i, artifact] of t.artifacts.entries()) {
      yield {
        id: `${version}.${i}`,
        result: { kind: 'artifact-update', taskId: t.taskId, contextId: t.contextId, artifact: artifactOut(artifact) },
      };
    }
    yield {
      id: version,
      result: {
        kind: 'status-update',
        taskId: t.taskId,
        contextId: t.contextId,
        status: {
          state: stateWord(t.state),
          timestamp: new Date(Number(t.updatedAt)).toISOString(),
          ...(t.message ? { message: messageOut(t.message) } : {}),
        },
        final: t.final,
      },
    };
  }
}

/** The version a Last-Event-ID says the client holds in full (`7` → 7, `7.0` → 6). */
export function resumeVersion(lastEventId: string | undefined): bigint | undefined {
  if (lastEventId === undefined) return undefined;
  const match = /^(\d{1,15})(?:\.(\d{1,6}))?$/.exec(lastEventId.trim());
  if (!match) throw bad('Last-Event-ID', 'must be an event id from this stream');
  const version = BigInt(match[1]!);
  return match[2] === undefined ? version : version - 1n;
}

type Streaming = (request: unknown, options: CallOptions) => AsyncIterable<unknown>;

/** Ends the stream quietly after `maxMs` (the client resumes) or when the client leaves. */
async function* bounded<T>(open: (signal: AbortSignal) => AsyncIterable<T>, ctx: RpcContext, maxMs: number): AsyncIterable<T> {
  const limit = AbortSignal.timeout(maxMs);
  const signal = ctx.signal ? AbortSignal.any([ctx.signal, limit]) : limit;
  try {
    yield* open(signal);
  } catch (err) {
    if (!signal.aborted) throw err;
  }
}

/**
 * Reads the first item before answering, so that refusals (unknown task, bad params) come back as
 * an ordinary JSON-RPC error instead of an opened stream.
 */
async function primed<T>(items: AsyncIterable<T>): Promise<AsyncIterable<T>> {
  const iterator = items[Symbol.asyncIterator]();
  const first = await iterator.next();
  return (async function* () {
    if (first.done) return;
    yield first.value;
    yield* { [Symbol.asyncIterator]: () => iterator };
  })();
}

async function* expand<T>(items: AsyncIterable<T>, events: (item: T) => Iterable<StreamEvent>): AsyncIterable<StreamEvent> {
  for await (const item of items) yield* events(item);
}

/** A streaming method whose events come from the messaging service (`rpc` for the contract test). */
function streamMethod(
  clients: Clients,
  rpc: keyof typeof messagingv1.MessagingService.method & string,
  open: (params: Json, ctx: RpcContext, client: Record<string, (request: unknown, options: CallOptions) => unknown>) => Promise<AsyncIterable<StreamEvent>>,
): Route {
  const service = messagingv1.MessagingService;
  return {
    service: service as unknown as GenService<GenServiceMethods>,
    rpc,
    async stream(params, ctx) {
      const client = clients.get(service.typeName);
      if (!client) throw new Error(`No client for ${service.typeName}`);
      return open(params, ctx, client as never);
    },
  };
}

/** `sent`: the task a send just answered with, streamed first; the watch then resumes after its version. */
function watch(client: Record<string, (request: unknown, options: CallOptions) => unknown>, request: unknown, ctx: RpcContext, maxMs: number, sent?: messagingv1.Task) {
  return primed(
    expand(
      bounded((signal) => {
        const source = (client.watchTask as Streaming)(request, { principal: ctx.principal, signal, timeoutMs: maxMs + 60_000 }) as AsyncIterable<messagingv1.WatchTaskResponse>;
        return sent ? sentTaskStream(sent, source) : source;
      }, ctx, maxMs),
      taskEvents,
    ),
  );
}

function deliveryOut(d: messagingv1.Delivery) {
  return {
    delivery_id: d.id,
    task_id: d.taskId,
    context_id: d.contextId,
    from_agent_id: d.senderAgentId,
    message: d.message ? messageOut(d.message) : undefined,
    created_at: Number(d.createdAt),
    attempt: d.attempt,
  };
}

/** Long-polls the caller's inbox back to back for as long as the stream is open. */
async function* inboxEvents(
  client: Record<string, (request: unknown, options: CallOptions) => unknown>,
  max: number,
  ctx: RpcContext,
  signal: AbortSignal,
): AsyncIterable<StreamEvent> {
  while (!signal.aborted) {
    const { deliveries } = (await client.pollInbox!(
      { waitMs: INBOX_STREAM_POLL_MS, max },
      { principal: ctx.principal, signal, timeoutMs: WAITING_CALL_MS },
    )) as messagingv1.PollInboxResponse;
    for (const d of deliveries) yield { id: d.id, result: { kind: 'delivery', ...deliveryOut(d) } };
  }
}

export function messagingMethods(clients: Clients, options: StreamOptions = {}): [string, Route][] {
  return unchecked(clients, options.streamMaxMs ?? STREAM_MAX_MS).map(([name, route]) => [name, checked(route, MESSAGING_PARAMS[name])]);
}

function unchecked(clients: Clients, streamMaxMs: number): [string, Route][] {
  const withHistory = (params: Json) => {
    const cfg = isObject(params.configuration) ? params.configuration : {};
    return cfg.historyLength !== undefined || cfg.blocking === true;
  };
  return [
    ['SendMessage', method(clients, 'sendMessage', sendRequest, (r, p) => taskOut(r.task, { messages: withHistory(p) }), WAITING_CALL_MS)],
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
    ['x-hub/inbox.stream', streamMethod(clients, 'pollInbox', async (p, ctx, client) => {
      const max = optionalInt(p, 'max', '', 1, 100) ?? 10;
      return bounded((signal) => inboxEvents(client, max, ctx, signal), ctx, streamMaxMs);
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
