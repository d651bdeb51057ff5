-- A task's messages and artifacts, one row each: appending one inserts a row instead of rewriting
-- every earlier one, and reads take only the history they return. The task row keeps the totals
-- the limits (1000 messages, 1000 artifacts, MESSAGING_TASK_MAX_BYTES) are checked against before
-- each change commits.

CREATE TABLE task_items (
  task_id text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  -- 'message' or 'artifact'.
  kind    text NOT NULL,
  -- Position among the task's items of that kind, from 0.
  seq     integer NOT NULL,
  -- The message's messageId or the artifact's id ('' when it had none).
  item_id text NOT NULL,
  -- agenthub.messaging.v1 proto JSON.
  body    jsonb NOT NULL,
  -- Size of the body as serialized JSON (UTF-8 bytes).
  bytes   integer NOT NULL,
  PRIMARY KEY (task_id, kind, seq)
);

ALTER TABLE tasks
  ADD COLUMN message_count  integer NOT NULL DEFAULT 0,
  ADD COLUMN artifact_count integer NOT NULL DEFAULT 0,
  ADD COLUMN bytes          bigint NOT NULL DEFAULT 0;

INSERT INTO task_items (task_id, kind, seq, item_id, body, bytes)
SELECT t.id, 'message', m.ord - 1, coalesce(m.body ->> 'messageId', ''), m.body, octet_length(m.body::text)
  FROM tasks t CROSS JOIN LATERAL jsonb_array_elements(t.messages) WITH ORDINALITY AS m (body, ord);
INSERT INTO task_items (task_id, kind, seq, item_id, body, bytes)
SELECT t.id, 'artifact', a.ord - 1, coalesce(a.body ->> 'id', ''), a.body, octet_length(a.body::text)
  FROM tasks t CROSS JOIN LATERAL jsonb_array_elements(t.artifacts) WITH ORDINALITY AS a (body, ord);

UPDATE tasks t
   SET message_count = jsonb_array_length(t.messages),
       artifact_count = jsonb_array_length(t.artifacts),
       bytes = coalesce((SELECT sum(i.bytes) FROM task_items i WHERE i.task_id = t.id), 0);

ALTER TABLE tasks DROP COLUMN messages, DROP COLUMN artifacts;
