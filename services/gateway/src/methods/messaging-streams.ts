import { setTimeout as sleep } from 'node:timers/promises';
import type { GenService, GenServiceMethods } from '@bufbuild/protobuf/codegenv2';
import { messagingv1 } from '@agenthub/proto';
import type { CallOptions } from '@agenthub/runtime';
import type { RpcContext, StreamEvent } from '../jsonrpc.js';
import { bad, type Json } from '../fields.js';
import type { Clients, Route } from '../route.js';
import { sentTaskStream } from '../task-stream.js';
import { artifactOut, deliveryOut, messageOut, stateWord, taskOut } from './messaging-codec.js';

/**
 * The streaming messaging methods' machinery: task streams as SSE events (resumable by
 * Last-Event-ID) and the inbox stream, each bounded to HUB_STREAM_MAX_MS.
 */

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
/** The least time between two openings of the messaging stream behind `x-hub/inbox.stream`. */
const REOPEN_PAUSE_MS = 1_000;

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
export async function* bounded<T>(open: (signal: AbortSignal) => AsyncIterable<T>, ctx: RpcContext, maxMs: number): AsyncIterable<T> {
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
export function streamMethod(
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
export function watch(client: Record<string, (request: unknown, options: CallOptions) => unknown>, request: unknown, ctx: RpcContext, maxMs: number, sent?: messagingv1.Task) {
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

/**
 * The caller's inbox as one messaging stream, reopened when the service ends it (a replica
 * draining) for as long as the client stays.
 */
export async function* inboxEvents(
  client: Record<string, (request: unknown, options: CallOptions) => unknown>,
  max: number,
  ctx: RpcContext,
  signal: AbortSignal,
  maxMs: number,
): AsyncIterable<StreamEvent> {
  while (!signal.aborted) {
    const opened = performance.now();
    const stream = (client.streamInbox as Streaming)({ max }, { principal: ctx.principal, signal, timeoutMs: maxMs + 60_000 }) as AsyncIterable<messagingv1.StreamInboxResponse>;
    for await (const { deliveries } of stream) {
      for (const d of deliveries) yield { id: d.id, result: { kind: 'delivery', ...deliveryOut(d) } };
    }
    // A replica that is draining ends streams as they open: not a reason to call it in a loop.
    if (performance.now() - opened < REOPEN_PAUSE_MS) await sleep(REOPEN_PAUSE_MS, undefined, { signal }).catch(() => undefined);
  }
}
