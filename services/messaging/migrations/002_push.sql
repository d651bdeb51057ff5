-- Push agents: recipients with an A2A endpoint, whose deliveries the push worker forwards
-- (src/push.ts). Scheduling columns (retry_at, claimed_until, follow_at) are wall-clock epoch
-- milliseconds: they pace network calls, while the queue's own expiry stays on the service clock.

-- One row per push agent, written when a message is sent to it. A worker claims the agent
-- (claimed_until, FOR UPDATE SKIP LOCKED) to forward its queue in order; while the endpoint does
-- not answer, failures counts the attempts in a row and retry_at holds the next one back.
CREATE TABLE push_agents (
  agent_id      text PRIMARY KEY,
  endpoint_url  text NOT NULL,
  failures      integer NOT NULL DEFAULT 0,
  retry_at      bigint NOT NULL DEFAULT 0,
  claimed_until bigint NOT NULL DEFAULT 0
);

-- The agent's own task behind a hub task (A2A continuations and cancels name it). While the
-- agent works, follow_at is when to ask it again (GetTask, backing off by follow_delay_ms);
-- NULL once it settled. A hub cancel sets cancel_requested and makes the row due at once.
CREATE TABLE push_tasks (
  task_id          text PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
  agent_id         text NOT NULL,
  remote_task_id   text NOT NULL,
  follow_at        bigint,
  follow_delay_ms  integer NOT NULL DEFAULT 0,
  cancel_requested boolean NOT NULL DEFAULT false
);
CREATE INDEX push_tasks_follow_idx ON push_tasks (follow_at) WHERE follow_at IS NOT NULL;
