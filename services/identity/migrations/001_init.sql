-- Identity: tenants, their agents, the agents' API keys, and access grants between agents of
-- different tenants. Timestamps are epoch milliseconds.

CREATE TABLE tenants (
  id         text PRIMARY KEY,
  name       text NOT NULL,
  created_at bigint NOT NULL
);

CREATE TABLE agents (
  id           text PRIMARY KEY,
  tenant_id    text NOT NULL REFERENCES tenants (id),
  name         text NOT NULL,
  -- Empty for agents that connect to the hub instead of being pushed to.
  endpoint_url text NOT NULL DEFAULT '',
  output_modes text[] NOT NULL DEFAULT '{}',
  created_at   bigint NOT NULL
);

CREATE INDEX agents_tenant_idx ON agents (tenant_id);

-- Only the SHA-256 of a key is kept; the key itself is shown once, when issued.
CREATE TABLE api_keys (
  id         text PRIMARY KEY,
  agent_id   text NOT NULL REFERENCES agents (id),
  key_hash   text NOT NULL,
  prefix     text NOT NULL,
  created_at bigint NOT NULL,
  revoked_at bigint
);

CREATE UNIQUE INDEX api_keys_hash_idx ON api_keys (key_hash);
CREATE INDEX api_keys_agent_idx ON api_keys (agent_id);

CREATE TABLE grants (
  id                 text PRIMARY KEY,
  -- Insertion order, to list newest first when several grants share a millisecond.
  seq                bigint GENERATED ALWAYS AS IDENTITY,
  requester_agent_id text NOT NULL REFERENCES agents (id),
  target_agent_id    text NOT NULL REFERENCES agents (id),
  status             text NOT NULL CHECK (status IN ('pending', 'approved', 'revoked')),
  created_at         bigint NOT NULL,
  updated_at         bigint NOT NULL,
  CHECK (requester_agent_id <> target_agent_id)
);

-- At most one live grant per unordered pair of agents, whoever asked first; concurrent
-- requests in either direction collapse onto it.
CREATE UNIQUE INDEX grants_live_pair_idx
  ON grants ((LEAST(requester_agent_id, target_agent_id)), (GREATEST(requester_agent_id, target_agent_id)))
  WHERE status IN ('pending', 'approved');

CREATE INDEX grants_requester_idx ON grants (requester_agent_id);
CREATE INDEX grants_target_idx ON grants (target_agent_id);
