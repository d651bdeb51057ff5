-- Memories and, for the embedded vector store, their vectors. Timestamps are epoch milliseconds.

CREATE TABLE memories (
  id             text PRIMARY KEY,
  workspace_id   text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  content        text NOT NULL,
  -- Exact-duplicate detection: one memory per content per workspace.
  content_sha256 text NOT NULL,
  type           text NOT NULL CHECK (type IN ('fact', 'decision', 'preference', 'todo', 'context', 'reference')),
  tags           text[] NOT NULL DEFAULT '{}',
  -- The embedding model of the memory's vector; a re-embed moves it to the configured model.
  model          text NOT NULL,
  created_at     bigint NOT NULL,
  created_by     text NOT NULL,
  updated_at     bigint NOT NULL,
  updated_by     text NOT NULL,
  UNIQUE (workspace_id, content_sha256)
);

-- Listing pages through a workspace by (created_at, id).
CREATE INDEX memories_workspace_created_idx ON memories (workspace_id, created_at, id);
CREATE INDEX memories_workspace_model_idx ON memories (workspace_id, model);

-- The embedded vector store (used when QDRANT_URL is not set): float32 little-endian vectors,
-- L2-normalised, with the fields searches filter on.
CREATE TABLE memory_vectors (
  workspace_id text NOT NULL,
  model        text NOT NULL,
  memory_id    text NOT NULL,
  dimensions   integer NOT NULL,
  vector       bytea NOT NULL,
  type         text NOT NULL,
  tags         text[] NOT NULL DEFAULT '{}',
  created_at   bigint NOT NULL,
  -- The set's generation when the row was last written (see memory_vector_generations).
  generation   bigint NOT NULL,
  PRIMARY KEY (workspace_id, model, memory_id)
);

CREATE INDEX memory_vectors_generation_idx ON memory_vectors (workspace_id, model, generation);

-- One row per (workspace, model) vector set, moved forward by every write to the set, so that
-- each process's cached copy of a set knows when, and which rows, to re-read.
CREATE SEQUENCE memory_vector_generation_seq;
CREATE TABLE memory_vector_generations (
  workspace_id text NOT NULL,
  model        text NOT NULL,
  generation   bigint NOT NULL,
  PRIMARY KEY (workspace_id, model)
);

-- The transactional outbox (libs/runtime/src/outbox.ts, OUTBOX_TABLE_SQL's shape), unless an
-- earlier migration created it.
CREATE TABLE IF NOT EXISTS outbox (
  seq          bigserial PRIMARY KEY,
  event_id     text NOT NULL UNIQUE,
  topic        text NOT NULL,
  partition_key text NOT NULL,
  type         text NOT NULL,
  payload      jsonb NOT NULL,
  created_at   bigint NOT NULL,
  published_at bigint
);
CREATE INDEX IF NOT EXISTS outbox_unpublished ON outbox (seq) WHERE published_at IS NULL;
