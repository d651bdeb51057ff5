import type { Db } from '@agenthub/runtime';

/**
 * Push agents and the agents' tasks behind hub tasks (push.ts). `wallNow` and leases are
 * wall-clock ms; `queueNow` is the service clock.
 */
export class PushStore {
  constructor(private readonly db: Db) {}

  /** Records a push agent's endpoint (a changed endpoint starts without backoff). */
  async recordPushAgent(signal: AbortSignal, agentId: string, endpointUrl: string): Promise<void> {
    await this.db.query(
      `INSERT INTO push_agents (agent_id, endpoint_url) VALUES ($1, $2)
       ON CONFLICT (agent_id) DO UPDATE SET endpoint_url = EXCLUDED.endpoint_url, failures = 0, retry_at = 0
        WHERE push_agents.endpoint_url <> EXCLUDED.endpoint_url`,
      [agentId, endpointUrl],
      signal,
    );
  }

  /**
   * Claims up to `max` push agents that have visible deliveries and no backoff pending, leasing
   * each until `leaseUntil` so that one worker at a time forwards an agent's queue, in order.
   */
  async claimPushAgents(signal: AbortSignal, queueNow: number, wallNow: number, leaseUntil: number, max: number): Promise<PushAgentRecord[]> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ agent_id: string }>(
        `SELECT a.agent_id FROM push_agents a
          WHERE a.retry_at <= $2 AND a.claimed_until <= $2
            AND EXISTS (SELECT 1 FROM deliveries d
                         WHERE d.recipient_agent_id = a.agent_id AND d.claimed_until <= $1 AND d.expires_at > $1)
          ORDER BY a.retry_at LIMIT $3 FOR UPDATE OF a SKIP LOCKED`,
        [queueNow, wallNow, max],
      );
      if (!rows.length) return [];
      const claimed = await tx.query<{ agent_id: string; endpoint_url: string; failures: number }>(
        'UPDATE push_agents SET claimed_until = $2 WHERE agent_id = ANY($1::text[]) RETURNING agent_id, endpoint_url, failures',
        [rows.map((r) => r.agent_id), leaseUntil],
      );
      return claimed.rows.map((r) => ({ agentId: r.agent_id, endpointUrl: r.endpoint_url, failures: r.failures }));
    }, signal);
  }

  /** Extends the lease on an agent whose queue the worker is still forwarding. */
  async renewPushAgent(signal: AbortSignal, agentId: string, leaseUntil: number): Promise<void> {
    await this.db.query('UPDATE push_agents SET claimed_until = $2 WHERE agent_id = $1', [agentId, leaseUntil], signal);
  }

  /** Ends the lease on an agent, with its failed attempts in a row and when to try it again. */
  async releasePushAgent(signal: AbortSignal, agentId: string, failures: number, retryAt: number): Promise<void> {
    await this.db.query('UPDATE push_agents SET claimed_until = 0, failures = $2, retry_at = $3 WHERE agent_id = $1', [
      agentId,
      failures,
      retryAt,
    ], signal);
  }

  /** The agent's task behind a hub task, when the hub task went to a push agent that answered. */
  async getPushTask(signal: AbortSignal, taskId: string): Promise<PushTaskRecord | undefined> {
    const { rows } = await this.db.query<PushTaskRow>(`SELECT ${PUSH_TASK_COLUMNS} FROM push_tasks p JOIN push_agents a USING (agent_id) WHERE p.task_id = $1`, [
      taskId,
    ], signal);
    return rows[0] && toPushTask(rows[0]);
  }

  /**
   * Records the agent's task behind a hub task and when to ask the agent about it next (null: it
   * settled). A pending cancel stays due.
   */
  async savePushTask(signal: AbortSignal, taskId: string, agentId: string, remoteTaskId: string, followAt: number | null, followDelayMs: number): Promise<void> {
    await this.db.query(
      `INSERT INTO push_tasks (task_id, agent_id, remote_task_id, follow_at, follow_delay_ms) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (task_id) DO UPDATE SET remote_task_id = EXCLUDED.remote_task_id, follow_delay_ms = EXCLUDED.follow_delay_ms,
         follow_at = CASE WHEN push_tasks.cancel_requested THEN push_tasks.follow_at ELSE EXCLUDED.follow_at END`,
      [taskId, agentId, remoteTaskId, followAt, followDelayMs],
      signal,
    );
  }

  /** Claims up to `max` push tasks due for a follow-up (or a cancel), leasing them until `leaseUntil`. */
  async claimPushFollowUps(signal: AbortSignal, wallNow: number, leaseUntil: number, max: number): Promise<PushTaskRecord[]> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ task_id: string }>(
        'SELECT task_id FROM push_tasks WHERE follow_at <= $1 ORDER BY follow_at LIMIT $2 FOR UPDATE SKIP LOCKED',
        [wallNow, max],
      );
      if (!rows.length) return [];
      await tx.query('UPDATE push_tasks SET follow_at = $2 WHERE task_id = ANY($1::text[])', [rows.map((r) => r.task_id), leaseUntil]);
      const claimed = await tx.query<PushTaskRow>(
        `SELECT ${PUSH_TASK_COLUMNS} FROM push_tasks p JOIN push_agents a USING (agent_id) WHERE p.task_id = ANY($1::text[])`,
        [rows.map((r) => r.task_id)],
      );
      return claimed.rows.map(toPushTask);
    }, signal);
  }

  /** Asks the push worker to forward a cancel of the hub task to its agent (no-op for other tasks). */
  async requestPushCancel(signal: AbortSignal, taskId: string): Promise<void> {
    await this.db.query('UPDATE push_tasks SET cancel_requested = true, follow_at = 0 WHERE task_id = $1', [taskId], signal);
  }

  /**
   * Stops following a settled push task, unless a cancel was requested meanwhile (a follow-up
   * that saw the hub task canceled must not drop the cancel still to be forwarded).
   */
  async stopPushFollowUp(signal: AbortSignal, taskId: string): Promise<void> {
    await this.db.query('UPDATE push_tasks SET follow_at = NULL WHERE task_id = $1 AND NOT cancel_requested', [taskId], signal);
  }

  /** The cancel reached the agent (or was tried): nothing more to do for the task. */
  async pushCancelForwarded(signal: AbortSignal, taskId: string): Promise<void> {
    await this.db.query('UPDATE push_tasks SET follow_at = NULL, cancel_requested = false WHERE task_id = $1', [taskId], signal);
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
