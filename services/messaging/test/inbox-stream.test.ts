import { create } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { Reason } from '@agenthub/runtime';
import { backends, testLogger } from '@agenthub/testing';
import { onlineKey } from '../src/env.js';
import { streamInbox } from '../src/inbox.js';
import { failure, startStack, type Stack, type TestAgent } from './harness.js';

/**
 * StreamInbox (the stream behind `x-hub/inbox.stream`) over gRPC with two replicas: the recipient
 * streams from one, senders send through the other.
 */

const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });
const textOf = (d: messagingv1.Delivery) => {
  const part = d.message?.parts[0];
  return part?.content.case === 'text' ? part.content.value.text : undefined;
};

/** Opens the stream (a client stream starts on its first read) and reads it a batch at a time. */
function reader(stream: AsyncIterable<messagingv1.StreamInboxResponse>) {
  const iterator = stream[Symbol.asyncIterator]();
  let first: Promise<IteratorResult<messagingv1.StreamInboxResponse>> | undefined = iterator.next();
  first.catch(() => undefined);
  return async (): Promise<string[]> => {
    const next = await (first ?? iterator.next());
    first = undefined;
    if (next.done) throw new Error('the inbox stream ended');
    return next.value.deliveries.map((d) => `${textOf(d)}#${d.attempt}`);
  };
}

describe.each(backends().map((b) => [b.name, b] as const))('the inbox stream (%s)', (_name, backend) => {
  let stack: Stack;
  let sender: TestAgent;
  beforeAll(async () => {
    stack = await startStack(backend, { replicas: 2 });
    sender = await stack.agent('acme', 'sender');
  });
  afterAll(() => stack?.stop());

  const [a, b] = [() => stack.replicas[0]!, () => stack.replicas[1]!];
  const send = (to: TestAgent, t: string) => b().sendMessage({ recipientAgentId: to.id, message: { role: 'user', parts: [text(t)] } }, sender.as);

  /** Opens the recipient's stream on replica a, and resolves once it listens for wake-ups. */
  async function open(recipient: TestAgent, max = 10) {
    const controller = new AbortController();
    const listening = stack.listening(recipient.id);
    const stream = a().streamInbox({ max }, { ...recipient.as, signal: controller.signal, timeoutMs: 30_000 });
    const next = reader(stream);
    await listening;
    return { next, close: () => controller.abort() };
  }

  it('sends what was queued before it opened, then each delivery queued on another replica as it comes, once each', async () => {
    const recipient = await stack.agent('acme', 'streamer');
    await send(recipient, 'before');
    const inbox = await open(recipient);
    try {
      expect(await inbox.next()).toEqual(['before#1']);
      await send(recipient, 'after 1');
      expect(await inbox.next()).toEqual(['after 1#1']);
      await send(recipient, 'after 2');
      expect(await inbox.next()).toEqual(['after 2#1']);
    } finally {
      inbox.close();
    }
    expect((await b().pollInbox({ waitMs: 0 }, recipient.as)).deliveries).toEqual([]);
  });

  it('holds one Kv subscription for its whole life, however many deliveries it carries', async () => {
    const recipient = await stack.agent('acme', 'subscriber');
    const inbox = await open(recipient);
    const held = stack.subscriptions();
    try {
      for (const t of ['one', 'two', 'three']) {
        await send(recipient, t);
        expect(await inbox.next()).toEqual([`${t}#1`]);
        // A back-to-back long-poll unsubscribes and subscribes again for each delivery it answers.
        expect(stack.subscriptions()).toBe(held);
      }
    } finally {
      inbox.close();
    }
  });

  it('sends a backlog larger than one batch in full batches without waiting for a wake-up', async () => {
    const recipient = await stack.agent('acme', 'backlogged');
    for (const t of ['1', '2', '3', '4', '5']) await send(recipient, t);
    const inbox = await open(recipient, 2);
    try {
      expect([await inbox.next(), await inbox.next(), await inbox.next()]).toEqual([['1#1', '2#1'], ['3#1', '4#1'], ['5#1']]);
    } finally {
      inbox.close();
    }
  });

  it('marks the agent online while it is open', async () => {
    const recipient = await stack.agent('acme', 'present');
    await stack.env.kv.del(onlineKey(recipient.id));
    const inbox = await open(recipient);
    try {
      expect(await stack.env.kv.get(onlineKey(recipient.id))).toBe('1');
    } finally {
      inbox.close();
    }
  });

  it('refuses a batch size over 100, naming it', async () => {
    const recipient = await stack.agent('acme', 'greedy');
    const err = await failure(reader(a().streamInbox({ max: 101 }, recipient.as))());
    expect([Reason[err.reason], err.message]).toEqual(['INVALID_PARAMS', expect.stringContaining('max')]);
  });

  it('hands back at once, uncounted, a batch it claimed but the stream never took', async () => {
    const recipient = await stack.agent('acme', 'left');
    await send(recipient, 'unsent');
    const caller = new AbortController();
    const stream = streamInbox(
      stack.env,
      { principal: recipient.as.principal, deadline: undefined, signal: caller.signal, log: testLogger() },
      { agentId: recipient.id, tenantId: recipient.tenantId },
      create(messagingv1.StreamInboxRequestSchema, { max: 10 }),
    );
    expect((await stream.next()).value?.deliveries.map(textOf)).toEqual(['unsent']);
    // The stream ends before taking the next batch: what it was handed goes back to the queue.
    caller.abort();
    await stream.return(undefined);
    const deliveries = await waitFor(async () => (await b().pollInbox({ waitMs: 0 }, recipient.as)).deliveries);
    expect(deliveries.map((d) => `${textOf(d)}#${d.attempt}`)).toEqual(['unsent#1']);
  });
});

/** Retries `read` until it gives a non-empty list (a release that is not awaited lands soon after). */
async function waitFor<T>(read: () => Promise<T[]>): Promise<T[]> {
  for (let i = 0; i < 50; i += 1) {
    const items = await read();
    if (items.length) return items;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return [];
}
