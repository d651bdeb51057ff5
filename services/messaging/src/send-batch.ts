import { OUTBOX_CHANNEL, OUTBOX_INSERT_COLUMNS, outboxValues, type Queryable } from '@agenthub/runtime';
import { GroupCommit } from './group-commit.js';
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
}

export const TASK_INSERT_COLUMNS =
  'id, context_id, sender_agent_id, sender_tenant_id, recipient_agent_id, state, message_count, artifact_count, bytes, created_at, updated_at, version';

/**
 * New tasks, written in groups (group-commit.ts). Each send's answer is whether its rows were
 * written (false: its sender was at its quota).
 */
export class TaskInsertBatcher extends GroupCommit<NewTaskRows, boolean> {
  constructor(db: Queryable, maxBatch?: number, maxInFlight?: number) {
    super(
      async (all) => {
        const accepted = await insertTasks(db, all);
        return all.map((rows) => accepted.has(rows.task.id));
      },
      maxBatch,
      maxInFlight,
    );
  }
}

/**
 * Writes the tasks, their items, their events and their deliveries in one statement (atomic as
 * one); returns the ids of the tasks written. A task whose sender has a quota is written only
 * while the sender has room: tasks_in_flight_room (migration 008) serialises the statements that
 * write one sender's tasks and counts after the previous one committed, so concurrent sends of a
 * sender never pass it together; the first ones of a batch take the room left. Tells the outbox
 * relays of the events written (OUTBOX_CHANNEL).
 */
export async function insertTasks(db: Queryable, all: NewTaskRows[]): Promise<Set<string>> {
  const params: unknown[] = [];
  const p = (value: unknown) => `$${params.push(value)}`;
  // Per table, each row's task id param and its values.
  const tasks: [string, string][] = [];
  const items: [string, string][] = [];
  const events: [string, string][] = [];
  const deliveries: [string, string][] = [];
  // Senders with a quota: their quota, and the batch's tasks of each, in order (id params).
  const quotas = new Map<string, { quota: number; ids: string[] }>();
  for (const { task, items: taskItems, event, delivery, traceparent = null, quota } of all) {
    const id = p(task.id);
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
    const [eventId, topic, key, type, payload, createdAt] = outboxValues(event, new Date(task.updatedAt), traceparent);
    events.push([id, `${p(eventId)}, ${p(topic)}, ${p(key)}, ${p(type)}, ${p(payload)}::jsonb, ${p(createdAt)}::bigint, ${p(traceparent)}`]);
    if (delivery) {
      deliveries.push([id, `${p(delivery.id)}, ${id}, ${recipient}, ${p(delivery.recipientTenantId)}, ${p(JSON.stringify(delivery.message))}::jsonb, ${updatedAt}::bigint, ${p(delivery.expiresAt)}::bigint, ${p(traceparent)}`]);
    }
  }
  const checked = quotas.size > 0;
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
    withs.push(`room AS (SELECT s.sender, tasks_in_flight_room(s.sender, s.quota) AS room
         FROM (SELECT v.sender, v.quota FROM (VALUES ${senders.map(([sender, { quota }]) => `(${p(sender)}, ${p(quota)}::integer)`).join(', ')}) AS v(sender, quota)
                ORDER BY v.sender) AS s)`);
    const ranked = senders.flatMap(([sender, { ids }]) => {
      const senderParam = p(sender);
      return ids.map((id, i) => `(${id}, ${senderParam}, ${p(i + 1)}::integer)`);
    });
    const limited = new Set(senders.flatMap(([, { ids }]) => ids));
    const unlimited = tasks.filter(([id]) => !limited.has(id)).map(([id]) => `(${id}, NULL, 0)`);
    withs.push(`accepted AS (SELECT v.id FROM (VALUES ${[...ranked, ...unlimited].join(', ')}) AS v(id, sender, nth)
         LEFT JOIN room r ON r.sender = v.sender
        WHERE v.nth = 0 OR v.nth <= r.room)`);
  }
  withs.push(`task AS (${insert('tasks', TASK_INSERT_COLUMNS, tasks)})`);
  if (items.length) withs.push(`item AS (${insert('task_items', 'task_id, kind, seq, item_id, body, bytes', items)})`);
  withs.push(`event AS (${insert('outbox', OUTBOX_INSERT_COLUMNS, events)})`);
  if (deliveries.length) withs.push(`delivery AS (${insert('deliveries', 'id, task_id, recipient_agent_id, recipient_tenant_id, message, created_at, expires_at, traceparent', deliveries)})`);
  // Checked, a row per accepted task (none: nothing was written); unchecked, one row.
  const { rows } = await db.query<{ id: string | null; schema: string }>(
    `WITH ${withs.join(',\n')}\n${checked ? 'SELECT id, current_schema() AS schema FROM accepted' : 'SELECT NULL AS id, current_schema() AS schema'}`,
    params,
  );
  if (rows[0]) db.notify(OUTBOX_CHANNEL, rows[0].schema);
  return checked ? new Set(rows.map((r) => r.id!)) : new Set(all.map((r) => r.task.id));
}
