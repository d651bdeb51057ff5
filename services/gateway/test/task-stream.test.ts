import { create } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { agentMethods, type Clients, type RpcContext } from '@agenthub/gateway';
import { a2aMethods } from '../src/a2a/index.js';

const { TaskState } = messagingv1;

/**
 * A stand-in for the messaging service whose recipient finishes the task before the sender's
 * stream begins (a quick connected agent on a loaded machine): sendMessage answers with version 1
 * (submitted), but by the time the stream is opened the task stands at version 3 (completed).
 * watchTask behaves as the service does: without `afterVersion` it starts from the task as it
 * stands now; with it, it replays the transitions after that version from the kept table.
 */
function finishedBeforeWatch(): Clients {
  const at = (version: number, state: messagingv1.TaskState) =>
    create(messagingv1.TaskSchema, { id: 'task_1', contextId: 'ctx_1', version: BigInt(version), state });
  const transition = (version: number, state: messagingv1.TaskState) =>
    create(messagingv1.WatchTaskResponseSchema, {
      event: { case: 'transition', value: { taskId: 'task_1', contextId: 'ctx_1', version: BigInt(version), state, final: state === TaskState.COMPLETED } },
    });
  const messaging = {
    sendMessage: async () => create(messagingv1.SendMessageResponseSchema, { task: at(1, TaskState.SUBMITTED) }),
    watchTask: async function* (request: { afterVersion?: bigint }) {
      if (request.afterVersion === undefined) {
        yield create(messagingv1.WatchTaskResponseSchema, { event: { case: 'task', value: at(3, TaskState.COMPLETED) } });
        return;
      }
      for (const t of [transition(2, TaskState.WORKING), transition(3, TaskState.COMPLETED)]) {
        if (t.event.case === 'transition' && t.event.value.version > request.afterVersion) yield t;
      }
    },
  };
  return new Map([[messagingv1.MessagingService.typeName, messaging as never]]);
}

const ctx: RpcContext = { principal: { kind: 'agent', agentId: 'agt_sender', tenantId: 'acme' }, targetAgentId: 'agt_recipient' };

async function collect(stream: AsyncIterable<{ result: unknown }>) {
  const results: unknown[] = [];
  for await (const event of stream) results.push(event.result);
  return results;
}

describe('SendStreamingMessage to a recipient that finishes before the stream opens', () => {
  it('streams the sent task, then every update, on the interface endpoint', async () => {
    const method = agentMethods(finishedBeforeWatch()).get('SendStreamingMessage')!;
    const events = (await collect(await method.stream!({ message: { role: 'user', parts: [{ kind: 'text', text: 'hi' }] } }, ctx))) as {
      kind: string;
      status?: { state: string };
    }[];
    expect(events.map((e) => (e.kind === 'task' ? `task:${e.status?.state}` : `${e.kind}:${e.status?.state}`))).toEqual([
      'task:submitted',
      'status-update:working',
      'status-update:completed',
    ]);
  });

  it('streams the sent task, then every update, on the strict A2A endpoint', async () => {
    const method = a2aMethods(finishedBeforeWatch()).get('SendStreamingMessage')!;
    const message = { messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'hi' }] };
    const events = (await collect(await method.stream!({ message }, ctx))) as Record<string, { status?: { state: string } }>[];
    expect(events.map((e) => Object.keys(e)[0] + (e.task ? `:${e.task.status?.state}` : `:${e.statusUpdate?.status?.state}`))).toEqual([
      'task:TASK_STATE_SUBMITTED',
      'statusUpdate:TASK_STATE_WORKING',
      'statusUpdate:TASK_STATE_COMPLETED',
    ]);
  });
});

/**
 * A task that never finishes and an inbox that stays empty: watchTask sends the task, then waits,
 * and streamInbox waits, each until the caller lets go (as the service's calls do on cancellation).
 */
function neverEnding(): Clients {
  const task = create(messagingv1.TaskSchema, { id: 'task_1', contextId: 'ctx_1', version: 1n, state: TaskState.WORKING });
  const released = (signal: AbortSignal) =>
    new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('cancelled')), { once: true }));
  const messaging = {
    sendMessage: async () => create(messagingv1.SendMessageResponseSchema, { task }),
    watchTask: async function* (request: { afterVersion?: bigint }, options: { signal: AbortSignal }) {
      // Resuming after the sent task's version: nothing new to send.
      if (request.afterVersion === undefined) yield create(messagingv1.WatchTaskResponseSchema, { event: { case: 'task', value: task } });
      await released(options.signal);
    },
    streamInbox: async function* (_request: unknown, options: { signal: AbortSignal }) {
      await released(options.signal);
    },
  };
  return new Map([[messagingv1.MessagingService.typeName, messaging as never]]);
}

describe('the stream cap (HUB_STREAM_MAX_MS, README "Streams")', () => {
  const streamMaxMs = 300;
  const ended = async (open: Promise<AsyncIterable<{ result: unknown }>>) => {
    const started = Date.now();
    const events = await collect(await open);
    return { events, openMs: Date.now() - started };
  };

  it('ends the interface endpoint\'s SendStreamingMessage, SubscribeToTask and x-hub/inbox.stream cleanly after it', async () => {
    const methods = agentMethods(neverEnding(), { streamMaxMs });
    const message = { role: 'user', parts: [{ kind: 'text', text: 'hi' }] };
    const [sent, subscribed, inbox] = await Promise.all([
      ended(methods.get('SendStreamingMessage')!.stream!({ message }, ctx)),
      ended(methods.get('SubscribeToTask')!.stream!({ id: 'task_1' }, ctx)),
      ended(methods.get('x-hub/inbox.stream')!.stream!({}, ctx)),
    ]);
    expect([sent, subscribed].map((s) => (s.events as { kind: string }[]).map((e) => e.kind))).toEqual([['task'], ['task']]);
    expect(inbox.events).toEqual([]);
    for (const s of [sent, subscribed, inbox]) expect(s.openMs).toBeGreaterThanOrEqual(streamMaxMs - 5);
  });

  it('ends the strict A2A endpoint\'s SendStreamingMessage and SubscribeToTask cleanly after it', async () => {
    const methods = a2aMethods(neverEnding(), { streamMaxMs });
    const message = { messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'hi' }] };
    const [sent, subscribed] = await Promise.all([
      ended(methods.get('SendStreamingMessage')!.stream!({ message }, ctx)),
      ended(methods.get('SubscribeToTask')!.stream!({ id: 'task_1' }, ctx)),
    ]);
    for (const s of [sent, subscribed]) {
      expect((s.events as Record<string, unknown>[]).map((e) => Object.keys(e)[0])).toEqual(['task']);
      expect(s.openMs).toBeGreaterThanOrEqual(streamMaxMs - 5);
    }
  });
});

describe('x-hub/inbox.stream when the messaging service ends its stream (a replica draining)', () => {
  it('opens the messaging stream again, so its client gets the deliveries of the next one on the same SSE stream', async () => {
    const delivery = create(messagingv1.DeliverySchema, { id: 'dlv_1', taskId: 'task_1', contextId: 'ctx_1', senderAgentId: 'agt_sender', attempt: 1 });
    let opened = 0;
    const messaging = {
      streamInbox: async function* (_request: unknown, options: { signal: AbortSignal }) {
        opened += 1;
        // The first replica drains at once; the next one has a delivery, then waits.
        if (opened === 1) return;
        yield create(messagingv1.StreamInboxResponseSchema, { deliveries: [delivery] });
        await new Promise((_resolve, reject) => options.signal.addEventListener('abort', () => reject(new Error('cancelled')), { once: true }));
      },
    };
    const methods = agentMethods(new Map([[messagingv1.MessagingService.typeName, messaging as never]]), { streamMaxMs: 5_000 });
    const controller = new AbortController();
    const events = await methods.get('x-hub/inbox.stream')!.stream!({}, { ...ctx, signal: controller.signal });
    const iterator = events[Symbol.asyncIterator]();
    const first = await iterator.next();
    controller.abort();
    expect(first.value).toEqual({ id: 'dlv_1', result: expect.objectContaining({ kind: 'delivery', delivery_id: 'dlv_1', task_id: 'task_1', attempt: 1 }) });
    expect(opened).toBe(2);
  });
});
