import { detachedSignal, type Db, type Metrics } from '@agenthub/runtime';
import { IN_FLIGHT, UPDATABLE } from '@agenthub/tasks';
import type { MessagingEnv } from './env.js';

/** States a task leaves (the open ones); final states only grow, and counting them would scan every task. */
const ACTIVE_STATES = [...UPDATABLE];
const sqlList = (states: Iterable<string>) => [...states].map((state) => `'${state}'`).join(', ');

/**
 * What SREs alert on in the messaging service, read when Prometheus scrapes: deliveries queued
 * for connected agents (their inboxes, in total: one series per agent would be unbounded),
 * deliveries queued per push agent (one series per registered push endpoint), and tasks in each
 * active state; and each tenant's use of the tasks-in-flight and queued-deliveries quotas. Returns
 * how to stop reporting them.
 */
export function reportBacklog(metrics: Metrics, db: Db, env: Pick<MessagingEnv, 'deliveries' | 'overrides' | 'limits'>): () => void {
  const { maxTasksInFlightPerSender, maxQueuedDeliveriesPerAgent } = env.limits;
  // One read of the queue feeds both families (inbox totals and push per agent).
  let last: { at: number; rows: Promise<{ agent_id: string; push: boolean; n: number; oldest: string | number }[]> } | undefined;
  const queue = () => {
    if (!last || Date.now() - last.at > 1_000) {
      last = {
        at: Date.now(),
        rows: db
          .query<{ agent_id: string; push: boolean; n: number; oldest: string | number }>(
            `SELECT d.recipient_agent_id AS agent_id, p.agent_id IS NOT NULL AS push, count(*)::int AS n, min(d.created_at) AS oldest
               FROM deliveries d LEFT JOIN push_agents p ON p.agent_id = d.recipient_agent_id
              GROUP BY d.recipient_agent_id, p.agent_id`,
          )
          .then((result) => result.rows),
      };
    }
    return last.rows;
  };
  const stops = [
    metrics.backlog('agenthub_inbox_deliveries_queued', 'Deliveries queued for connected agents (inbox poll or stream), all agents together', [], async () => {
      const inbox = (await queue()).filter((row) => !row.push);
      const oldest = inbox.reduce<number | null>((min, row) => (min === null || Number(row.oldest) < min ? Number(row.oldest) : min), null);
      return [{ labels: {}, count: inbox.reduce((sum, row) => sum + row.n, 0), oldestMs: oldest }];
    }),
    metrics.backlog('agenthub_push_deliveries_queued', 'Deliveries queued for a push agent, per agent', ['agent_id'], async () =>
      (await queue()).filter((row) => row.push).map((row) => ({ labels: { agent_id: row.agent_id }, count: row.n, oldestMs: Number(row.oldest) })),
    ),
    metrics.gauge('agenthub_tasks', 'Tasks in each active state (submitted, working, input-required).', ['state'], async () => {
      const { rows } = await db.query<{ state: string; n: number }>(`SELECT state, count(*)::int AS n FROM tasks WHERE state IN (${sqlList(ACTIVE_STATES)}) GROUP BY state`);
      const counts = new Map(rows.map((row) => [row.state, row.n]));
      return ACTIVE_STATES.map((state) => ({ labels: { state }, value: counts.get(state) ?? 0 }));
    }),
  ];
  if (Number.isFinite(maxTasksInFlightPerSender)) {
    // Each tenant's busiest sender against tasks_in_flight_per_sender; the partial index of
    // in-flight tasks keeps the read to those.
    stops.push(
      metrics.quotaUsage(async () => {
        const { rows } = await db.query<{ tenant: string; n: number }>(
          `SELECT tenant, max(n)::int AS n FROM (
             SELECT sender_tenant_id AS tenant, count(*) AS n FROM tasks WHERE state IN (${sqlList(IN_FLIGHT)}) GROUP BY sender_tenant_id, sender_agent_id
           ) AS senders GROUP BY tenant`,
        );
        return rows.map((row) => ({ tenant: row.tenant, quota: 'tasks_in_flight_per_sender', used: row.n, limit: maxTasksInFlightPerSender }));
      }),
    );
  }
  // Each tenant's fullest inbox against queued_deliveries_per_agent. Its overrides are asked (of
  // identity, through the cache the send's check uses) only for the `top` tenants with the fullest
  // inboxes, so a refresh costs at most that many identity calls however many tenants there are.
  stops.push(
    metrics.quotaUsage(async (top) => {
      const signal = detachedSignal();
      const fullest = (await env.deliveries.fullestInboxes(signal)).map((row) => ({ tenant: row.tenant, used: row.queued }));
      const rows = await env.overrides.nearest('queued_deliveries_per_agent', fullest, top, maxQueuedDeliveriesPerAgent, { signal });
      // Infinity: the quota is off for that tenant (no default, no override), as in the check.
      return rows.filter((row) => Number.isFinite(row.limit));
    }),
  );
  return () => stops.forEach((stop) => stop());
}
