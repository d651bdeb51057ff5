import { OUTBOX_CHANNEL, OUTBOX_INSERT_COLUMNS, outboxValues, type Queryable } from '@agenthub/runtime';
import type { TaskRecord } from './store.js';
import type { SerializedItem } from './task-items.js';

/**
 * What one new task writes: the task row (with its counts and bytes), its first messages and
 * artifacts as `task_items` rows, its created event and (unless it failed at once) its delivery.
 */
export interface NewTaskRows {
  task: TaskRecord;
  items: SerializedItem[];
  event: Parameters<typeof outboxValues>[0];
  delivery?: { id: string; message: unknown; expiresAt: number };
  /** The send's trace (W3C traceparent), taken when the send was made: rows are written later, in a batch. */
  traceparent?: string | null;
}

interface Pending {
  rows: NewTaskRows;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export const TASK_INSERT_COLUMNS =
  'id, context_id, sender_agent_id, sender_tenant_id, recipient_agent_id, state, message_count, artifact_count, bytes, created_at, updated_at, version';

/**
 * Group commit for new tasks: sends that arrive while `maxInFlight` statements are running wait
 * and are written together, up to `maxBatch` per statement, in one round trip and one commit
 * (what lets a durable queue keep up with in-memory servers). Alone, a send is written at once.
 * Each caller's promise settles after its own rows are committed; when a batch fails, its sends
 * are retried one by one, so one bad send does not fail the others.
 */
export class TaskInsertBatcher {
  private readonly queue: Pending[] = [];
  private inFlight = 0;

  constructor(
    private readonly db: Queryable,
    private readonly maxBatch = 64,
    private readonly maxInFlight = 2,
  ) {}

  insert(rows: NewTaskRows): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ rows, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight += 1;
      void this.write(batch).finally(() => {
        this.inFlight -= 1;
        this.pump();
      });
    }
  }

  private async write(batch: Pending[]): Promise<void> {
    try {
      await insertTasks(this.db, batch.map((p) => p.rows));
      for (const p of batch) p.resolve();
    } catch (err) {
      const [only] = batch;
      if (batch.length === 1 && only) {
        only.reject(err);
        return;
      }
      await Promise.all(batch.map((p) => insertTasks(this.db, [p.rows]).then(p.resolve, p.reject)));
    }
  }
}

/**
 * Writes the tasks, their items, their events and their deliveries in one statement (atomic as
 * one), and tells the outbox relays of the events (OUTBOX_CHANNEL).
 */
export async function insertTasks(db: Queryable, all: NewTaskRows[]): Promise<void> {
  const params: unknown[] = [];
  const p = (value: unknown) => `$${params.push(value)}`;
  const tasks: string[] = [];
  const items: string[] = [];
  const events: string[] = [];
  const deliveries: string[] = [];
  for (const { task, items: taskItems, event, delivery, traceparent = null } of all) {
    const id = p(task.id);
    const recipient = p(task.recipientAgentId);
    const updatedAt = p(task.updatedAt);
    tasks.push(
      `(${id}, ${p(task.contextId)}, ${p(task.senderAgentId)}, ${p(task.senderTenantId)}, ${recipient}, ${p(task.state)}, ` +
        `${p(task.messageCount)}::integer, ${p(task.artifactCount)}::integer, ${p(task.bytes)}::bigint, ${p(task.createdAt)}::bigint, ${updatedAt}::bigint, 1)`,
    );
    // A new task's items are its first of each kind: positions from 0, as task-items.ts appends them.
    const next = { message: 0, artifact: 0 };
    for (const item of taskItems) {
      items.push(`(${id}, ${p(item.kind)}, ${p(next[item.kind]++)}::integer, ${p(item.itemId)}, ${p(item.body)}::jsonb, ${p(item.bytes)}::integer)`);
    }
    const [eventId, topic, key, type, payload, createdAt] = outboxValues(event, new Date(task.updatedAt), traceparent);
    events.push(`(${p(eventId)}, ${p(topic)}, ${p(key)}, ${p(type)}, ${p(payload)}::jsonb, ${p(createdAt)}::bigint, ${p(traceparent)})`);
    if (delivery) {
      deliveries.push(`(${p(delivery.id)}, ${id}, ${recipient}, ${p(JSON.stringify(delivery.message))}::jsonb, ${updatedAt}::bigint, ${p(delivery.expiresAt)}::bigint, ${p(traceparent)})`);
    }
  }
  const { rows } = await db.query<{ schema: string }>(
    `WITH task AS (INSERT INTO tasks (${TASK_INSERT_COLUMNS}) VALUES ${tasks.join(', ')}),${items.length ? `
          item AS (INSERT INTO task_items (task_id, kind, seq, item_id, body, bytes) VALUES ${items.join(', ')}),` : ''}
          event AS (INSERT INTO outbox (${OUTBOX_INSERT_COLUMNS}) VALUES ${events.join(', ')})${deliveries.length ? `,
          delivery AS (INSERT INTO deliveries (id, task_id, recipient_agent_id, message, created_at, expires_at, traceparent) VALUES ${deliveries.join(', ')})` : ''}
     SELECT current_schema() AS schema`,
    params,
  );
  db.notify(OUTBOX_CHANNEL, rows[0]!.schema);
}
