import { messagingv1 } from '@agenthub/proto';
import { isUniqueViolation, OUTBOX_CHANNEL } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';
import { TaskInsertBatcher, type NewTaskRows } from '../src/send-batch.js';
import { serializeItems } from '../src/task-items.js';
import { counting, startStack, type Stack } from './harness.js';

/** Sends are written in groups (group commit); each must still be its own durable, isolated send. */

/** The rows of a new task `id` in context `contextId`, as the task store hands them to the batcher. */
function taskRows(id: string, contextId: string): NewTaskRows {
  const first = { role: 'ROLE_USER', messageId: `msg_${id}`, parts: [{ text: 'hello' }] };
  const items = serializeItems('message', [first]);
  return {
    task: {
      id, contextId, senderAgentId: 'agt_s', senderTenantId: 'acme', recipientAgentId: 'agt_r', state: 'submitted',
      messages: [first], artifacts: [], messageCount: 1, artifactCount: 0, bytes: items[0]!.bytes, createdAt: 1, updatedAt: 1, version: 1,
    },
    items,
    event: { topic: 'test', partitionKey: id, type: 'messaging.task.created', data: {} },
    delivery: { id: `dlv_${id}`, message: {}, expiresAt: 2, recipientTenantId: 'acme' },
  };
}

/** How long a send's key stays its own. */
const WINDOW_MS = 60_000;

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
    // Each task's first message went into task_items in its group's statement, with the task's counts.
    for (const [i, id] of ids.entries()) {
      const { task } = await messaging!.getTask({ taskId: id }, sender.as);
      expect([task!.state, task!.messages.map((m) => m.parts.map((p) => (p.content.case === 'text' ? p.content.value.text : '')))]).toEqual([
        messagingv1.TaskState.SUBMITTED,
        [[`m${i}`]],
      ]);
    }
    const { rows: counted } = await stack.db.query<{ n: string | number }>(
      'SELECT count(*) AS n FROM tasks t WHERE t.id = ANY($1::text[]) AND t.message_count = 1 AND t.bytes = (SELECT sum(i.bytes) FROM task_items i WHERE i.task_id = t.id)',
      [ids],
    );
    expect(Number(counted[0]!.n)).toBe(40);
    const delivered: string[] = [];
    while (delivered.length < 40) {
      const { deliveries } = await messaging!.pollInbox({ max: 100, waitMs: 0 }, recipient.as);
      if (!deliveries.length) break;
      for (const d of deliveries) delivered.push(d.taskId);
    }
    expect(delivered.sort()).toEqual([...ids].sort());
  });

  it('tells the outbox relays of the events it writes, once committed, so they publish without waiting for a poll', async () => {
    const sender = await stack.agent('acme', 'notify-sender');
    const recipient = await stack.agent('acme', 'notify-recipient');
    const notified: string[] = [];
    const unlisten = await stack.db.listen(OUTBOX_CHANNEL, (schema) => notified.push(schema));
    try {
      await stack.replicas[0]!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('hello')] } }, sender.as);
      const deadline = Date.now() + 10_000;
      while (!notified.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(notified[0]).toBe('messaging');
    } finally {
      await unlisten();
    }
  });

  it('tells the outbox relays of a transition written in one statement (an update), so it too is published without waiting for a poll', async () => {
    const sender = await stack.agent('acme', 'notify-update-sender');
    const recipient = await stack.agent('acme', 'notify-update-recipient');
    const [messaging] = stack.replicas;
    const notified: string[] = [];
    const unlisten = await stack.db.listen(OUTBOX_CHANNEL, (schema) => notified.push(schema));
    const heard = async () => {
      const deadline = Date.now() + 10_000;
      while (!notified.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      return notified.splice(0);
    };
    try {
      const { task } = await messaging!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('work on it')] } }, sender.as);
      // The send's own notification, heard before the update so that it cannot stand for the update's.
      expect(await heard()).toContain('messaging');
      await messaging!.updateTask({ taskId: task!.id, state: messagingv1.TaskState.WORKING }, recipient.as);
      expect(await heard()).toContain('messaging');
    } finally {
      await unlisten();
    }
  });

  it('writes the sends that reach it in one turn in one statement, though no statement is running', async () => {
    const statements: string[] = [];
    // As a group from the gateway arrives: its sends one after another, with nothing running.
    const batcher = new TaskInsertBatcher(counting(stack.db, statements), WINDOW_MS, 64, 2);
    const ids = Array.from({ length: 5 }, (_, i) => `task_turn_${i}`);
    const accepted = await Promise.all(ids.map((id) => batcher.write(taskRows(id, 'ctx_turn'))));
    expect(accepted).toEqual(['written', 'written', 'written', 'written', 'written']);
    expect(statements).toHaveLength(1);
    const { rows: found } = await stack.db.query<{ id: string }>("SELECT id FROM tasks WHERE context_id = 'ctx_turn' ORDER BY id");
    expect(found.map((r) => r.id)).toEqual(ids);
  });

  it('fails only the send whose rows cannot be written when it shares a statement with others', async () => {
    const rows = (id: string) => taskRows(id, 'ctx_batch');
    const batcher = new TaskInsertBatcher(stack.db, WINDOW_MS, 64, 1);
    await batcher.write(rows('task_batch_dup'));
    // The four below reach the batcher in one turn and share one statement, which the duplicate fails.
    const results = await Promise.allSettled([
      batcher.write(rows('task_batch_a')),
      batcher.write(rows('task_batch_b')),
      batcher.write(rows('task_batch_dup')),
      batcher.write(rows('task_batch_c')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect(isUniqueViolation((results[2] as PromiseRejectedResult).reason)).toBe(true);
    const { rows: found } = await stack.db.query<{ id: string }>("SELECT id FROM tasks WHERE context_id = 'ctx_batch' ORDER BY id");
    expect(found.map((r) => r.id)).toEqual(['task_batch_a', 'task_batch_b', 'task_batch_c', 'task_batch_dup']);
    // The failed send wrote no item of its own: the one kept is from its first, committed insert.
    const { rows: kept } = await stack.db.query<{ task_id: string }>(
      "SELECT i.task_id FROM task_items i JOIN tasks t ON t.id = i.task_id WHERE t.context_id = 'ctx_batch' ORDER BY i.task_id",
    );
    expect(kept.map((r) => r.task_id)).toEqual(['task_batch_a', 'task_batch_b', 'task_batch_c', 'task_batch_dup']);
  });

  it('writes a keyed task only with its key, in its statement: a key an earlier send holds writes nothing, and a refused task keeps no key', async () => {
    const statements: string[] = [];
    const batcher = new TaskInsertBatcher(counting(stack.db, statements), WINDOW_MS, 64, 1);
    const keyed = (id: string, messageId: string, quota?: number): NewTaskRows => ({ ...taskRows(id, 'ctx_keys'), key: { messageId, bodyHash: `hash_${id}` }, quota });
    expect(await batcher.write(keyed('task_key_first', 'msg_held'))).toBe('written');
    statements.length = 0;
    const outcomes = await Promise.all([
      batcher.write(keyed('task_key_a', 'msg_a')),
      batcher.write(keyed('task_key_again', 'msg_held')),
      batcher.write(taskRows('task_key_unkeyed', 'ctx_keys')),
    ]);
    expect(outcomes).toEqual(['written', 'key-taken', 'written']);
    expect(statements).toHaveLength(1);
    // The first task's own sender is agt_s with the tasks above in flight: a quota of 1 refuses it.
    expect(await batcher.write(keyed('task_key_refused', 'msg_refused', 1))).toBe('over-quota');
    const { rows: found } = await stack.db.query<{ id: string }>("SELECT id FROM tasks WHERE context_id = 'ctx_keys' ORDER BY id");
    expect(found.map((r) => r.id)).toEqual(['task_key_a', 'task_key_first', 'task_key_unkeyed']);
    const { rows: held } = await stack.db.query<{ message_id: string; task_id: string }>(
      "SELECT message_id, task_id FROM send_keys WHERE sender_agent_id = 'agt_s' AND message_id IN ('msg_held', 'msg_a', 'msg_refused') ORDER BY message_id",
    );
    expect(held.map((r) => [r.message_id, r.task_id])).toEqual([
      ['msg_a', 'task_key_a'],
      ['msg_held', 'task_key_first'],
    ]);
  });
});
