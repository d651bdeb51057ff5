-- Webhook subscriptions and their deliveries. Timestamps are epoch milliseconds.

CREATE TABLE webhooks (
  id            text PRIMARY KEY,
  -- Creation order (created_at may tie).
  seq           bigserial UNIQUE,
  workspace_id  text NOT NULL,
  url           text NOT NULL,
  -- Event types delivered; empty means every type.
  event_types   text[] NOT NULL,
  description   text NOT NULL,
  -- `whsec_…` signing secrets. Kept readable because every delivery is signed with them; never
  -- logged, and shown to callers only on creation and rotation.
  secret        text NOT NULL,
  -- The secret before the last rotation, which keeps signing until previous_expires_at.
  previous_secret     text,
  previous_expires_at bigint,
  enabled         boolean NOT NULL DEFAULT true,
  -- 'gone' (410) or 'failing' (failed continuously for the configured time).
  disabled_reason text,
  disabled_at     bigint,
  -- Start of the current run of failed attempts; cleared by a success.
  failing_since   bigint,
  -- Set when workspace.deleted was consumed: no new deliveries, and the row goes once its
  -- pending deliveries are done.
  workspace_deleted_at bigint,
  created_at    bigint NOT NULL,
  created_by    text NOT NULL
);
CREATE INDEX webhooks_workspace_idx ON webhooks (workspace_id, seq);

-- One row per (webhook, event): the consumer inserts them idempotently before committing its
-- offset; workers claim due ones with FOR UPDATE SKIP LOCKED and a lease.
CREATE TABLE deliveries (
  -- Event order within a webhook (the consumer inserts in the order the bus hands events over).
  seq             bigserial PRIMARY KEY,
  webhook_id      text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
  event_id        text NOT NULL,
  event_type      text NOT NULL,
  -- The request body, byte for byte as the outbox wrote it.
  payload         text NOT NULL,
  status          text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  -- When a pending delivery is due; null otherwise.
  next_attempt_at bigint,
  -- A worker holds the delivery until then; a crashed worker's claim lapses.
  lease_until     bigint,
  -- Failed attempts since the delivery was (re)queued: the position in the retry schedule.
  failures        integer NOT NULL DEFAULT 0,
  created_at      bigint NOT NULL,
  UNIQUE (webhook_id, event_id)
);
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_webhook_idx ON deliveries (webhook_id, seq);

CREATE TABLE attempts (
  id           bigserial PRIMARY KEY,
  delivery_seq bigint NOT NULL REFERENCES deliveries (seq) ON DELETE CASCADE,
  at           bigint NOT NULL,
  -- 0 when no HTTP response arrived.
  status_code  integer NOT NULL,
  latency_ms   integer NOT NULL,
  error        text NOT NULL
);
CREATE INDEX attempts_delivery_idx ON attempts (delivery_seq, id);
