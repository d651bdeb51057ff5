import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { messagingv1 } from '@agenthub/proto';
import { migrate, type Db } from '@agenthub/runtime';
import { backends, testLogger } from '@agenthub/testing';
import { startStack, type Stack, type TestAgent } from './harness.js';

/**
 * Issue 12 item 6: messages and artifacts live in rows of their own (migration 004), so an
 * append inserts one row instead of rewriting the task. Histories stored before it (jsonb on the
 * task row) are moved over, in order, and read back unchanged.
 */

const { TaskState } = messagingv1;
const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });
const MIGRATIONS = new URL('../migrations/', import.meta.url);

/** The schema as it stood before migration 004, with one task holding a jsonb history. */
async function legacyTask(db: Db, ids: { task: string; sender: TestAgent; recipient: TestAgent }) {
  const dir = await mkdtemp(join(tmpdir(), 'messaging-migrations-'));
  try {
    for (const file of (await readdir(MIGRATIONS)).filter((f) => /^00[1-3]_/.test(f))) {
      await copyFile(new URL(file, MIGRATIONS), join(dir, file));
    }
    await migrate(db, { schema: 'messaging', dir: pathToFileURL(`${dir}/`), log: testLogger() });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const messages = [
    { role: 'user', messageId: 'msg_1', parts: [{ text: { text: 'Q1 numbers?' } }] },
    { role: 'agent', messageId: 'msg_2', parts: [{ text: { text: 'Which region?' } }] },
    { role: 'user', messageId: 'msg_3', parts: [{ text: { text: 'EMEA' } }] },
  ];
  const artifacts = [{ id: 'art_1', name: 'table', parts: [{ data: { mimeType: 'text/csv', data: 'a,b\n1,2' } }] }];
  await db.query(
    `INSERT INTO messaging.tasks (id, context_id, sender_agent_id, sender_tenant_id, recipient_agent_id, state, messages, artifacts, created_at, updated_at, version)
     VALUES ($1, 'ctx_legacy', $2, $3, $4, 'input-required', $5, $6, 1, 2, 3)`,
    [ids.task, ids.sender.id, ids.sender.tenantId, ids.recipient.id, JSON.stringify(messages), JSON.stringify(artifacts)],
  );
}

describe.each(backends().map((b) => [b.name, b] as const))('task items in rows (%s)', (_name, backend) => {
  let stack: Stack;
  const agents: { sender?: TestAgent; recipient?: TestAgent } = {};
  const taskId = 'task_legacy';

  beforeAll(async () => {
    stack = await startStack(backend, {
      before: async (db) => {
        // The agents are created once identity runs; their ids are fixed here for the legacy row.
        agents.sender = { id: 'agt_legacy_sender', tenantId: 'acme', as: { principal: { kind: 'agent', agentId: 'agt_legacy_sender', tenantId: 'acme' } } };
        agents.recipient = { id: 'agt_legacy_recipient', tenantId: 'acme', as: { principal: { kind: 'agent', agentId: 'agt_legacy_recipient', tenantId: 'acme' } } };
        await legacyTask(db, { task: taskId, sender: agents.sender, recipient: agents.recipient });
      },
    });
  });
  afterAll(() => stack?.stop());

  it('moves a jsonb history into rows, in order, and reads it back with historyLength', async () => {
    const [messaging] = stack.replicas;
    const { sender, recipient } = agents as Required<typeof agents>;
    const task = (await messaging!.getTask({ taskId }, sender.as)).task!;
    expect(task.state).toBe(TaskState.INPUT_REQUIRED);
    expect(task.messages.map((m) => [m.messageId, m.role])).toEqual([['msg_1', 'user'], ['msg_2', 'agent'], ['msg_3', 'user']]);
    expect(task.artifacts.map((a) => [a.id, a.parts[0]!.content.case])).toEqual([['art_1', 'data']]);
    const last = (await messaging!.getTask({ taskId, historyLength: 2 }, recipient.as)).task!;
    expect(last.messages.map((m) => m.messageId)).toEqual(['msg_2', 'msg_3']);
    expect((await messaging!.getTask({ taskId, historyLength: 0 }, recipient.as)).task!.messages).toEqual([]);
  });

  it('appends a message as one new row, leaving the rows before it untouched', async () => {
    const [messaging] = stack.replicas;
    const { recipient } = agents as Required<typeof agents>;
    const rows = async () =>
      (await stack.db.query<{ kind: string; seq: number; xmin: string }>('SELECT kind, seq, xmin::text AS xmin FROM task_items WHERE task_id = $1 ORDER BY kind, seq', [taskId])).rows;
    const before = await rows();
    await messaging!.updateTask({ taskId, state: TaskState.COMPLETED, message: { role: 'agent', parts: [text('EMEA Q1: 12')] } }, recipient.as);
    const after = await rows();
    expect(after).toHaveLength(before.length + 1);
    expect(after.filter((r) => before.some((b) => b.kind === r.kind && b.seq === r.seq))).toEqual(before);
    expect(after.find((r) => r.kind === 'message' && r.seq === 3)).toBeDefined();
    const { rows: counts } = await stack.db.query<{ message_count: number; artifact_count: number; bytes: string | number }>(
      'SELECT message_count, artifact_count, bytes FROM tasks WHERE id = $1',
      [taskId],
    );
    expect([counts[0]!.message_count, counts[0]!.artifact_count]).toEqual([4, 1]);
    expect(Number(counts[0]!.bytes)).toBeGreaterThan(0);
  });
});
