import { appendEvent, currentTraceparent, type Db, type Queryable } from '@agenthub/runtime';
import type { StateWord } from '@agenthub/tasks';
import { TaskInsertBatcher } from './send-batch.js';
import { appendItems, growthOf, heldIds, loadItems, serializeItems, type HeldIds, type ItemSelection, type SerializedItem, type TaskGrowth } from './task-items.js';

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

export interface DeliveryRecord {
  id: string;
  taskId: string;
  contextId: string;
  senderAgentId: string;
  message: unknown;
  createdAt: number;
  attempts: number;
  /** The trace of the send that queued it (W3C traceparent), when traced. */
  traceparent?: string;
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
}

/** All SQL of the messaging service, in its own schema. */
export class MessagingStore {
  private readonly newTasks: TaskInsertBatcher;

  constructor(readonly db: Db) {
    this.newTasks = new TaskInsertBatcher(db);
  }

  /** The task with the items `load` selects (default all; `false`: none). */
  async getTask(id: string, load: ItemSelection | false = { artifacts: true }): Promise<TaskRecord | undefined> {
    const { rows } = await this.db.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = $1`, [id]);
    if (!rows[0]) return undefined;
    const task = toTask(rows[0]);
    return load ? (await this.withItems([task], load))[0] : task;
  }

  /** The tasks with the items `load` selects, read in one query. */
  async withItems(tasks: TaskRecord[], load: ItemSelection, q: Queryable = this.db): Promise<TaskRecord[]> {
    const items = await loadItems(q, tasks.map((t) => t.id), load);
    return tasks.map((t) => ({ ...t, ...items.get(t.id) }));
  }

  /**
   * Inserts a task (its `messages` and `artifacts` become its first items) with its first event
   * and, unless undefined, its delivery; `check` may refuse it before anything is written.
   * The rows go in one statement, grouped with concurrent sends (send-batch.ts): one round trip
   * and at most one commit per send, on the send's hot path. Returns the task with its counts and
   * bytes, or undefined, and nothing written, when its sender already has `maxInFlight` tasks
   * submitted or working.
   */
  async createTask(task: TaskRecord, delivery: NewDelivery | undefined, check?: GrowthCheck, maxInFlight = Infinity): Promise<TaskRecord | undefined> {
    const items = [...serializeItems('message', task.messages), ...serializeItems('artifact', task.artifacts)];
    const growth = growthOf(items);
    check?.({ ...task, messages: [], artifacts: [], messageCount: 0, artifactCount: 0, bytes: 0 }, growth);
    const created = { ...task, messageCount: growth.messages, artifactCount: growth.artifacts, bytes: growth.bytes, version: 1 };
    const rows = { task: created, items, event: transitionEventOf(created, undefined), delivery, traceparent: currentTraceparent() ?? null };
    if (Number.isFinite(maxInFlight)) {
      // Counted before the send joins the grouped insert: one read on a partial index, no lock, so
      // a send keeps its single statement and shared commit. Sends of one sender that race each
      // other may all pass the count, so the quota can be passed by their number (a bound the
      // rate limits and the waiting-call cap keep small).
      // Counting stops at the quota: the read costs at most `maxInFlight` index entries.
      const { rows: counted } = await this.db.query<{ count: number }>(
        `SELECT count(*)::int AS count FROM (
           SELECT 1 FROM tasks WHERE sender_agent_id = $1 AND state IN ('submitted', 'working') LIMIT $2
         ) AS in_flight`,
        [task.senderAgentId, maxInFlight],
      );
      if ((counted[0]?.count ?? 0) >= maxInFlight) return undefined;
    }
    await this.newTasks.insert(rows);
    return created;
  }

  private async insertDelivery(tx: Queryable, task: TaskRecord, delivery: NewDelivery) {
    await tx.query(
      'INSERT INTO deliveries (id, task_id, recipient_agent_id, message, created_at, expires_at, traceparent) VALUES ($1, $2, $3, $4, $5, $6, $7)',
      [delivery.id, task.id, task.recipientAgentId, JSON.stringify(delivery.message), task.updatedAt, delivery.expiresAt, currentTraceparent() ?? null],
    );
  }

  /**
   * Locks the task and lets `decide` compute its next state and what it appends; `check` may
   * refuse the growth, before anything is written. Writes the change (appended items as rows of
   * their own), its transition row and event (when the state changed) and the optional new
   * delivery. `decide` may throw to refuse; `purge` deletes the task's queued deliveries.
   */
  async transition(
    id: string,
    decide: (current: TaskRecord, held: HeldIds | undefined) => TaskChange,
    options: TransitionOptions = {},
  ): Promise<{ before: TaskRecord; after: TaskRecord } | undefined> {
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
      const [after] = await this.withItems([next], options.load ?? { artifacts: true }, tx);
      return { before, after: after! };
    });
  }

  /** The task's transitions after `afterVersion`, oldest first. */
  async transitionsAfter(taskId: string, afterVersion: number, limit = 100): Promise<TransitionRecord[]> {
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
    const { rows: counted } = await this.db.query<{ n: number | string }>(`SELECT count(*) AS n FROM tasks WHERE ${matching}`, args);
    const page = [...where];
    if (filter.after) page.push(`(updated_at, id) < (${arg(filter.after.updatedAt)}, ${arg(filter.after.id)})`);
    const { rows } = await this.db.query<TaskRow>(
      `SELECT ${TASK_COLUMNS} FROM tasks WHERE ${page.join(' AND ')} ORDER BY updated_at DESC, id DESC LIMIT ${arg(limit)}`,
      args,
    );
    return { tasks: rows.map(toTask), total: Number(counted[0]?.n ?? 0) };
  }

  /**
   * Claims up to `max` of the recipient's visible deliveries, oldest first, hiding them until
   * `claimUntil`. SKIP LOCKED lets several replicas (and polls) share a queue without waiting.
   */
  async claimDeliveries(recipientAgentId: string, now: number, claimUntil: number, max: number): Promise<DeliveryRecord[]> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ seq: string }>(
        `SELECT seq FROM deliveries
          WHERE recipient_agent_id = $1 AND claimed_until <= $2 AND expires_at > $2
          ORDER BY seq LIMIT $3 FOR UPDATE SKIP LOCKED`,
        [recipientAgentId, now, max],
      );
      if (!rows.length) return [];
      const claimed = await tx.query<{
        id: string;
        task_id: string;
        context_id: string;
        sender_agent_id: string;
        message: unknown;
        created_at: number | string;
        attempts: number;
        seq: string;
        traceparent: string | null;
      }>(
        `UPDATE deliveries d SET claimed_until = $2, attempts = d.attempts + 1
           FROM tasks t
          WHERE d.seq = ANY($1::bigint[]) AND t.id = d.task_id
          RETURNING d.seq, d.id, d.task_id, t.context_id, t.sender_agent_id, d.message, d.created_at, d.attempts, d.traceparent`,
        [rows.map((r) => r.seq), claimUntil],
      );
      return claimed.rows
        .sort((a, b) => Number(a.seq) - Number(b.seq))
        .map((r) => ({
          id: r.id,
          taskId: r.task_id,
          contextId: r.context_id,
          senderAgentId: r.sender_agent_id,
          message: json(r.message),
          createdAt: Number(r.created_at),
          attempts: r.attempts,
          ...(r.traceparent ? { traceparent: r.traceparent } : {}),
        }));
    });
  }

  /** Deletes the recipient's delivery; false when it is not (or no longer) queued. */
  async ackDelivery(recipientAgentId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.db.query('DELETE FROM deliveries WHERE id = $1 AND recipient_agent_id = $2', [id, recipientAgentId]);
    return rowCount > 0;
  }

  /** Ids of tasks with expired deliveries, a batch at a time (for the sweeper). */
  async expiredTaskIds(now: number, limit: number): Promise<string[]> {
    const { rows } = await this.db.query<{ task_id: string }>(
      'SELECT DISTINCT task_id FROM deliveries WHERE expires_at <= $1 LIMIT $2',
      [now, limit],
    );
    return rows.map((r) => r.task_id);
  }

  /** Deletes a task's expired deliveries (of a task that is no longer waiting for them). */
  async deleteExpired(taskId: string, now: number): Promise<number> {
    const { rowCount } = await this.db.query('DELETE FROM deliveries WHERE task_id = $1 AND expires_at <= $2', [taskId, now]);
    return rowCount;
  }

  // Push agents (push.ts). `wallNow` and leases are wall-clock ms; `queueNow` is the service clock.

  /** Records a push agent's endpoint and tenant (a changed endpoint starts without backoff). */
  async recordPushAgent(agentId: string, endpointUrl: string, tenantId: string): Promise<void> {
    await this.db.query(
      `INSERT INTO push_agents (agent_id, endpoint_url, tenant_id) VALUES ($1, $2, $3)
       ON CONFLICT (agent_id) DO UPDATE SET endpoint_url = EXCLUDED.endpoint_url, tenant_id = EXCLUDED.tenant_id,
         failures = CASE WHEN push_agents.endpoint_url <> EXCLUDED.endpoint_url THEN 0 ELSE push_agents.failures END,
         retry_at = CASE WHEN push_agents.endpoint_url <> EXCLUDED.endpoint_url THEN 0 ELSE push_agents.retry_at END
        WHERE push_agents.endpoint_url <> EXCLUDED.endpoint_url OR push_agents.tenant_id <> EXCLUDED.tenant_id`,
      [agentId, endpointUrl, tenantId],
    );
  }

  /** Makes a claimed delivery visible again at once: its push agent did not take it. */
  async releaseDelivery(id: string): Promise<void> {
    await this.db.query('UPDATE deliveries SET claimed_until = 0 WHERE id = $1', [id]);
  }

  /** Hands claimed deliveries back at once, uncounted: the inbox call that claimed them lost its caller. */
  async releaseClaims(recipientAgentId: string, ids: string[]): Promise<void> {
    await this.db.query(
      'UPDATE deliveries SET claimed_until = 0, attempts = attempts - 1 WHERE id = ANY($1::text[]) AND recipient_agent_id = $2',
      [ids, recipientAgentId],
    );
  }

  /** The agent's task behind a hub task, when the hub task went to a push agent that answered. */
  async getPushTask(taskId: string): Promise<PushTaskRecord | undefined> {
    const { rows } = await this.db.query<PushTaskRow>(`SELECT ${PUSH_TASK_COLUMNS} FROM push_tasks p JOIN push_agents a USING (agent_id) WHERE p.task_id = $1`, [
      taskId,
    ]);
    return rows[0] && toPushTask(rows[0]);
  }

  /**
   * Records the agent's task behind a hub task and when to ask the agent about it next (null: it
   * settled). A pending cancel stays due.
   */
  async savePushTask(taskId: string, agentId: string, remoteTaskId: string, followAt: number | null, followDelayMs: number): Promise<void> {
    await this.db.query(
      `INSERT INTO push_tasks (task_id, agent_id, remote_task_id, follow_at, follow_delay_ms) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (task_id) DO UPDATE SET remote_task_id = EXCLUDED.remote_task_id, follow_delay_ms = EXCLUDED.follow_delay_ms,
         follow_at = CASE WHEN push_tasks.cancel_requested THEN push_tasks.follow_at ELSE EXCLUDED.follow_at END`,
      [taskId, agentId, remoteTaskId, followAt, followDelayMs],
    );
  }

  /** Asks the push worker to forward a cancel of the hub task to its agent (no-op for other tasks). */
  async requestPushCancel(taskId: string): Promise<void> {
    await this.db.query('UPDATE push_tasks SET cancel_requested = true, follow_at = 0 WHERE task_id = $1', [taskId]);
  }

  /**
   * Stops following a settled push task, unless a cancel was requested meanwhile (a follow-up
   * that saw the hub task canceled must not drop the cancel still to be forwarded).
   */
  async stopPushFollowUp(taskId: string): Promise<void> {
    await this.db.query('UPDATE push_tasks SET follow_at = NULL WHERE task_id = $1 AND NOT cancel_requested', [taskId]);
  }

  /** The cancel reached the agent (or was tried): nothing more to do for the task. */
  async pushCancelForwarded(taskId: string): Promise<void> {
    await this.db.query('UPDATE push_tasks SET follow_at = NULL, cancel_requested = false WHERE task_id = $1', [taskId]);
  }
}

/** A push agent as the worker claims it. */
export interface PushAgentRecord {
  agentId: string;
  endpointUrl: string;
  /** Failed attempts in a row (0 while the endpoint answers). */
  failures: number;
}

/** The agent's task behind a hub task. */
export interface PushTaskRecord {
  taskId: string;
  agentId: string;
  endpointUrl: string;
  remoteTaskId: string;
  followDelayMs: number;
  cancelRequested: boolean;
}

interface PushTaskRow {
  task_id: string;
  agent_id: string;
  endpoint_url: string;
  remote_task_id: string;
  follow_delay_ms: number;
  cancel_requested: boolean;
}

const PUSH_TASK_COLUMNS = 'p.task_id, p.agent_id, a.endpoint_url, p.remote_task_id, p.follow_delay_ms, p.cancel_requested';

const toPushTask = (r: PushTaskRow): PushTaskRecord => ({
  taskId: r.task_id,
  agentId: r.agent_id,
  endpointUrl: r.endpoint_url,
  remoteTaskId: r.remote_task_id,
  followDelayMs: r.follow_delay_ms,
  cancelRequested: r.cancel_requested,
});
