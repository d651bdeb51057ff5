import { appendEvent, currentTraceparent, OUTBOX_CHANNEL, OUTBOX_INSERT_COLUMNS, outboxValues, throwIfAborted, type Db, type Queryable } from '@agenthub/runtime';
import type { StateWord } from '@agenthub/tasks';
import { TaskInsertBatcher, type InsertOutcome, type NewTaskRows } from './send-batch.js';
import { appendItems, growthOf, heldIds, heldIdsOf, loadItems, serializeItems, type HeldIds, type ItemKind, type ItemSelection, type SerializedItem, type TaskGrowth } from './task-items.js';

/** Topic of task events, keyed by task id so each task's transitions stay in order. */
export const MESSAGING_EVENTS_TOPIC = 'agenthub.messaging.events';

/** A task's state as stored: the interface's word (`@agenthub/tasks` holds the table). */
export type StateName = StateWord;

/**
 * A task as stored. `messages` and `artifacts` (proto JSON) hold what the read loaded: every
 * item, the last `historyLength` messages, or none; the counts and bytes are the task's own.
 */
export interface TaskRecord {
  id: string;
  contextId: string;
  senderAgentId: string;
  senderTenantId: string;
  recipientAgentId: string;
  state: StateName;
  messages: unknown[];
  artifacts: unknown[];
  messageCount: number;
  artifactCount: number;
  /** Serialized size of every message and artifact the task holds. */
  bytes: number;
  createdAt: number;
  updatedAt: number;
  /** Grows by one with every change; 1 at creation. */
  version: number;
}

/** What one version of a task added (the rows task streams replay). */
export interface TransitionRecord {
  taskId: string;
  version: number;
  state: StateName;
  updatedAt: number;
  messages: unknown[];
  artifacts: unknown[];
}

interface TaskRow {
  id: string;
  context_id: string;
  sender_agent_id: string;
  sender_tenant_id: string;
  recipient_agent_id: string;
  state: StateName;
  message_count: number;
  artifact_count: number;
  bytes: number | string;
  created_at: number | string;
  updated_at: number | string;
  version: number | string;
}

const json = <T>(value: T | string): T => (typeof value === 'string' ? (JSON.parse(value) as T) : value);

function toTask(row: TaskRow): TaskRecord {
  return {
    id: row.id,
    contextId: row.context_id,
    senderAgentId: row.sender_agent_id,
    senderTenantId: row.sender_tenant_id,
    recipientAgentId: row.recipient_agent_id,
    state: row.state,
    messages: [],
    artifacts: [],
    messageCount: Number(row.message_count),
    artifactCount: Number(row.artifact_count),
    bytes: Number(row.bytes),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    version: Number(row.version),
  };
}

/** The serialized items of one kind as a JSON array, without serializing them again. */
const jsonArray = (items: SerializedItem[], kind: SerializedItem['kind']) => `[${items.filter((i) => i.kind === kind).map((i) => i.body).join(',')}]`;

const TASK_COLUMNS =
  'id, context_id, sender_agent_id, sender_tenant_id, recipient_agent_id, state, message_count, artifact_count, bytes, created_at, updated_at, version';

/**
 * What a transition decides: the task's next state and time, what it appends (proto JSON), and
 * optionally a new delivery or the purge of the task's queued ones.
 */
export interface TaskChange {
  next: { state: StateName; updatedAt: number };
  append?: { messages?: unknown[]; artifacts?: unknown[] };
  delivery?: NewDelivery;
  purge?: boolean;
}

/** Refuses (by throwing) growth past the task limits; called before anything is written. */
export type GrowthCheck = (current: TaskRecord, growth: TaskGrowth) => void;

export interface TransitionOptions {
  check?: GrowthCheck;
  /** Hand `decide` the ids of the items the task holds (to append only unseen ones). */
  held?: boolean;
  /** Which items the returned `after` carries; default every one. */
  load?: ItemSelection;
  /**
   * The task as the caller read it just now (without its items): `decide` runs on it and the change
   * is written in one statement, on the condition that the task is still at that version; only
   * when it moved on meanwhile is the change decided again under the task's lock.
   */
  current?: TaskRecord;
}

/** The event every transition writes, in the transition's transaction. */
async function transitionEvent(tx: Queryable, task: TaskRecord, from: StateName | undefined, now: number) {
  await appendEvent(tx, transitionEventOf(task, from), new Date(now));
}

function transitionEventOf(task: TaskRecord, from: StateName | undefined) {
  return {
    topic: MESSAGING_EVENTS_TOPIC,
    partitionKey: task.id,
    type: from === undefined ? 'messaging.task.created' : 'messaging.task.transitioned',
    data: {
      task_id: task.id,
      context_id: task.contextId,
      sender_agent_id: task.senderAgentId,
      recipient_agent_id: task.recipientAgentId,
      ...(from !== undefined ? { from } : {}),
      state: task.state,
    },
  };
}

export interface NewDelivery {
  id: string;
  message: unknown;
  expiresAt: number;
  /** The recipient's tenant ('' when unknown), for the queued-deliveries gauges of each tenant. */
  recipientTenantId: string;
}

/** The tasks of the messaging service: their rows, items and transitions, written with their events. */
export class TaskStore {
  private readonly newTasks: TaskInsertBatcher;

  /** `keyWindowMs`: how long a send's key stays its own (MESSAGING_IDEMPOTENCY_WINDOW_MS). */
  constructor(
    private readonly db: Db,
    keyWindowMs: number,
  ) {
    this.newTasks = new TaskInsertBatcher(db, keyWindowMs);
  }

  /** Tasks each agent of `agentIds` sent that are still submitted or working, for those with any. */
  async inFlightCounts(signal: AbortSignal, agentIds: readonly string[]): Promise<Map<string, number>> {
    const { rows } = await this.db.query<{ id: string; n: number }>(
      `SELECT sender_agent_id AS id, count(*)::int AS n FROM tasks
        WHERE sender_agent_id = ANY($1::text[]) AND state IN ('submitted', 'working') GROUP BY 1`,
      [agentIds],
      signal,
    );
    return new Map(rows.map((r) => [r.id, r.n]));
  }

  /** The task with the items `load` selects (default all; `false`: none). */
  /** The task (without its items) and the ids of the items it holds, as of one snapshot. */
  private async readWithHeld(signal: AbortSignal, id: string): Promise<{ task: TaskRecord; held: HeldIds } | undefined> {
    const { rows } = await this.db.query<TaskRow & { held: [ItemKind, string][] | null }>(
      `SELECT ${TASK_COLUMNS},
              (SELECT json_agg(json_build_array(i.kind, i.item_id)) FROM task_items i WHERE i.task_id = tasks.id AND i.item_id <> '') AS held
         FROM tasks WHERE id = $1`,
      [id],
      signal,
    );
    if (!rows[0]) return undefined;
    return { task: toTask(rows[0]), held: heldIdsOf(json<[ItemKind, string][] | null>(rows[0].held) ?? []) };
  }

  async getTask(signal: AbortSignal, id: string, load: ItemSelection | false = { artifacts: true }): Promise<TaskRecord | undefined> {
    const { rows } = await this.db.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = $1`, [id], signal);
    if (!rows[0]) return undefined;
    const task = toTask(rows[0]);
    return load ? (await this.withItems(signal, [task], load))[0] : task;
  }

  /** The tasks with the items `load` selects, read in one query (in `q`'s transaction, when given). */
  async withItems(signal: AbortSignal, tasks: TaskRecord[], load: ItemSelection, q: Queryable = this.db): Promise<TaskRecord[]> {
    const items = await loadItems(q, tasks.map((t) => t.id), load, signal);
    return tasks.map((t) => ({ ...t, ...items.get(t.id) }));
  }

  /**
   * Inserts a task (its `messages` and `artifacts` become its first items) with its first event
   * and, unless undefined, its delivery; `check` may refuse it before anything is written.
   * The rows go in one statement, grouped with concurrent sends (send-batch.ts): one round trip
   * and at most one commit per send, on the send's hot path. Returns the task with its counts and
   * bytes, or why nothing was written: its sender already has `maxInFlight` tasks submitted or
   * working (counted in that statement, so concurrent sends cannot pass it together), or an
   * earlier send holds `key`.
   */
  async createTask(
    signal: AbortSignal,
    task: TaskRecord,
    delivery: NewDelivery | undefined,
    options: { check?: GrowthCheck; maxInFlight?: number; key?: NewTaskRows['key'] } = {},
  ): Promise<{ created: TaskRecord; refused?: never } | { created?: never; refused: Exclude<InsertOutcome, 'written'> }> {
    const items = [...serializeItems('message', task.messages), ...serializeItems('artifact', task.artifacts)];
    const growth = growthOf(items);
    options.check?.({ ...task, messages: [], artifacts: [], messageCount: 0, artifactCount: 0, bytes: 0 }, growth);
    const created = { ...task, messageCount: growth.messages, artifactCount: growth.artifacts, bytes: growth.bytes, version: 1 };
    const rows: NewTaskRows = {
      task: created,
      items,
      event: transitionEventOf(created, undefined),
      delivery,
      traceparent: currentTraceparent() ?? null,
      quota: options.maxInFlight,
      key: options.key,
    };
    // The grouped insert is shared with other sends, so no one caller's signal cancels it.
    throwIfAborted(signal);
    const outcome = await this.newTasks.write(rows);
    return outcome === 'written' ? { created } : { refused: outcome };
  }

  private async insertDelivery(tx: Queryable, task: TaskRecord, delivery: NewDelivery) {
    await tx.query(
      'INSERT INTO deliveries (id, task_id, recipient_agent_id, recipient_tenant_id, message, created_at, expires_at, traceparent) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
      [delivery.id, task.id, task.recipientAgentId, delivery.recipientTenantId, JSON.stringify(delivery.message), task.updatedAt, delivery.expiresAt, currentTraceparent() ?? null],
    );
  }

  /**
   * Locks the task and lets `decide` compute its next state and what it appends; `check` may
   * refuse the growth, before anything is written. Writes the change (appended items as rows of
   * their own), its transition row and event (when the state changed) and the optional new
   * delivery. `decide` may throw to refuse; `purge` deletes the task's queued deliveries.
   */
  async transition(
    signal: AbortSignal,
    id: string,
    decide: (current: TaskRecord, held: HeldIds | undefined) => TaskChange,
    options: TransitionOptions = {},
  ): Promise<{ before: TaskRecord; after: TaskRecord } | undefined> {
    if (options.current && !options.held) {
      const done = await this.transitionFrom(signal, options.current, decide, options, undefined);
      if (done) return done;
    } else if (options.held) {
      // The task and the ids it holds in one read, then the version-checked write: two round trips
      // where the locked transaction below takes ten, each waiting for this event loop between
      // statements while the row stays locked.
      const read = await this.readWithHeld(signal, id);
      if (!read) return undefined;
      const done = await this.transitionFrom(signal, read.task, decide, options, read.held);
      if (done) return done;
    }
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = $1 FOR UPDATE`, [id]);
      if (!rows[0]) return undefined;
      const before = toTask(rows[0]);
      const decided = decide(before, options.held ? await heldIds(tx, id) : undefined);
      const { delivery, purge } = decided;
      const addedMessages = decided.append?.messages ?? [];
      const addedArtifacts = decided.append?.artifacts ?? [];
      const items = [...serializeItems('message', addedMessages), ...serializeItems('artifact', addedArtifacts)];
      const growth = growthOf(items);
      if (items.length) options.check?.(before, growth);
      const changed = decided.next.state !== before.state || items.length > 0;
      const next: TaskRecord = {
        ...before,
        state: decided.next.state,
        updatedAt: changed ? decided.next.updatedAt : before.updatedAt,
        messageCount: before.messageCount + growth.messages,
        artifactCount: before.artifactCount + growth.artifacts,
        bytes: before.bytes + growth.bytes,
        version: changed ? before.version + 1 : before.version,
      };
      if (changed) {
        await tx.query(
          'UPDATE tasks SET state = $2, updated_at = $3, version = $4, message_count = $5, artifact_count = $6, bytes = $7 WHERE id = $1',
          [id, next.state, next.updatedAt, next.version, next.messageCount, next.artifactCount, next.bytes],
        );
        await appendItems(tx, id, before, items);
        await tx.query(
          'INSERT INTO task_transitions (task_id, version, state, updated_at, messages, artifacts) VALUES ($1, $2, $3, $4, $5, $6)',
          [id, next.version, next.state, next.updatedAt, jsonArray(items, 'message'), jsonArray(items, 'artifact')],
        );
      }
      if (next.state !== before.state) await transitionEvent(tx, next, before.state, next.updatedAt);
      if (purge) await tx.query('DELETE FROM deliveries WHERE task_id = $1', [id]);
      if (delivery) await this.insertDelivery(tx, next, delivery);
      const [after] = await this.withItems(signal, [next], options.load ?? { artifacts: true }, tx);
      return { before, after: after! };
    }, signal);
  }

  /**
   * `transition` from the task as read (unlocked) just now, in one statement: the task row is
   * updated only if still at `before`'s version, and its items, transition row, event, purge and
   * delivery are written only with it; the task's earlier items come back in the same round trip.
   * Undefined when the task moved on (nothing is written) or the change writes no row.
   */
  private async transitionFrom(
    signal: AbortSignal,
    before: TaskRecord,
    decide: (current: TaskRecord, held: HeldIds | undefined) => TaskChange,
    options: TransitionOptions,
    held: HeldIds | undefined,
  ): Promise<{ before: TaskRecord; after: TaskRecord } | undefined> {
    const decided = decide(before, held);
    const { delivery, purge } = decided;
    const addedMessages = decided.append?.messages ?? [];
    const addedArtifacts = decided.append?.artifacts ?? [];
    const items = [...serializeItems('message', addedMessages), ...serializeItems('artifact', addedArtifacts)];
    const growth = growthOf(items);
    if (items.length) options.check?.(before, growth);
    if (decided.next.state === before.state && !items.length) return undefined;
    const next: TaskRecord = {
      ...before,
      state: decided.next.state,
      updatedAt: decided.next.updatedAt,
      messageCount: before.messageCount + growth.messages,
      artifactCount: before.artifactCount + growth.artifacts,
      bytes: before.bytes + growth.bytes,
      version: before.version + 1,
      messages: [],
      artifacts: [],
    };
    const params: unknown[] = [];
    const p = (value: unknown) => `$${params.push(value)}`;
    const id = p(next.id);
    const state = p(next.state);
    const updatedAt = p(next.updatedAt);
    const version = p(next.version);
    const withs = [
      `upd AS (UPDATE tasks SET state = ${state}, updated_at = ${updatedAt}::bigint, version = ${version}::bigint, message_count = ${p(next.messageCount)}::integer,
                artifact_count = ${p(next.artifactCount)}::integer, bytes = ${p(next.bytes)}::bigint WHERE id = ${id} AND version = ${p(before.version)}::bigint RETURNING id)`,
      `transition AS (INSERT INTO task_transitions (task_id, version, state, updated_at, messages, artifacts)
         SELECT id, ${version}::bigint, ${state}, ${updatedAt}::bigint, ${p(jsonArray(items, 'message'))}::jsonb, ${p(jsonArray(items, 'artifact'))}::jsonb FROM upd)`,
    ];
    if (items.length) {
      const seq = { message: before.messageCount, artifact: before.artifactCount };
      withs.push(`item AS (INSERT INTO task_items (task_id, kind, seq, item_id, body, bytes)
         SELECT upd.id, x.kind, x.seq, x.item_id, x.body::jsonb, x.bytes
           FROM upd, unnest(${p(items.map((i) => i.kind))}::text[], ${p(items.map((i) => seq[i.kind]++))}::int[], ${p(items.map((i) => i.itemId))}::text[],
                            ${p(items.map((i) => i.body))}::text[], ${p(items.map((i) => i.bytes))}::int[]) AS x (kind, seq, item_id, body, bytes))`);
    }
    if (next.state !== before.state) {
      const values = outboxValues(transitionEventOf(next, before.state), new Date(next.updatedAt), currentTraceparent() ?? null);
      const [eventId, topic, key, type, payload, createdAt, traceparent] = values;
      withs.push(`event AS (INSERT INTO outbox (${OUTBOX_INSERT_COLUMNS})
         SELECT ${p(eventId)}, ${p(topic)}, ${p(key)}, ${p(type)}, ${p(payload)}::jsonb, ${p(createdAt)}::bigint, ${p(traceparent)} FROM upd)`);
    }
    if (purge) withs.push(`purge AS (DELETE FROM deliveries WHERE task_id = ${id} AND EXISTS (SELECT 1 FROM upd))`);
    if (delivery) {
      withs.push(`delivery AS (INSERT INTO deliveries (id, task_id, recipient_agent_id, recipient_tenant_id, message, created_at, expires_at, traceparent)
         SELECT ${p(delivery.id)}, upd.id, ${p(next.recipientAgentId)}, ${p(delivery.recipientTenantId)}, ${p(JSON.stringify(delivery.message))}::jsonb, ${updatedAt}::bigint, ${p(delivery.expiresAt)}::bigint,
                ${p(currentTraceparent() ?? null)} FROM upd)`);
    }
    // The earlier items `load` selects, as they were before this statement (it sees none of its own
    // writes); the new ones are appended below. A row with no item when there is none.
    const load = options.load ?? { artifacts: true };
    const wantMessages = load.historyLength === undefined || load.historyLength > 0;
    const { rows } = await this.db.query<{ updated: number; schema: string; kind: 'message' | 'artifact' | null; body: unknown }>(
      `WITH ${withs.join(',\n')}
       SELECT (SELECT count(*) FROM upd)::int AS updated, current_schema() AS schema, i.kind, i.body
         FROM (SELECT 1) AS one
         LEFT JOIN task_items i ON i.task_id = ${id}
              AND ((i.kind = 'message' AND ${p(wantMessages)}::boolean AND i.seq >= ${p(next.messageCount - (load.historyLength ?? next.messageCount))}::integer)
                OR (i.kind = 'artifact' AND ${p(load.artifacts)}::boolean))
        ORDER BY i.kind, i.seq`,
      params,
      signal,
    );
    if (!rows[0]?.updated) return undefined;
    if (next.state !== before.state) this.db.notify(OUTBOX_CHANNEL, rows[0].schema);
    const messages: unknown[] = [];
    const artifacts: unknown[] = [];
    for (const row of rows) {
      if (row.kind) (row.kind === 'message' ? messages : artifacts).push(json(row.body));
    }
    if (wantMessages) messages.push(...addedMessages);
    if (load.artifacts) artifacts.push(...addedArtifacts);
    const kept = load.historyLength === undefined ? messages : messages.slice(-load.historyLength);
    return { before, after: { ...next, messages: wantMessages ? kept : [], artifacts } };
  }

  /** The task's transitions after `afterVersion`, oldest first. */
  async transitionsAfter(signal: AbortSignal, taskId: string, afterVersion: number, limit = 100): Promise<TransitionRecord[]> {
    const { rows } = await this.db.query<{
      version: number | string;
      state: StateName;
      updated_at: number | string;
      messages: unknown[] | string;
      artifacts: unknown[] | string;
    }>(
      `SELECT version, state, updated_at, messages, artifacts FROM task_transitions
        WHERE task_id = $1 AND version > $2 ORDER BY version LIMIT $3`,
      [taskId, afterVersion, limit],
      signal,
    );
    return rows.map((r) => ({
      taskId,
      version: Number(r.version),
      state: r.state,
      updatedAt: Number(r.updated_at),
      messages: json(r.messages),
      artifacts: json(r.artifacts),
    }));
  }

  /**
   * One page of the agent's tasks (as sender or recipient), most recently updated first, after
   * the `(updatedAt, id)` cursor; plus how many match overall.
   */
  async listTasks(
    signal: AbortSignal,
    agentId: string,
    filter: { contextId?: string; state?: StateName; updatedAfter?: number; peerAgentId?: string; after?: { updatedAt: number; id: string } },
    limit: number,
  ): Promise<{ tasks: TaskRecord[]; total: number }> {
    const where = ['(sender_agent_id = $1 OR recipient_agent_id = $1)'];
    const args: unknown[] = [agentId];
    const arg = (value: unknown) => `$${args.push(value)}`;
    if (filter.contextId) where.push(`context_id = ${arg(filter.contextId)}`);
    if (filter.peerAgentId) {
      const peer = arg(filter.peerAgentId);
      where.push(`(sender_agent_id = ${peer} OR recipient_agent_id = ${peer})`);
    }
    if (filter.state) where.push(`state = ${arg(filter.state)}`);
    if (filter.updatedAfter) where.push(`updated_at >= ${arg(filter.updatedAfter)}`);
    const matching = where.join(' AND ');
    const { rows: counted } = await this.db.query<{ n: number | string }>(`SELECT count(*) AS n FROM tasks WHERE ${matching}`, args, signal);
    const page = [...where];
    if (filter.after) page.push(`(updated_at, id) < (${arg(filter.after.updatedAt)}, ${arg(filter.after.id)})`);
    const { rows } = await this.db.query<TaskRow>(
      `SELECT ${TASK_COLUMNS} FROM tasks WHERE ${page.join(' AND ')} ORDER BY updated_at DESC, id DESC LIMIT ${arg(limit)}`,
      args,
      signal,
    );
    return { tasks: rows.map(toTask), total: Number(counted[0]?.n ?? 0) };
  }
}
