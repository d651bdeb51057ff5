-- The tenant of each push agent: the push worker shares its delivery slots fairly between tenants
-- (src/push-slots.ts), so the claim skips agents of a tenant that holds its share. Rows written
-- before this migration have '' until the next send to the agent records its tenant.
ALTER TABLE push_agents ADD COLUMN tenant_id text NOT NULL DEFAULT '';
