-- A2A task push notification configs (src/task-push.ts): webhooks bound to one task, with
-- workspace_id 'task:<task id>', the client's config id, and what each delivery carries besides
-- its signature (the X-A2A-Notification-Token header, the Authorization header).
ALTER TABLE webhooks ADD COLUMN push_config_id text;
ALTER TABLE webhooks ADD COLUMN push_token text;
ALTER TABLE webhooks ADD COLUMN push_auth_scheme text;
ALTER TABLE webhooks ADD COLUMN push_auth_credentials text;
CREATE UNIQUE INDEX webhooks_push_config_idx ON webhooks (workspace_id, created_by, push_config_id) WHERE push_config_id IS NOT NULL;
