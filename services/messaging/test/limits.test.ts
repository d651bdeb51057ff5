import { messagingv1 } from '@agenthub/proto';
import { Reason } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';
import { failure, startStack, type Stack } from './harness.js';

/** A task's history and artifacts are bounded (they live in its row); the refusal names the limit. */

const { TaskState } = messagingv1;
const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });

describe.each(backends().map((b) => [b.name, b] as const))('task size limits (%s)', (_name, backend) => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(backend, { limits: { maxTaskItems: 3, maxTasksInFlightPerSender: 2 } });
  });
  afterAll(() => stack?.stop());

  it('refuses a sender past its quota of tasks in flight, until one finishes', async () => {
    const sender = await stack.agent('acme', 'busy-sender');
    const other = await stack.agent('acme', 'other-sender');
    const recipient = await stack.agent('acme', 'busy-recipient');
    const [messaging] = stack.replicas;
    const send = (who: typeof sender) => messaging!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('q')] } }, who.as);
    const first = (await send(sender)).task!;
    await send(sender);
    const refused = await failure(send(sender));
    expect(refused).toMatchObject({ reason: Reason.QUOTA_EXCEEDED, field: 'tasks_in_flight_per_sender' });
    expect(refused.message).toContain('at most 2 tasks');
    // Another sender has its own quota.
    await send(other);
    await messaging!.updateTask({ taskId: first.id, state: TaskState.COMPLETED }, recipient.as);
    await send(sender);
  });

  it('refuses the message or artifacts that would pass maxTaskItems, leaving the task unchanged', async () => {
    const sender = await stack.agent('acme', 'sender');
    const recipient = await stack.agent('acme', 'recipient');
    const [messaging] = stack.replicas;
    const { task } = await messaging!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('q1')] } }, sender.as);
    await messaging!.updateTask({ taskId: task!.id, state: TaskState.INPUT_REQUIRED, message: { role: 'agent', parts: [text('which?')] } }, recipient.as);
    await messaging!.sendMessage({ taskId: task!.id, message: { role: 'user', parts: [text('that one')] } }, sender.as);

    const tooMany = await failure(
      messaging!.updateTask({ taskId: task!.id, state: TaskState.INPUT_REQUIRED, message: { role: 'agent', parts: [text('and?')] } }, recipient.as),
    );
    expect(tooMany.reason).toBe(Reason.LIMIT_EXCEEDED);
    expect(tooMany.message).toContain('maximum of 3 messages');

    const artifacts = Array.from({ length: 4 }, (_, i) => ({ name: `a${i}`, parts: [text(`${i}`)] }));
    const tooBig = await failure(messaging!.updateTask({ taskId: task!.id, state: TaskState.COMPLETED, artifacts }, recipient.as));
    expect(tooBig.reason).toBe(Reason.LIMIT_EXCEEDED);

    const unchanged = (await messaging!.getTask({ taskId: task!.id }, sender.as)).task!;
    expect([unchanged.state, unchanged.messages.length, unchanged.artifacts.length]).toEqual([TaskState.SUBMITTED, 3, 0]);
    const done = await messaging!.updateTask({ taskId: task!.id, state: TaskState.COMPLETED, artifacts: artifacts.slice(0, 3) }, recipient.as);
    expect(done.task!.artifacts).toHaveLength(3);
  });
});
