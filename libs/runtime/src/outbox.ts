import { randomUUID } from 'node:crypto';
import type { Queryable } from './db/index.js';
import { currentTraceparent } from './tracing.js';

/**
 * The transactional outbox every service writes its events to, in the same transaction as the
 * change they announce; a relay publishes the rows in order (the events issue). Each service's
 * migrations create the table in its own schema with `OUTBOX_TABLE_SQL`'s shape.
 */
export const OUTBOX_TABLE_SQL = `
CREATE TABLE outbox (
  seq          bigserial PRIMARY KEY,
  event_id     text NOT NULL UNIQUE,
  topic        text NOT NULL,
  partition_key text NOT NULL,
  type         text NOT NULL,
  payload      jsonb NOT NULL,
  created_at   bigint NOT NULL,
  published_at bigint,
  -- The trace of the call that wrote the event (W3C traceparent), when tracing is on.
  traceparent  text
);
CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_at IS NULL;
`;

/** Topic of workspace events, keyed by workspace id so each workspace's events stay in order. */
export const WORKSPACE_EVENTS_TOPIC = 'agenthub.workspace.events';

export interface OutboxEvent {
  topic: string;
  /** Events with the same key are delivered in the order they were written. */
  partitionKey: string;
  /** e.g. `workspace.memory.stored`. */
  type: string;
  /** The event's `data`; must never hold a secret value. */
  data: Record<string, unknown>;
}

/** The payload as subscribers receive it: `{ event, timestamp, data }` (interface, Events). */
export interface EventPayload {
  event: string;
  timestamp: string;
  data: Record<string, unknown>;
}

/**
 * The channel whoever writes outbox rows notifies (`Queryable.notify`, payload: the schema
 * written to), so the relays of that schema in every process publish them once they commit.
 */
export const OUTBOX_CHANNEL = 'agenthub_outbox';

/** The outbox row's columns, in the order `OUTBOX_INSERT_COLUMNS` names them. */
export const OUTBOX_INSERT_COLUMNS = 'event_id, topic, partition_key, type, payload, created_at, traceparent';

/**
 * One event's values for `OUTBOX_INSERT_COLUMNS`, with the active trace context, for a statement
 * that writes the event together with its change (one round trip instead of a transaction of several).
 */
export function outboxValues(
  event: OutboxEvent,
  now = new Date(),
  traceparent: string | null = currentTraceparent() ?? null,
): [string, string, string, string, string, number, string | null] {
  const payload: EventPayload = { event: event.type, timestamp: now.toISOString(), data: event.data };
  return [`evt_${randomUUID()}`, event.topic, event.partitionKey, event.type, JSON.stringify(payload), now.getTime(), traceparent];
}

/**
 * Appends one event inside the caller's transaction, with the active trace context, and notifies
 * OUTBOX_CHANNEL so the relays publish it as soon as the transaction commits; returns its id.
 */
export async function appendEvent(tx: Queryable, event: OutboxEvent, now = new Date()): Promise<string> {
  const values = outboxValues(event, now);
  const { rows } = await tx.query<{ schema: string }>(
    `INSERT INTO outbox (${OUTBOX_INSERT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING current_schema() AS schema`,
    values,
  );
  tx.notify(OUTBOX_CHANNEL, rows[0]!.schema);
  return values[0];
}
