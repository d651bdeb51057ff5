-- The operator's overrides of the gateway's rate limits for a tenant (`agenthub tenants limits`):
-- {"key": {"per_sec", "burst"}, "tenant": {…}, "max_waiting_per_agent"}; empty keeps the defaults.
ALTER TABLE tenants ADD COLUMN limits jsonb NOT NULL DEFAULT '{}'::jsonb;
