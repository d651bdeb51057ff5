-- Tasks between agents and the durable queue of deliveries to their recipients. Timestamps are
-- epoch milliseconds.

CREATE TABLE tasks (
  id                 text PRIMARY KEY,
  context_id         text NOT NULL,
  sender_agent_id    text NOT NULL,
  sender_tenant_id   text NOT NULL,
  recipient_agent_id text NOT NULL,
  -- submitted, working, input-required, completed, failed, canceled, rejected
  state              text NOT NULL,
  -- Messages and artifacts in agenthub.messaging.v1 proto JSON, oldest first.
  messages           jsonb NOT NULL DEFAULT '[]',
  artifacts          jsonb NOT NULL DEFAULT '[]',
  created_at         bigint NOT NULL,
  updated_at         bigint NOT NULL
);
CREATE INDEX tasks_context_idx ON tasks (context_id);

-- One row per message waiting for its recipient; deleted when acknowledged, purged on cancel,
-- swept (failing a still-submitted task) once expires_at passes. A poll claims rows with
-- FOR UPDATE SKIP LOCKED and hides them until claimed_until; an unacknowledged row comes back
-- with the same id (at-least-once).
CREATE TABLE deliveries (
  seq                bigserial PRIMARY KEY,
  id                 text NOT NULL UNIQUE,
  task_id            text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  recipient_agent_id text NOT NULL,
  message            jsonb NOT NULL,
  created_at         bigint NOT NULL,
  expires_at         bigint NOT NULL,
  claimed_until      bigint NOT NULL DEFAULT 0,
  attempts           integer NOT NULL DEFAULT 0
);
CREATE INDEX deliveries_recipient_idx ON deliveries (recipient_agent_id, seq);
CREATE INDEX deliveries_expiry_idx ON deliveries (expires_at);
CREATE INDEX deliveries_task_idx ON deliveries (task_id);

-- Events of this service (messaging.task.*), written in the same transaction as the transition.
-- Shape of OUTBOX_TABLE_SQL (libs/runtime/src/outbox.ts).
CREATE TABLE outbox (
  seq          bigserial PRIMARY KEY,
  event_id     text NOT NULL UNIQUE,
  topic        text NOT NULL,
  partition_key text NOT NULL,
  type         text NOT NULL,
  payload      jsonb NOT NULL,
  created_at   bigint NOT NULL,
  published_at bigint
);
CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_at IS NULL;
