import { messagingv1 } from '@agenthub/proto';
import { isUniqueViolation } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';
import { TaskInsertBatcher, type NewTaskRows } from '../src/send-batch.js';
import { startStack, type Stack } from './harness.js';

/** Sends are written in groups (group commit); each must still be its own durable, isolated send. */

const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });

describe.each(backends().map((b) => [b.name, b] as const))('grouped task inserts (%s)', (_name, backend) => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(backend);
  });
  afterAll(() => stack?.stop());

  it('commits every one of many concurrent sends with its delivery, each readable at once', async () => {
    const sender = await stack.agent('acme', 'sender');
    const recipient = await stack.agent('acme', 'recipient');
    const [messaging] = stack.replicas;
    const sent = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        messaging!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text(`m${i}`)] } }, sender.as),
      ),
    );
    const ids = sent.map((r) => r.task!.id);
    expect(new Set(ids).size).toBe(40);
    for (const id of ids) expect((await messaging!.getTask({ taskId: id }, sender.as)).task!.state).toBe(messagingv1.TaskState.SUBMITTED);
    const delivered: string[] = [];
    while (delivered.length < 40) {
      const { deliveries } = await messaging!.pollInbox({ max: 100, waitMs: 0 }, recipient.as);
      if (!deliveries.length) break;
      for (const d of deliveries) delivered.push(d.taskId);
    }
    expect(delivered.sort()).toEqual([...ids].sort());
  });

  it('fails only the send whose rows cannot be written when it shares a statement with others', async () => {
    const base = { contextId: 'ctx_batch', senderAgentId: 'agt_s', senderTenantId: 'acme', recipientAgentId: 'agt_r', state: 'submitted' as const, messages: [], artifacts: [], createdAt: 1, updatedAt: 1, version: 1 };
    const rows = (id: string): NewTaskRows => ({
      task: { ...base, id },
      event: { topic: 'test', partitionKey: id, type: 'messaging.task.created', data: {} },
      delivery: { id: `dlv_${id}`, message: {}, expiresAt: 2 },
    });
    const batcher = new TaskInsertBatcher(stack.db, 64, 1);
    await batcher.insert(rows('task_batch_dup'));
    // One statement in flight at a time: the three below queue behind the first and go together.
    const results = await Promise.allSettled([
      batcher.insert(rows('task_batch_a')),
      batcher.insert(rows('task_batch_b')),
      batcher.insert(rows('task_batch_dup')),
      batcher.insert(rows('task_batch_c')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect(isUniqueViolation((results[2] as PromiseRejectedResult).reason)).toBe(true);
    const { rows: found } = await stack.db.query<{ id: string }>("SELECT id FROM tasks WHERE context_id = 'ctx_batch' ORDER BY id");
    expect(found.map((r) => r.id)).toEqual(['task_batch_a', 'task_batch_b', 'task_batch_c', 'task_batch_dup']);
  });
});
