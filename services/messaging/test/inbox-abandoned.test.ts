import { create } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { backends, testLogger } from '@agenthub/testing';
import { pollInbox } from '../src/inbox.js';
import type { MessagingEnv } from '../src/index.js';
import { startStack, type Stack } from './harness.js';

/**
 * An inbox poll whose caller left while its claim ran hands back what it claimed at once, with the
 * attempt uncounted: the next poll gets it as attempt 1, not after the claim window as attempt 2.
 * The caller leaving exactly during the claim cannot be timed over the wire, so the store is
 * wrapped (the one stand-in here) to abort the caller's signal as its claim returns.
 */

const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });

describe.each(backends().map((b) => [b.name, b] as const))('an inbox poll abandoned during its claim (%s)', (_name, backend) => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(backend);
  });
  afterAll(() => stack?.stop());

  it('releases the claimed deliveries at once and uncounted', async () => {
    const sender = await stack.agent('acme', 'sender');
    const recipient = await stack.agent('acme', 'recipient');
    const [messaging] = stack.replicas;
    const { task } = await messaging!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('hello')] } }, sender.as);

    const caller = new AbortController();
    const env: MessagingEnv = stack.env;
    const deliveries = Object.create(env.deliveries) as MessagingEnv['deliveries'];
    let claimed = 0;
    deliveries.claimDeliveries = async (...args) => {
      const rows = await env.deliveries.claimDeliveries(...args);
      claimed += rows.length;
      caller.abort();
      return rows;
    };
    const abandoned = await pollInbox(
      { ...env, deliveries },
      { principal: undefined, deadline: undefined, signal: caller.signal, log: testLogger() },
      { agentId: recipient.id, tenantId: recipient.tenantId },
      create(messagingv1.PollInboxRequestSchema, { waitMs: 0, max: 10 }),
    );
    expect([claimed, abandoned.deliveries.length]).toEqual([1, 0]);

    const next = (await messaging!.pollInbox({ waitMs: 0 }, recipient.as)).deliveries;
    expect(next.map((d) => [d.taskId, d.attempt])).toEqual([[task!.id, 1]]);
  });

  it('claims nothing once its caller is gone', async () => {
    const sender = await stack.agent('acme', 'sender2');
    const recipient = await stack.agent('acme', 'recipient2');
    const [messaging] = stack.replicas;
    const { task } = await messaging!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('hello')] } }, sender.as);
    const gone = AbortSignal.abort();
    const abandoned = await pollInbox(
      stack.env,
      { principal: undefined, deadline: undefined, signal: gone, log: testLogger() },
      { agentId: recipient.id, tenantId: recipient.tenantId },
      create(messagingv1.PollInboxRequestSchema, { waitMs: 0, max: 10 }),
    );
    expect(abandoned.deliveries).toEqual([]);
    const next = (await messaging!.pollInbox({ waitMs: 0 }, recipient.as)).deliveries;
    expect(next.map((d) => [d.taskId, d.attempt])).toEqual([[task!.id, 1]]);
  });
});
