-- The tenant of each delivery's recipient: the queued_deliveries_per_agent gauges (src/backlog.ts)
-- group the queue by tenant in one read, without asking identity whose agent each recipient is.
-- Rows written before this migration have ''; the read counts them with their recipient's newer
-- rows (which name its tenant), and they leave the queue when taken or expired.
ALTER TABLE deliveries ADD COLUMN recipient_tenant_id text NOT NULL DEFAULT '';
