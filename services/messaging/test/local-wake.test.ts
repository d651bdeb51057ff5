import { jest } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { MemoryKv, type CallContext } from '@agenthub/runtime';
import { backends, testLogger } from '@agenthub/testing';
import { pollInbox } from '../src/inbox.js';
import { messagingEnv } from '../src/env.js';
import { sendMessage, updateTask } from '../src/tasks.js';
import { startStack, type Stack, type TestAgent } from './harness.js';

const { TaskState } = messagingv1;
const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });
const textOf = (part: messagingv1.Part | undefined) => (part?.content.case === 'text' ? part.content.value.text : undefined);

/** A Kv whose pub/sub carries nothing between processes (a Redis that drops every publish). */
class DeafKv extends MemoryKv {
  override async publish(): Promise<void> {}
}

describe.each(backends().map((b) => [b.name, b] as const))('blocking send within one process (%s)', (_name, backend) => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(backend);
  });
  afterAll(() => stack?.stop());

  const ctx = (agent: TestAgent): CallContext => ({
    principal: agent.as.principal,
    deadline: undefined,
    signal: new AbortController().signal,
    log: testLogger(),
  });

  it('wakes the inbox and the waiting sender in-process, and answers with the task the update committed without reading it back', async () => {
    // Nothing crosses the Kv: the wake-ups can only come in-process. Short waits, so that a missed
    // wake-up fails an assertion rather than the test's timeout.
    const env = messagingEnv({ db: stack.db, kv: new DeafKv(), identity: stack.identity, limits: { blockingMs: 5_000, maxPollWaitMs: 5_000 } });
    const sender = await stack.agent('acme', 'local-sender');
    const recipient = await stack.agent('acme', 'local-recipient');
    const caller = (a: TestAgent) => ({ agentId: a.id, tenantId: a.tenantId });
    // The inbox is waiting before the send, as a connected agent's stream is.
    const polled = pollInbox(env, ctx(recipient), caller(recipient), create(messagingv1.PollInboxRequestSchema, { waitMs: 5_000, max: 1 }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = Date.now();
    const sent = sendMessage(
      env,
      ctx(sender),
      caller(sender),
      create(messagingv1.SendMessageRequestSchema, { recipientAgentId: recipient.id, message: { role: 'user', parts: [text('ping')] }, blocking: true }),
    );
    const { deliveries } = await polled;
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(deliveries).toHaveLength(1);
    const reads = jest.spyOn(env.tasks, 'getTask');
    await updateTask(
      env,
      ctx(recipient),
      caller(recipient),
      create(messagingv1.UpdateTaskRequestSchema, { taskId: deliveries[0]!.taskId, state: TaskState.COMPLETED, artifacts: [{ name: 'echo', parts: deliveries[0]!.message!.parts }] }),
    );
    const readsByUpdate = reads.mock.calls.length;
    const { task } = await sent;
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(task.state).toBe(TaskState.COMPLETED);
    expect(task.artifacts.map((a) => textOf(a.parts[0]))).toEqual(['ping']);
    expect(task.messages.map((m) => textOf(m.parts[0]))).toEqual(['ping']);
    // The answer came from the update, not from reading the task (with its items) back.
    expect(reads.mock.calls.slice(readsByUpdate).filter(([, , load]) => load !== false)).toEqual([]);
  });
});
