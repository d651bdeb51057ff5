import type { Db } from '@agenthub/runtime';
import { toDelivery, type DeliveryRecord } from './delivery-store.js';
import type { StateName, TaskRecord } from './task-store.js';
import { RECIPIENT_TTL_MS } from './recipients.js';

/** A push agent as the worker claims it. */
export interface PushAgentRecord {
  agentId: string;
  /** The agent's tenant: delivery slots are shared fairly between tenants ('' until a send records it). */
  tenantId: string;
  endpointUrl: string;
  /** Failed attempts in a row (0 while the endpoint answers). */
  failures: number;
}

/** What forwarding a delivery needs of its task. */
export type PushTaskView = Pick<TaskRecord, 'id' | 'state' | 'contextId' | 'senderAgentId' | 'senderTenantId' | 'recipientAgentId'>;

/** A claimed delivery with its task and the agent's task behind it (undefined: none recorded yet). */
export interface ClaimedDelivery {
  delivery: DeliveryRecord;
  task: PushTaskView;
  remoteTaskId: string | undefined;
}

/** The agent's task behind a hub task. */
export interface PushTaskRecord {
  taskId: string;
  agentId: string;
  tenantId: string;
  endpointUrl: string;
  remoteTaskId: string;
  followDelayMs: number;
  cancelRequested: boolean;
}

interface PushTaskRow {
  task_id: string;
  agent_id: string;
  tenant_id: string;
  endpoint_url: string;
  remote_task_id: string;
  follow_delay_ms: number;
  cancel_requested: boolean;
}

const PUSH_TASK_COLUMNS = 'p.task_id, p.agent_id, a.tenant_id, a.endpoint_url, p.remote_task_id, p.follow_delay_ms, p.cancel_requested';

const toPushTask = (r: PushTaskRow): PushTaskRecord => ({
  taskId: r.task_id,
  agentId: r.agent_id,
  tenantId: r.tenant_id,
  endpointUrl: r.endpoint_url,
  remoteTaskId: r.remote_task_id,
  followDelayMs: r.follow_delay_ms,
  cancelRequested: r.cancel_requested,
});

/** Most push agents whose recording PushStore remembers; past it the memory starts over. */
const REMEMBERED_PUSH_AGENTS = 10_000;

/**
 * Push agents, their deliveries and the agents' tasks behind hub tasks (push.ts; migrations 002
 * and 009). The worker's claims are each one statement (FOR UPDATE SKIP LOCKED in a CTE), so
 * replicas share the work without waiting on each other. `wallNow` and leases are wall-clock ms;
 * `queueNow` is the service clock the deliveries' expiry runs on.
 */
export class PushStore {
  /**
   * Per agent, the endpoint and tenant this process last recorded, and until when that spares a
   * send to the agent the statement: every send to a push agent records them. Rows of push_agents
   * are never deleted, but another replica may record other values meanwhile (an endpoint changed
   * and changed back, while this replica's recipient cache still held the first), so a memory
   * lasts as long as a recipient cache entry: an endpoint reaches push_agents as soon as before.
   */
  readonly #recorded = new Map<string, { values: string; until: number }>();

  constructor(
    private readonly db: Db,
    private readonly rememberMs = RECIPIENT_TTL_MS,
  ) {}

  /** Records a push agent's endpoint and tenant (a changed endpoint starts without backoff). */
  async recordPushAgent(signal: AbortSignal, agentId: string, endpointUrl: string, tenantId: string): Promise<void> {
    const values = `${endpointUrl} ${tenantId}`;
    const known = this.#recorded.get(agentId);
    if (known?.values === values && performance.now() < known.until) return;
    await this.db.query(
      `INSERT INTO push_agents (agent_id, endpoint_url, tenant_id) VALUES ($1, $2, $3)
       ON CONFLICT (agent_id) DO UPDATE SET endpoint_url = EXCLUDED.endpoint_url, tenant_id = EXCLUDED.tenant_id,
         failures = CASE WHEN push_agents.endpoint_url <> EXCLUDED.endpoint_url THEN 0 ELSE push_agents.failures END,
         retry_at = CASE WHEN push_agents.endpoint_url <> EXCLUDED.endpoint_url THEN 0 ELSE push_agents.retry_at END
        WHERE push_agents.endpoint_url <> EXCLUDED.endpoint_url OR push_agents.tenant_id <> EXCLUDED.tenant_id`,
      [agentId, endpointUrl, tenantId],
      signal,
    );
    if (this.#recorded.size >= REMEMBERED_PUSH_AGENTS) this.#recorded.clear();
    this.#recorded.set(agentId, { values, until: performance.now() + this.rememberMs });
  }

  /**
   * Claims up to `max` push agents with visible deliveries and no backoff pending, none of a tenant
   * in `busyTenants`, leasing each until `leaseUntil` so one worker at a time forwards an agent's
   * queue. The agent claimable longest comes first: one handed back after its turn waits behind
   * the others. `waiting`: the busy tenants that have such agents left unclaimed.
   */
  async claimPushAgents(
    signal: AbortSignal,
    queueNow: number,
    wallNow: number,
    leaseUntil: number,
    max: number,
    busyTenants: readonly string[],
  ): Promise<{ agents: PushAgentRecord[]; waiting: string[] }> {
    const { rows } = await this.db.query<{ agent_id: string | null; tenant_id: string; endpoint_url: string | null; failures: number | null }>(
      `WITH due AS (
         SELECT a.agent_id, a.tenant_id, greatest(a.retry_at, a.claimed_until) AS since FROM push_agents a
          WHERE a.retry_at <= $2 AND a.claimed_until <= $2
            AND EXISTS (SELECT 1 FROM deliveries d
                         WHERE d.recipient_agent_id = a.agent_id AND d.claimed_until <= $1 AND d.expires_at > $1)
       ), picked AS (
         SELECT a.agent_id FROM push_agents a JOIN due USING (agent_id)
          WHERE NOT (due.tenant_id = ANY($5::text[]))
          ORDER BY due.since LIMIT $4 FOR UPDATE OF a SKIP LOCKED
       ), claimed AS (
         UPDATE push_agents a SET claimed_until = $3 FROM picked WHERE a.agent_id = picked.agent_id
         RETURNING a.agent_id, a.tenant_id, a.endpoint_url, a.failures
       )
       SELECT agent_id, tenant_id, endpoint_url, failures FROM claimed
       UNION ALL
       SELECT DISTINCT NULL, tenant_id, NULL::text, NULL::integer FROM due WHERE tenant_id = ANY($5::text[])`,
      [queueNow, wallNow, leaseUntil, max, [...busyTenants]],
      signal,
    );
    return {
      agents: rows
        .filter((r) => r.agent_id !== null)
        .map((r) => ({ agentId: r.agent_id!, tenantId: r.tenant_id, endpointUrl: r.endpoint_url!, failures: r.failures! })),
      waiting: rows.filter((r) => r.agent_id === null).map((r) => r.tenant_id),
    };
  }

  /** Extends the lease on an agent whose queue the worker is still forwarding. */
  async renewPushAgent(signal: AbortSignal, agentId: string, leaseUntil: number): Promise<void> {
    await this.db.query('UPDATE push_agents SET claimed_until = $2 WHERE agent_id = $1', [agentId, leaseUntil], signal);
  }

  /**
   * Ends the lease on an agent, with its failed attempts in a row and when to try it again (0: at
   * once). The lease ends at `wallNow` rather than 0, so the claim order puts it behind agents that
   * waited longer.
   */
  async releasePushAgent(signal: AbortSignal, agentId: string, failures: number, retryAt: number, wallNow: number): Promise<void> {
    await this.db.query(
      'UPDATE push_agents SET claimed_until = $4, failures = $2, retry_at = $3 WHERE agent_id = $1',
      [agentId, failures, retryAt, wallNow],
      signal,
    );
  }

  /**
   * Claims up to `max` of the agent's visible deliveries, oldest first, hiding them until
   * `claimUntil`, with their tasks and the agent's tasks behind them; ordered oldest first.
   */
  async claimPushDeliveries(signal: AbortSignal, agentId: string, queueNow: number, claimUntil: number, max: number): Promise<ClaimedDelivery[]> {
    const { rows } = await this.db.query<{
      seq: string;
      id: string;
      task_id: string;
      message: unknown;
      created_at: number | string;
      attempts: number;
      traceparent: string | null;
      state: StateName;
      context_id: string;
      sender_agent_id: string;
      sender_tenant_id: string;
      recipient_agent_id: string;
      remote_task_id: string | null;
    }>(
      `WITH picked AS (
         SELECT seq FROM deliveries
          WHERE recipient_agent_id = $1 AND claimed_until <= $2 AND expires_at > $2
          ORDER BY seq LIMIT $4 FOR UPDATE SKIP LOCKED
       )
       UPDATE deliveries d SET claimed_until = $3, attempts = d.attempts + 1
         FROM picked, tasks t LEFT JOIN push_tasks p ON p.task_id = t.id
        WHERE d.seq = picked.seq AND t.id = d.task_id
        RETURNING d.seq, d.id, d.task_id, d.message, d.created_at, d.attempts, d.traceparent,
                  t.state, t.context_id, t.sender_agent_id, t.sender_tenant_id, t.recipient_agent_id, p.remote_task_id`,
      [agentId, queueNow, claimUntil, max],
      signal,
    );
    return rows
      .sort((a, b) => Number(a.seq) - Number(b.seq))
      .map((r) => ({
        delivery: toDelivery(r),
        task: {
          id: r.task_id,
          state: r.state,
          contextId: r.context_id,
          senderAgentId: r.sender_agent_id,
          senderTenantId: r.sender_tenant_id,
          recipientAgentId: r.recipient_agent_id,
        },
        remoteTaskId: r.remote_task_id ?? undefined,
      }));
  }

  /** The agent's task behind a hub task, when the hub task went to a push agent that answered. */
  async getPushTask(signal: AbortSignal, taskId: string): Promise<PushTaskRecord | undefined> {
    const { rows } = await this.db.query<PushTaskRow>(
      `SELECT ${PUSH_TASK_COLUMNS} FROM push_tasks p JOIN push_agents a USING (agent_id) WHERE p.task_id = $1`,
      [taskId],
      signal,
    );
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

  /**
   * Claims up to `max` push tasks due for a follow-up (or a cancel), none of an agent in
   * `busyAgents` or a tenant in `busyTenants`, leasing them until `leaseUntil`.
   */
  async claimPushFollowUps(
    signal: AbortSignal,
    wallNow: number,
    leaseUntil: number,
    max: number,
    busyTenants: readonly string[],
    busyAgents: readonly string[],
  ): Promise<PushTaskRecord[]> {
    const { rows } = await this.db.query<PushTaskRow>(
      `WITH picked AS (
         SELECT p.task_id FROM push_tasks p JOIN push_agents a USING (agent_id)
          WHERE p.follow_at <= $1 AND NOT (a.tenant_id = ANY($4::text[])) AND NOT (p.agent_id = ANY($5::text[]))
          ORDER BY p.follow_at LIMIT $3 FOR UPDATE OF p SKIP LOCKED
       )
       UPDATE push_tasks p SET follow_at = $2 FROM picked, push_agents a
        WHERE p.task_id = picked.task_id AND a.agent_id = p.agent_id
        RETURNING ${PUSH_TASK_COLUMNS}`,
      [wallNow, leaseUntil, max, [...busyTenants], [...busyAgents]],
      signal,
    );
    return rows.map(toPushTask);
  }

  /** Makes a claimed follow-up due again at once: the worker had no slot for it after all. */
  async releasePushFollowUp(signal: AbortSignal, taskId: string, wallNow: number): Promise<void> {
    await this.db.query('UPDATE push_tasks SET follow_at = $2 WHERE task_id = $1 AND follow_at IS NOT NULL', [taskId, wallNow], signal);
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
