import type { Db } from '@agenthub/runtime';

/** A send already made with this (sender, messageId). */
export interface SendKey {
  taskId: string;
  bodyHash: string;
  createdAt: number;
}

/** The SQL of idempotent sends and of context ownership (migration 005). */
export class SendKeyStore {
  constructor(private readonly db: Db) {}

  /**
   * Records the send unless one with the same key was made since `cutoff` (an older one is
   * replaced: the window has passed). Returns undefined when this send now owns the key, or the
   * earlier send.
   */
  async reserve(signal: AbortSignal, sender: string, messageId: string, key: SendKey, cutoff: number): Promise<SendKey | undefined> {
    const { rows } = await this.db.query<{ task_id: string; body_hash: string; created_at: number | string; mine: boolean }>(
      `INSERT INTO send_keys (sender_agent_id, message_id, task_id, body_hash, created_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (sender_agent_id, message_id) DO UPDATE
         SET task_id = EXCLUDED.task_id, body_hash = EXCLUDED.body_hash, created_at = EXCLUDED.created_at
         WHERE send_keys.created_at < $6
       RETURNING task_id, body_hash, created_at, (task_id = $3) AS mine`,
      [sender, messageId, key.taskId, key.bodyHash, key.createdAt, cutoff],
      signal,
    );
    if (rows[0]?.mine) return undefined;
    return this.get(signal, sender, messageId);
  }

  async get(signal: AbortSignal, sender: string, messageId: string): Promise<SendKey | undefined> {
    const { rows } = await this.db.query<{ task_id: string; body_hash: string; created_at: number | string }>(
      'SELECT task_id, body_hash, created_at FROM send_keys WHERE sender_agent_id = $1 AND message_id = $2',
      [sender, messageId],
      signal,
    );
    const row = rows[0];
    return row && { taskId: row.task_id, bodyHash: row.body_hash, createdAt: Number(row.created_at) };
  }

  /** Gives the key back after the send it was reserved for failed. */
  async release(signal: AbortSignal, sender: string, messageId: string, taskId: string): Promise<void> {
    await this.db.query('DELETE FROM send_keys WHERE sender_agent_id = $1 AND message_id = $2 AND task_id = $3', [sender, messageId, taskId], signal);
  }

  /** Forgets sends older than the window, a batch at a time (for the sweeper). */
  async prune(signal: AbortSignal, cutoff: number, batch: number): Promise<number> {
    const { rowCount } = await this.db.query(
      `DELETE FROM send_keys WHERE ctid IN (SELECT ctid FROM send_keys WHERE created_at < $1 LIMIT $2)`,
      [cutoff, batch],
      signal,
    );
    return rowCount;
  }

  /** Whether the agent sent or received a task in the context, and whether the context has any. */
  async contextMembership(signal: AbortSignal, contextId: string, agentId: string): Promise<{ tasks: boolean; member: boolean }> {
    const { rows } = await this.db.query<{ member: boolean; any: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM tasks WHERE context_id = $1 AND (sender_agent_id = $2 OR recipient_agent_id = $2)) AS member,
              EXISTS (SELECT 1 FROM tasks WHERE context_id = $1) AS any`,
      [contextId, agentId],
      signal,
    );
    return { tasks: rows[0]?.any === true, member: rows[0]?.member === true };
  }

  /** Claims a context nobody has a task in yet; returns the agent holding the claim. */
  async claimContext(signal: AbortSignal, contextId: string, agentId: string, now: number): Promise<string> {
    await this.db.query('INSERT INTO context_claims (context_id, agent_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (context_id) DO NOTHING', [
      contextId,
      agentId,
      now,
    ], signal);
    const { rows } = await this.db.query<{ agent_id: string }>('SELECT agent_id FROM context_claims WHERE context_id = $1', [contextId], signal);
    return rows[0]!.agent_id;
  }
}
