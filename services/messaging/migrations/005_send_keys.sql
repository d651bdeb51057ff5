-- Idempotent sends and conversations that belong to their participants (src/send-once.ts).

-- One row per (sender, messageId) sent within the idempotency window: a repeat of the same send
-- returns task_id instead of creating another task; body_hash tells a repeat from a different
-- message reusing the id. The row is written before the task, so task_id may name a task still
-- being created (or, briefly, one whose creation failed and whose row is about to go).
CREATE TABLE send_keys (
  sender_agent_id text NOT NULL,
  message_id      text NOT NULL,
  task_id         text NOT NULL,
  body_hash       text NOT NULL,
  created_at      bigint NOT NULL,
  PRIMARY KEY (sender_agent_id, message_id)
);
CREATE INDEX send_keys_created_idx ON send_keys (created_at);

-- Who first named a caller-chosen contextId that had no task yet. Two agents starting the same
-- new context at once cannot both win it; afterwards the context's tasks say who belongs to it.
CREATE TABLE context_claims (
  context_id text PRIMARY KEY,
  agent_id   text NOT NULL,
  created_at bigint NOT NULL
);
