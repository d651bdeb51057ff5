-- Task versions and the transitions that made them, so task streams can resume after a version
-- without losing a change (SubscribeToTask with Last-Event-ID). Transitions go when their task does.

ALTER TABLE tasks ADD COLUMN version bigint NOT NULL DEFAULT 1;

CREATE TABLE task_transitions (
  task_id    text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  version    bigint NOT NULL,
  state      text NOT NULL,
  updated_at bigint NOT NULL,
  -- What this version appended, in agenthub.messaging.v1 proto JSON.
  messages   jsonb NOT NULL DEFAULT '[]',
  artifacts  jsonb NOT NULL DEFAULT '[]',
  PRIMARY KEY (task_id, version)
);

-- ListTasks: the caller's tasks as sender or recipient, most recently updated first.
CREATE INDEX tasks_sender_updated_idx ON tasks (sender_agent_id, updated_at DESC, id DESC);
CREATE INDEX tasks_recipient_updated_idx ON tasks (recipient_agent_id, updated_at DESC, id DESC);
