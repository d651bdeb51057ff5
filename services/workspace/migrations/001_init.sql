-- Workspaces and their members. Timestamps are epoch milliseconds.

CREATE TABLE workspaces (
  id              text PRIMARY KEY,
  name            text NOT NULL,
  description     text NOT NULL DEFAULT '',
  owner_agent_id  text NOT NULL,
  -- Kept so that access checks know which members are cross-tenant without asking identity.
  owner_tenant_id text NOT NULL,
  created_at      bigint NOT NULL
);

CREATE TABLE members (
  workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  agent_id     text NOT NULL,
  -- Copied from identity when the member is added, so listings need no call per member.
  agent_name   text NOT NULL,
  tenant_id    text NOT NULL,
  role         text NOT NULL CHECK (role IN ('read', 'write', 'admin')),
  -- The admin who added the member: a cross-tenant membership counts only while an approved
  -- grant links the member and this agent.
  added_by     text NOT NULL,
  added_at     bigint NOT NULL,
  PRIMARY KEY (workspace_id, agent_id)
);

-- ListWorkspaces looks memberships up by agent.
CREATE INDEX members_agent_id_idx ON members (agent_id);
