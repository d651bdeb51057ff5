import type { Bus, Db, Metrics } from '@agenthub/runtime';

/**
 * What SREs alert on in the events service, read when Prometheus scrapes: webhook deliveries
 * waiting per endpoint (through the pending partial index) and how far the consumer group is
 * behind the event log; and each tenant's use of the agent-wide webhooks quota (workspace
 * webhooks are left out: this service does not know a workspace's tenant). Returns how to stop
 * reporting them.
 */
export function reportBacklog(metrics: Metrics, db: Db, bus: Bus, consumer: { group: string; topics: string[] }, maxWebhooks: number): () => void {
  const stops = [
    metrics.backlog('agenthub_webhook_deliveries_pending', 'Webhook deliveries not yet delivered or given up, per webhook', ['webhook_id'], async () => {
      const { rows } = await db.query<{ webhook_id: string; n: number; oldest: string | number }>(
        `SELECT webhook_id, count(*)::int AS n, min(created_at) AS oldest FROM deliveries WHERE status = 'pending' GROUP BY webhook_id`,
      );
      return rows.map((row) => ({ labels: { webhook_id: row.webhook_id }, count: row.n, oldestMs: Number(row.oldest) }));
    }),
    metrics.quotaUsage(async () => {
      // The quota's own count (webhook-store.ts createWebhook), of each tenant's fullest agent.
      const { rows } = await db.query<{ tenant: string; n: number }>(
        `SELECT tenant, max(n)::int AS n FROM (
           SELECT agent_tenant_id AS tenant, count(*) AS n FROM webhooks
            WHERE workspace_id = '' AND workspace_deleted_at IS NULL AND agent_tenant_id IS NOT NULL
            GROUP BY agent_tenant_id, created_by
         ) AS agents GROUP BY tenant`,
      );
      return rows.map((row) => ({ tenant: row.tenant, quota: 'webhooks_per_agent', used: row.n, limit: maxWebhooks }));
    }),
  ];
  if (bus.consumerLag) {
    const lag = bus.consumerLag.bind(bus);
    stops.push(
      metrics.gauge('agenthub_event_log_consumer_lag', 'Messages of the event log the consumer group has not handled yet, by group and topic.', ['group', 'topic'], async () =>
        (await lag(consumer.group, consumer.topics)).map((row) => ({ labels: { group: consumer.group, topic: row.topic }, value: row.messages })),
      ),
    );
  }
  return () => stops.forEach((stop) => stop());
}
