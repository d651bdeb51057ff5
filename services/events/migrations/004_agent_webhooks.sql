-- Agent-wide webhooks (workspace_id = ''): every workspace their creator (created_by) owns or
-- administers, including ones created later. Deliveries are matched as the creator, so its tenant
-- is kept to ask the workspace service for the creator's role.
ALTER TABLE webhooks ADD COLUMN agent_tenant_id text;
CREATE INDEX webhooks_agent_idx ON webhooks (created_by) WHERE workspace_id = '';
