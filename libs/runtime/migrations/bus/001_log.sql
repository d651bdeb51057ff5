-- The embedded event log (DbBus): every topic in one table ordered by a global offset, the last
-- offset each consumer group handled per topic, and one lease per group naming the member that
-- consumes for it. Times are epoch milliseconds of the database clock, shared by every process.
CREATE TABLE messages (
  "offset"   bigserial PRIMARY KEY,
  topic      text NOT NULL,
  key        text NOT NULL,
  value      text NOT NULL,
  headers    jsonb NOT NULL,
  created_at bigint NOT NULL
);
CREATE INDEX messages_topic_offset ON messages (topic, "offset");

CREATE TABLE group_offsets (
  group_id  text NOT NULL,
  topic     text NOT NULL,
  committed bigint NOT NULL,
  PRIMARY KEY (group_id, topic)
);

CREATE TABLE group_leases (
  group_id   text PRIMARY KEY,
  member_id  text NOT NULL,
  expires_at bigint NOT NULL
);
