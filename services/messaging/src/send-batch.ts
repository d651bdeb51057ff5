import { OUTBOX_CHANNEL, OUTBOX_INSERT_COLUMNS, outboxValues, type Queryable } from '@agenthub/runtime';
import { GroupCommit } from './group-commit.js';
import { claimKeys } from './send-key-store.js';
import type { NewDelivery, TaskRecord } from './task-store.js';
import type { SerializedItem } from './task-items.js';

/**
 * What one new task writes: the task row (with its counts and bytes), its first messages and
 * artifacts as `task_items` rows, its created event and (unless it failed at once) its delivery.
 */
export interface NewTaskRows {
  task: TaskRecord;
  items: SerializedItem[];
  event: Parameters<typeof outboxValues>[0];
  delivery?: NewDelivery;
  /** The send's trace (W3C traceparent), taken when the send was made: rows are written later, in a batch. */
  traceparent?: string | null;
  /**
   * Tasks its sender may have submitted or working, this one included (the tasks-in-flight quota);
   * absent or Infinity: none. Checked in the statement that writes the rows.
   */
  quota?: number;
  /**
   * The send's idempotency key (its sender's messageId), claimed in the statement that writes the
   * task: the task is written only if the key became its own, and the key only with the task.
   */
  key?: { messageId: string; bodyHash: string };
}

/** What became of a new task: written; refused by its sender's quota; or not written because an earlier send holds its key. */
export type InsertOutcome = 'written' | 'over-quota' | 'key-taken';

export const TASK_INSERT_COLUMNS =
  'id, context_id, sender_agent_id, sender_tenant_id, recipient_agent_id, state, message_count, artifact_count, bytes, created_at, updated_at, version';

/**
 * New tasks, written in groups (group-commit.ts). Each send's answer is its InsertOutcome.
 * `keyWindowMs`: how long a key stays the first send's (MESSAGING_IDEMPOTENCY_WINDOW_MS).
 */
export class TaskInsertBatcher extends GroupCommit<NewTaskRows, InsertOutcome> {
  constructor(db: Queryable, keyWindowMs: number, maxBatch?: number, maxInFlight?: number) {
    super((all) => insertTasks(db, all, keyWindowMs), maxBatch, maxInFlight);
  }
}

/**
 * Writes the tasks, their items, their events and their deliveries in one statement (atomic as
 * one); answers for each task in order. A task whose sender has a quota is written only
 * while the sender has room: tasks_in_flight_room (migration 008) serialises the statements that
 * write one sender's tasks and counts after the previous one committed, so concurrent sends of a
 * sender never pass it together; the first ones of a batch take the room left. A task with a key
 * is written only if it claims the key (claimKeys), and within the room, which it takes even when
 * its key turns out to be held. Tells the outbox relays of the events written (OUTBOX_CHANNEL).
 */
export async function insertTasks(db: Queryable, all: NewTaskRows[], keyWindowMs: number): Promise<InsertOutcome[]> {
  const params: unknown[] = [];
  const p = (value: unknown) => `$${params.push(value)}`;
  // Per table, each row's task id param and its values.
  const tasks: [string, string][] = [];
  const items: [string, string][] = [];
  const events: [string, string][] = [];
  const deliveries: [string, string][] = [];
  // Senders with a quota: their quota, and the batch's tasks of each, in order (id params).
  const quotas = new Map<string, { quota: number; ids: string[] }>();
  // Each key's claim (sender, messageId, task id, body hash, created at), and the id params of the keyed tasks.
  const keys: string[] = [];
  const keyedIds: string[] = [];
  for (const { task, items: taskItems, event, delivery, traceparent = null, quota, key } of all) {
    const id = p(task.id);
    if (key) {
      keyedIds.push(id);
      keys.push(`(${p(task.senderAgentId)}, ${p(key.messageId)}, ${id}, ${p(key.bodyHash)}, ${p(task.createdAt)}::bigint)`);
    }
    const recipient = p(task.recipientAgentId);
    const updatedAt = p(task.updatedAt);
    if (quota !== undefined && Number.isFinite(quota)) {
      const sender = quotas.get(task.senderAgentId) ?? { quota, ids: [] };
      sender.quota = Math.min(sender.quota, quota);
      sender.ids.push(id);
      quotas.set(task.senderAgentId, sender);
    }
    tasks.push([
      id,
      `${id}, ${p(task.contextId)}, ${p(task.senderAgentId)}, ${p(task.senderTenantId)}, ${recipient}, ${p(task.state)}, ` +
        `${p(task.messageCount)}::integer, ${p(task.artifactCount)}::integer, ${p(task.bytes)}::bigint, ${p(task.createdAt)}::bigint, ${updatedAt}::bigint, 1`,
    ]);
    // A new task's items are its first of each kind: positions from 0, as task-items.ts appends them.
    const next = { message: 0, artifact: 0 };
    for (const item of taskItems) {
      items.push([id, `${id}, ${p(item.kind)}, ${p(next[item.kind]++)}::integer, ${p(item.itemId)}, ${p(item.body)}::jsonb, ${p(item.bytes)}::integer`]);
    }
    const [eventId, topic, partitionKey, type, payload, createdAt] = outboxValues(event, new Date(task.updatedAt), traceparent);
    events.push([id, `${p(eventId)}, ${p(topic)}, ${p(partitionKey)}, ${p(type)}, ${p(payload)}::jsonb, ${p(createdAt)}::bigint, ${p(traceparent)}`]);
    if (delivery) {
      deliveries.push([id, `${p(delivery.id)}, ${id}, ${recipient}, ${p(delivery.recipientTenantId)}, ${p(JSON.stringify(delivery.message))}::jsonb, ${updatedAt}::bigint, ${p(delivery.expiresAt)}::bigint, ${p(traceparent)}`]);
    }
  }
  const checked = quotas.size > 0 || keys.length > 0;
  // Unchecked, the rows go in as they are; checked, only those of accepted tasks.
  const insert = (table: string, columns: string, rows: [string, string][]) => {
    if (!checked) return `INSERT INTO ${table} (${columns}) VALUES ${rows.map(([, values]) => `(${values})`).join(', ')}`;
    const names = columns.split(', ');
    return `INSERT INTO ${table} (${columns}) SELECT ${names.map((n) => `v.${n}`).join(', ')}
              FROM (VALUES ${rows.map(([id, values]) => `(${id}, ${values})`).join(', ')}) AS v(task_key, ${columns})
             WHERE v.task_key IN (SELECT id FROM accepted)`;
  };
  const withs: string[] = [];
  if (checked) {
    // Senders in a fixed order, so that two statements lock the senders they share in the same order.
    const senders = [...quotas.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    if (senders.length) {
      withs.push(`room AS (SELECT s.sender, tasks_in_flight_room(s.sender, s.quota) AS room
         FROM (SELECT v.sender, v.quota FROM (VALUES ${senders.map(([sender, { quota }]) => `(${p(sender)}, ${p(quota)}::integer)`).join(', ')}) AS v(sender, quota)
                ORDER BY v.sender) AS s)`);
    }
    const ranked = senders.flatMap(([sender, { ids }]) => {
      const senderParam = p(sender);
      return ids.map((id, i) => `(${id}, ${senderParam}, ${p(i + 1)}::integer)`);
    });
    const limited = new Set(senders.flatMap(([, { ids }]) => ids));
    const unlimited = tasks.filter(([id]) => !limited.has(id)).map(([id]) => `(${id}, NULL::text, 0)`);
    // The tasks within their senders' room: written, unless a key of theirs is held.
    withs.push(`within AS (SELECT v.id FROM (VALUES ${[...ranked, ...unlimited].join(', ')}) AS v(id, sender, nth)
         ${senders.length ? 'LEFT JOIN room r ON r.sender = v.sender WHERE v.nth = 0 OR v.nth <= r.room' : ''})`);
    if (keys.length) {
      const claims = `SELECT k.sender_agent_id, k.message_id, k.task_id, k.body_hash, k.created_at
           FROM (VALUES ${keys.join(', ')}) AS k(sender_agent_id, message_id, task_id, body_hash, created_at) WHERE k.task_id IN (SELECT id FROM within)`;
      withs.push(`claimed AS (${claimKeys(claims, p(keyWindowMs))})`);
      withs.push(`accepted AS (SELECT id FROM within WHERE id NOT IN (${keyedIds.join(', ')}) OR id IN (SELECT task_id FROM claimed))`);
    } else {
      withs.push('accepted AS (SELECT id FROM within)');
    }
  }
  withs.push(`task AS (${insert('tasks', TASK_INSERT_COLUMNS, tasks)})`);
  if (items.length) withs.push(`item AS (${insert('task_items', 'task_id, kind, seq, item_id, body, bytes', items)})`);
  withs.push(`event AS (${insert('outbox', OUTBOX_INSERT_COLUMNS, events)})`);
  if (deliveries.length) withs.push(`delivery AS (${insert('deliveries', 'id, task_id, recipient_agent_id, recipient_tenant_id, message, created_at, expires_at, traceparent', deliveries)})`);
  // Checked, a row per task within the room, saying whether it was written; unchecked, one row.
  const answer = checked
    ? 'SELECT id, id IN (SELECT id FROM accepted) AS written, current_schema() AS schema FROM within'
    : 'SELECT NULL AS id, true AS written, current_schema() AS schema';
  const { rows } = await db.query<{ id: string | null; written: boolean; schema: string }>(`WITH ${withs.join(',\n')}\n${answer}`, params);
  const written = rows.find((r) => r.written);
  if (written) db.notify(OUTBOX_CHANNEL, written.schema);
  if (!checked) return all.map(() => 'written');
  const within = new Map(rows.map((r) => [r.id!, r.written]));
  return all.map(({ task }) => {
    const outcome = within.get(task.id);
    return outcome === undefined ? 'over-quota' : outcome ? 'written' : 'key-taken';
  });
}
