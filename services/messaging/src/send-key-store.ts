import { throwIfAborted, type Queryable } from '@agenthub/runtime';
import { GroupCommit } from './group-commit.js';

/** A send already made with this (sender, messageId). */
export interface SendKey {
  taskId: string;
  bodyHash: string;
  createdAt: number;
}

/** A send's claim on its (sender, messageId) key. */
interface Reservation {
  sender: string;
  messageId: string;
  key: SendKey;
}

/**
 * The statement (or CTE) that claims keys for `rows` (sender_agent_id, message_id, task_id,
 * body_hash, created_at): a key becomes the new send's unless a send within the window
 * (`windowParam`, ms) holds it. Returns the keys claimed; two rows of one key fail it ("cannot
 * affect row a second time").
 */
export const claimKeys = (rows: string, windowParam: string) =>
  `INSERT INTO send_keys (sender_agent_id, message_id, task_id, body_hash, created_at) ${rows}
   ON CONFLICT (sender_agent_id, message_id) DO UPDATE
     SET task_id = EXCLUDED.task_id, body_hash = EXCLUDED.body_hash, created_at = EXCLUDED.created_at
     WHERE send_keys.created_at < EXCLUDED.created_at - ${windowParam}::bigint
   RETURNING sender_agent_id, message_id, task_id`;

/** The SQL of idempotent sends and of context ownership (migration 005). */
export class SendKeyStore {
  /** Reservations of concurrent sends share a statement, as their tasks do (group-commit.ts). */
  private readonly reservations: GroupCommit<Reservation, boolean>;

  /** `windowMs`: how long a key stays the first send's (MESSAGING_IDEMPOTENCY_WINDOW_MS). */
  constructor(
    private readonly db: Queryable,
    private readonly windowMs: number,
  ) {
    this.reservations = new GroupCommit((all) => this.reserveAll(all));
  }

  /**
   * Records the send unless one with the same key was made within the window (an older one is
   * replaced: the window has passed). Returns undefined when this send now owns the key, or the
   * earlier send. For a follow-up, which writes into a task that exists; a new task claims its key
   * in the statement that writes it (send-batch.ts).
   */
  async reserve(signal: AbortSignal, sender: string, messageId: string, key: SendKey): Promise<SendKey | undefined> {
    // The statement is shared with other sends, so no one caller's signal cancels it.
    throwIfAborted(signal);
    if (await this.reservations.write({ sender, messageId, key })) return undefined;
    return this.get(signal, sender, messageId);
  }

  /**
   * Whether each reservation now owns its key. Two of one key in one statement fail it ("cannot
   * affect row a second time"), and the group then goes one by one, where the first wins.
   */
  private async reserveAll(all: Reservation[]): Promise<boolean[]> {
    const params: unknown[] = [];
    const p = (value: unknown) => `$${params.push(value)}`;
    const values = all.map(({ sender, messageId, key }) => `(${p(sender)}, ${p(messageId)}, ${p(key.taskId)}, ${p(key.bodyHash)}, ${p(key.createdAt)}::bigint)`);
    const { rows } = await this.db.query<{ sender_agent_id: string; message_id: string; task_id: string }>(
      claimKeys(`VALUES ${values.join(', ')}`, p(this.windowMs)),
      params,
    );
    // Keyed by all three: sends of one task (follow-ups) share a task id, not a key.
    const owned = new Set(rows.map((r) => JSON.stringify([r.sender_agent_id, r.message_id, r.task_id])));
    return all.map(({ sender, messageId, key }) => owned.has(JSON.stringify([sender, messageId, key.taskId])));
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
