/**
 * The push worker's claims (migrations 002 and 008): push agents, their deliveries and the follow-ups
 * of their tasks, each claimed in one statement (FOR UPDATE SKIP LOCKED in a CTE, so replicas share
 * the work without waiting on each other). `wallNow` and leases are wall-clock ms; `queueNow` is
 * the service clock the deliveries' expiry runs on.
 */
import type { Db } from '@agenthub/runtime';
import type { DeliveryRecord, StateName, TaskRecord } from './store.js';

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

/** The agent's task behind a hub task, as a follow-up claims it. */
export interface FollowUpRecord {
  taskId: string;
  agentId: string;
  tenantId: string;
  endpointUrl: string;
  remoteTaskId: string;
  followDelayMs: number;
  cancelRequested: boolean;
}

const json = <T>(value: T | string): T => (typeof value === 'string' ? (JSON.parse(value) as T) : value);

export class PushQueue {
  constructor(private readonly db: Db) {}

  /**
   * Claims up to `max` push agents with visible deliveries and no backoff pending, none of a tenant
   * in `busyTenants`, leasing each until `leaseUntil` so one worker at a time forwards an agent's
   * queue. The agent claimable longest comes first: one handed back after its turn waits behind
   * the others. `waiting`: the busy tenants that have such agents left unclaimed.
   */
  async claimAgents(
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
    );
    return {
      agents: rows
        .filter((r) => r.agent_id !== null)
        .map((r) => ({ agentId: r.agent_id!, tenantId: r.tenant_id, endpointUrl: r.endpoint_url!, failures: r.failures! })),
      waiting: rows.filter((r) => r.agent_id === null).map((r) => r.tenant_id),
    };
  }

  /** Extends the lease on an agent whose queue the worker is still forwarding. */
  async renewAgent(agentId: string, leaseUntil: number): Promise<void> {
    await this.db.query('UPDATE push_agents SET claimed_until = $2 WHERE agent_id = $1', [agentId, leaseUntil]);
  }

  /**
   * Ends the lease on an agent, with its failed attempts in a row and when to try it again (0: at
   * once). The lease ends at `wallNow` rather than 0, so the claim order puts it behind agents that
   * waited longer.
   */
  async releaseAgent(agentId: string, failures: number, retryAt: number, wallNow: number): Promise<void> {
    await this.db.query('UPDATE push_agents SET claimed_until = $4, failures = $2, retry_at = $3 WHERE agent_id = $1', [agentId, failures, retryAt, wallNow]);
  }

  /**
   * Claims up to `max` of the agent's visible deliveries, oldest first, hiding them until
   * `claimUntil`, with their tasks and the agent's tasks behind them; ordered oldest first.
   */
  async claimDeliveries(agentId: string, queueNow: number, claimUntil: number, max: number): Promise<ClaimedDelivery[]> {
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
    );
    return rows
      .sort((a, b) => Number(a.seq) - Number(b.seq))
      .map((r) => ({
        delivery: {
          id: r.id,
          taskId: r.task_id,
          contextId: r.context_id,
          senderAgentId: r.sender_agent_id,
          message: json(r.message),
          createdAt: Number(r.created_at),
          attempts: r.attempts,
          ...(r.traceparent ? { traceparent: r.traceparent } : {}),
        },
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

  /**
   * Claims up to `max` push tasks due for a follow-up (or a cancel), none of an agent in
   * `busyAgents` or a tenant in `busyTenants`, leasing them until `leaseUntil`.
   */
  async claimFollowUps(wallNow: number, leaseUntil: number, max: number, busyTenants: readonly string[], busyAgents: readonly string[]): Promise<FollowUpRecord[]> {
    const { rows } = await this.db.query<{
      task_id: string;
      agent_id: string;
      tenant_id: string;
      endpoint_url: string;
      remote_task_id: string;
      follow_delay_ms: number;
      cancel_requested: boolean;
    }>(
      `WITH picked AS (
         SELECT p.task_id FROM push_tasks p JOIN push_agents a USING (agent_id)
          WHERE p.follow_at <= $1 AND NOT (a.tenant_id = ANY($4::text[])) AND NOT (p.agent_id = ANY($5::text[]))
          ORDER BY p.follow_at LIMIT $3 FOR UPDATE OF p SKIP LOCKED
       )
       UPDATE push_tasks p SET follow_at = $2 FROM picked, push_agents a
        WHERE p.task_id = picked.task_id AND a.agent_id = p.agent_id
        RETURNING p.task_id, p.agent_id, a.tenant_id, a.endpoint_url, p.remote_task_id, p.follow_delay_ms, p.cancel_requested`,
      [wallNow, leaseUntil, max, [...busyTenants], [...busyAgents]],
    );
    return rows.map((r) => ({
      taskId: r.task_id,
      agentId: r.agent_id,
      tenantId: r.tenant_id,
      endpointUrl: r.endpoint_url,
      remoteTaskId: r.remote_task_id,
      followDelayMs: r.follow_delay_ms,
      cancelRequested: r.cancel_requested,
    }));
  }

  /** Makes a claimed follow-up due again at once: the worker had no slot for it after all. */
  async releaseFollowUp(taskId: string, wallNow: number): Promise<void> {
    await this.db.query('UPDATE push_tasks SET follow_at = $2 WHERE task_id = $1 AND follow_at IS NOT NULL', [taskId, wallNow]);
  }
}
