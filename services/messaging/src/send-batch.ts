import { OUTBOX_INSERT_COLUMNS, outboxValues, type Queryable } from '@agenthub/runtime';
import type { TaskRecord } from './store.js';

/** What one new task writes: the task row, its created event and (unless it failed at once) its delivery. */
export interface NewTaskRows {
  task: TaskRecord;
  event: Parameters<typeof outboxValues>[0];
  delivery?: { id: string; message: unknown; expiresAt: number };
}

interface Pending {
  rows: NewTaskRows;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export const TASK_INSERT_COLUMNS =
  'id, context_id, sender_agent_id, sender_tenant_id, recipient_agent_id, state, messages, artifacts, created_at, updated_at, version';

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

/** Writes the tasks, their events and their deliveries in one statement (atomic as one). */
export async function insertTasks(db: Queryable, all: NewTaskRows[]): Promise<void> {
  const params: unknown[] = [];
  const p = (value: unknown) => `$${params.push(value)}`;
  const tasks: string[] = [];
  const events: string[] = [];
  const deliveries: string[] = [];
  for (const { task, event, delivery } of all) {
    const id = p(task.id);
    const recipient = p(task.recipientAgentId);
    const updatedAt = p(task.updatedAt);
    tasks.push(
      `(${id}, ${p(task.contextId)}, ${p(task.senderAgentId)}, ${p(task.senderTenantId)}, ${recipient}, ${p(task.state)}, ` +
        `${p(JSON.stringify(task.messages))}::jsonb, ${p(JSON.stringify(task.artifacts))}::jsonb, ${p(task.createdAt)}::bigint, ${updatedAt}::bigint, 1)`,
    );
    const [eventId, topic, key, type, payload, createdAt] = outboxValues(event, new Date(task.updatedAt));
    events.push(`(${p(eventId)}, ${p(topic)}, ${p(key)}, ${p(type)}, ${p(payload)}::jsonb, ${p(createdAt)}::bigint)`);
    if (delivery) {
      deliveries.push(`(${p(delivery.id)}, ${id}, ${recipient}, ${p(JSON.stringify(delivery.message))}::jsonb, ${updatedAt}::bigint, ${p(delivery.expiresAt)}::bigint)`);
    }
  }
  await db.query(
    `WITH task AS (INSERT INTO tasks (${TASK_INSERT_COLUMNS}) VALUES ${tasks.join(', ')}),
          event AS (INSERT INTO outbox (${OUTBOX_INSERT_COLUMNS}) VALUES ${events.join(', ')})${deliveries.length ? `,
          delivery AS (INSERT INTO deliveries (id, task_id, recipient_agent_id, message, created_at, expires_at) VALUES ${deliveries.join(', ')})` : ''}
     SELECT 1`,
    params,
  );
}
