import type { Db } from '@agenthub/runtime';

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

const json = <T>(value: T | string): T => (typeof value === 'string' ? (JSON.parse(value) as T) : value);

/** A claimed delivery's columns, joined with its task's context and sender. */
export interface DeliveryRow {
  id: string;
  task_id: string;
  context_id: string;
  sender_agent_id: string;
  message: unknown;
  created_at: number | string;
  attempts: number;
  traceparent: string | null;
}

export function toDelivery(r: DeliveryRow): DeliveryRecord {
  return {
    id: r.id,
    taskId: r.task_id,
    contextId: r.context_id,
    senderAgentId: r.sender_agent_id,
    message: json(r.message),
    createdAt: Number(r.created_at),
    attempts: r.attempts,
    ...(r.traceparent ? { traceparent: r.traceparent } : {}),
  };
}

/** The recipients' queues: deliveries claimed by inbox polls and push workers, acknowledged, released, expired. */
export class DeliveryStore {
  constructor(private readonly db: Db) {}

  /** Undelivered deliveries of the recipient, counted up to `limit` (the read costs at most that many index entries). */
  async queuedDeliveries(signal: AbortSignal, recipientAgentId: string, limit: number): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM (SELECT 1 FROM deliveries WHERE recipient_agent_id = $1 LIMIT $2) queued',
      [recipientAgentId, limit],
      signal,
    );
    return rows[0]?.n ?? 0;
  }

  /** Deliveries waiting for each agent of `agentIds`, for those with any. */
  async queuedCounts(signal: AbortSignal, agentIds: readonly string[]): Promise<Map<string, number>> {
    const { rows } = await this.db.query<{ id: string; n: number }>(
      'SELECT recipient_agent_id AS id, count(*)::int AS n FROM deliveries WHERE recipient_agent_id = ANY($1::text[]) GROUP BY 1',
      [agentIds],
      signal,
    );
    return new Map(rows.map((r) => [r.id, r.n]));
  }

  /**
   * Each tenant's fullest inbox: the most undelivered deliveries any one of its agents has, in one
   * grouped read of the whole queue (the quota gauges; it counts what queuedDeliveries counts).
   * Rows queued before deliveries named their recipient's tenant ('') count with that agent's
   * newer rows, which do; an agent with only such rows is left out.
   */
  async fullestInboxes(signal: AbortSignal): Promise<{ tenant: string; queued: number }[]> {
    const { rows } = await this.db.query<{ tenant: string; queued: number }>(
      `SELECT tenant, max(n)::int AS queued FROM (
         SELECT max(recipient_tenant_id) AS tenant, count(*) AS n FROM deliveries GROUP BY recipient_agent_id
       ) AS inboxes WHERE tenant <> '' GROUP BY tenant`,
      [],
      signal,
    );
    return rows;
  }

  /**
   * Claims up to `max` of the recipient's visible deliveries, oldest first, hiding them until
   * `claimUntil`. SKIP LOCKED lets several replicas (and polls) share a queue without waiting.
   * One statement (its own transaction): a claim is one round trip on a connected agent's path.
   */
  async claimDeliveries(signal: AbortSignal, recipientAgentId: string, now: number, claimUntil: number, max: number): Promise<DeliveryRecord[]> {
    const claimed = await this.db.query<DeliveryRow & { seq: string }>(
      `UPDATE deliveries d SET claimed_until = $4, attempts = d.attempts + 1
         FROM tasks t
        WHERE d.seq = ANY(ARRAY(
                SELECT seq FROM deliveries
                 WHERE recipient_agent_id = $1 AND claimed_until <= $2 AND expires_at > $2
                 ORDER BY seq LIMIT $3 FOR UPDATE SKIP LOCKED))
          AND t.id = d.task_id
        RETURNING d.seq, d.id, d.task_id, t.context_id, t.sender_agent_id, d.message, d.created_at, d.attempts, d.traceparent`,
      [recipientAgentId, now, max, claimUntil],
      signal,
    );
    return claimed.rows.sort((a, b) => Number(a.seq) - Number(b.seq)).map(toDelivery);
  }

  /** Deletes the recipient's delivery; false when it is not (or no longer) queued. */
  async ackDelivery(signal: AbortSignal, recipientAgentId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.db.query('DELETE FROM deliveries WHERE id = $1 AND recipient_agent_id = $2', [id, recipientAgentId], signal);
    return rowCount > 0;
  }

  /** Makes a claimed delivery visible again at once: its push agent did not take it. */
  async releaseDelivery(signal: AbortSignal, id: string): Promise<void> {
    await this.db.query('UPDATE deliveries SET claimed_until = 0 WHERE id = $1', [id], signal);
  }

  /** Hands claimed deliveries back at once, uncounted: the inbox call that claimed them lost its caller. */
  async releaseClaims(signal: AbortSignal, recipientAgentId: string, ids: string[]): Promise<void> {
    await this.db.query(
      'UPDATE deliveries SET claimed_until = 0, attempts = attempts - 1 WHERE id = ANY($1::text[]) AND recipient_agent_id = $2',
      [ids, recipientAgentId],
      signal,
    );
  }

  /** Ids of tasks with expired deliveries, a batch at a time (for the sweeper). */
  async expiredTaskIds(signal: AbortSignal, now: number, limit: number): Promise<string[]> {
    const { rows } = await this.db.query<{ task_id: string }>(
      'SELECT DISTINCT task_id FROM deliveries WHERE expires_at <= $1 LIMIT $2',
      [now, limit],
      signal,
    );
    return rows.map((r) => r.task_id);
  }

  /** Deletes a task's expired deliveries (of a task that is no longer waiting for them). */
  async deleteExpired(signal: AbortSignal, taskId: string, now: number): Promise<number> {
    const { rowCount } = await this.db.query('DELETE FROM deliveries WHERE task_id = $1 AND expires_at <= $2', [taskId, now], signal);
    return rowCount;
  }
}
