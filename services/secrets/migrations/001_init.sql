-- Envelope-encrypted workspace secrets. Timestamps are epoch milliseconds. No column ever holds a
-- plaintext value or an unwrapped key.

-- One random data key per workspace, wrapped (AES-256-GCM) under a version of the key-encryption
-- key. Deleting the row destroys the key and, by cascade, every ciphertext sealed under it.
CREATE TABLE workspace_keys (
  workspace_id text PRIMARY KEY,
  -- 1 for the first data key, +1 on every RotateWorkspaceKey.
  generation   integer NOT NULL CHECK (generation > 0),
  -- The KEK version that wrapped the key, e.g. 'v2'; RotateKek moves every row to the newest.
  kek_version  text NOT NULL,
  -- nonce(12) ‖ wrapped key(32) ‖ tag(16), the workspace id and KEK version bound as AAD.
  wrapped_key  bytea NOT NULL,
  created_at   bigint NOT NULL,
  rotated_at   bigint NOT NULL
);

-- RotateKek finds the keys still wrapped under an older version.
CREATE INDEX workspace_keys_kek_version_idx ON workspace_keys (kek_version);

CREATE TABLE secrets (
  workspace_id   text NOT NULL REFERENCES workspace_keys (workspace_id) ON DELETE CASCADE,
  key            text NOT NULL,
  -- The data key generation the value is sealed under.
  key_generation integer NOT NULL,
  -- 12 random bytes, fresh for every write.
  nonce          bytea NOT NULL,
  -- AES-256-GCM ciphertext ‖ tag, with the workspace id and key bound as AAD.
  ciphertext     bytea NOT NULL,
  created_at     bigint NOT NULL,
  updated_at     bigint NOT NULL,
  created_by     text NOT NULL,
  updated_by     text NOT NULL,
  PRIMARY KEY (workspace_id, key)
);

-- Events of this service (workspace.secret.set, workspace.secret.deleted), written in the same
-- transaction as the change; never a value. Shape of OUTBOX_TABLE_SQL (libs/runtime/src/outbox.ts).
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
