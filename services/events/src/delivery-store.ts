import type { Db } from '@agenthub/runtime';
import { secretsOf } from './webhook-store.js';

export type DeliveryStatusText = 'pending' | 'delivered' | 'failed';

/** A claimed delivery with what sending it needs. */
export interface DueDelivery {
  seq: number;
  webhookId: string;
  /** The webhook's workspace: delivery slots are shared fairly between workspaces. */
  workspaceId: string;
  eventId: string;
  payload: string;
  failures: number;
  url: string;
  /** The current secret first, then the previous one while its window lasts. */
  secrets: string[];
  /** The webhook's creator, whose admin access each attempt needs. */
  createdBy: string;
  /** The workspace was deleted (its last event, workspace.deleted, still goes out). */
  retired: boolean;
  /** The trace of the call whose event this delivers (W3C traceparent), when traced. */
  traceparent?: string;
  /** Headers besides the signature: a task push config's token and authentication (task-push.ts). */
  headers: Record<string, string>;
}

export interface AttemptRecord {
  at: number;
  statusCode: number;
  latencyMs: number;
  error: string;
}

export interface DeliveryRecord {
  seq: number;
  eventId: string;
  event: string;
  status: DeliveryStatusText;
  nextAttemptAt: number;
  createdAt: number;
  attempts: AttemptRecord[];
}

/** What the worker decided after an attempt; applied with the attempt in one transaction. */
export type Outcome =
  | { kind: 'delivered' }
  | { kind: 'retry'; at: number }
  | { kind: 'failed' }
  | { kind: 'disable'; reason: 'gone' | 'failing' | 'creator_access' };

/** What a claim returns, from `deliveries d` joined to `webhooks w`. */
const DUE_COLUMNS =
  'd.seq, d.webhook_id, d.event_id, d.payload, d.failures, w.url, w.secret, w.previous_secret, w.previous_expires_at, w.workspace_id, w.created_by, w.workspace_deleted_at, d.traceparent, w.push_token, w.push_auth_scheme, w.push_auth_credentials';

/**
 * The claim of a set of heads (a CTE `heads` of webhook_id, seq, written before it): those due at
 * $1 and not leased, of enabled webhooks outside the busy workspaces ($4), oldest due first, at
 * most $2, locked (a head another worker holds is skipped) and leased until $1 + $3.
 */
const CLAIM_HEADS = `due AS (
         SELECT c.seq FROM heads h JOIN deliveries c ON c.seq = h.seq JOIN webhooks cw ON cw.id = c.webhook_id
          WHERE c.status = 'pending' AND c.next_attempt_at <= $1
            AND (c.lease_until IS NULL OR c.lease_until <= $1) AND cw.enabled
            AND NOT (cw.workspace_id = ANY($4::text[]))
          ORDER BY c.next_attempt_at, c.seq LIMIT $2
          FOR UPDATE OF c SKIP LOCKED
       ), claimed AS (
         UPDATE deliveries d SET lease_until = $1::bigint + $3::bigint
           FROM webhooks w
          WHERE d.seq IN (SELECT seq FROM due) AND w.id = d.webhook_id
          RETURNING ${DUE_COLUMNS}
       )`;

interface DueRow {
  seq: string | number;
  webhook_id: string;
  workspace_id: string;
  event_id: string;
  payload: string;
  failures: number;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_expires_at: string | number | null;
  created_by: string;
  workspace_deleted_at: string | number | null;
  traceparent: string | null;
  push_token: string | null;
  push_auth_scheme: string | null;
  push_auth_credentials: string | null;
}

function toDue(row: DueRow, now: number): DueDelivery {
  return {
    seq: Number(row.seq),
    webhookId: row.webhook_id,
    workspaceId: row.workspace_id,
    eventId: row.event_id,
    payload: row.payload,
    failures: row.failures,
    url: row.url,
    secrets: secretsOf(row, now),
    createdBy: row.created_by,
    retired: row.workspace_deleted_at !== null,
    ...(row.traceparent ? { traceparent: row.traceparent } : {}),
    headers: {
      ...(row.push_token ? { 'X-A2A-Notification-Token': row.push_token } : {}),
      ...(row.push_auth_scheme ? { Authorization: `${row.push_auth_scheme} ${row.push_auth_credentials ?? ''}`.trim() } : {}),
    },
  };
}

/**
 * The delivery queue of the events service: deliveries queued per webhook, their claims, attempts
 * and replays. bigint columns arrive as strings from pg.
 */
export class DeliveryStore {
  constructor(private readonly db: Db) {}

  /** Queues the event for the given (agent-wide) webhooks; idempotent like `intake`. */
  async intakeFor(signal: AbortSignal, webhookIds: string[], event: { eventId: string; type: string; payload: string; traceparent?: string }, now: number): Promise<string[]> {
    if (webhookIds.length === 0) return [];
    const { rows } = await this.db.query<{ webhook_id: string }>(
      `INSERT INTO deliveries (webhook_id, event_id, event_type, payload, status, next_attempt_at, created_at, traceparent)
       SELECT id, $2, $3, $4, 'pending', $5, $5, $6 FROM webhooks WHERE id = ANY ($1::text[]) ORDER BY seq
       ON CONFLICT (webhook_id, event_id) DO NOTHING
       RETURNING webhook_id`,
      [webhookIds, event.eventId, event.type, event.payload, now, event.traceparent ?? null],
      signal,
    );
    return rows.map((row) => row.webhook_id);
  }

  /**
   * One delivery per enabled webhook of the workspace whose filter matches and that existed when
   * the event happened (a consumer running behind must not hand a new webhook older events),
   * each queued due `now`. Idempotent: an event consumed again adds nothing. `workspace.deleted` also retires the
   * workspace's webhooks (after this, its last event, is delivered). Returns the webhooks a
   * delivery was queued for.
   */
  async intake(
    signal: AbortSignal,
    event: { workspaceId: string; eventId: string; type: string; payload: string; occurredAt: number | undefined; traceparent?: string },
    now: number,
  ): Promise<string[]> {
    // One statement (no BEGIN/COMMIT round trips): the consumer runs one event at a time, so its
    // round trips bound intake. Both parts read the statement's snapshot, so the retiring update
    // does not keep `workspace.deleted` itself from being queued.
    const { rows } = await this.db.query<{ webhook_id: string }>(
      `WITH queued AS (
         INSERT INTO deliveries (webhook_id, event_id, event_type, payload, status, next_attempt_at, created_at, traceparent)
         SELECT id, $2, $3, $4, 'pending', $5, $5, $7 FROM webhooks
          WHERE workspace_id = $1 AND enabled AND workspace_deleted_at IS NULL
            AND (cardinality(event_types) = 0 OR $3 = ANY (event_types))
            AND ($6::bigint IS NULL OR created_at <= $6::bigint)
          ORDER BY seq
         ON CONFLICT (webhook_id, event_id) DO NOTHING
         RETURNING webhook_id
       ), retired AS (
         UPDATE webhooks SET workspace_deleted_at = $5
          WHERE $3 = 'workspace.deleted' AND workspace_id = $1 AND workspace_deleted_at IS NULL
       )
       SELECT webhook_id FROM queued`,
      [event.workspaceId, event.eventId, event.type, event.payload, now, event.occurredAt ?? null, event.traceparent ?? null],
      signal,
    );
    return rows.map((row) => row.webhook_id);
  }

  /**
   * Claims up to `limit` due deliveries for `leaseMs`, skipping rows other workers hold. Only the
   * head of each webhook's queue is eligible, so a webhook's events go out one at a time in order,
   * and one waiting for its retry (or held by another worker) holds back those behind it. Heads
   * are locked after they are chosen, so a locked head is skipped, never the row behind it.
   * `nextDue` is when the earliest head left unclaimed falls due (or its lease lapses), for the
   * worker's sleep; it comes with the claim to spare the loop a round trip.
   */
  /**
   * `busyWorkspaces`: workspaces whose heads are skipped (they hold their share of the slots) and
   * left out of `nextDue` too: they wait for a slot of theirs to free, which wakes the worker.
   */
  async claimDue(signal: AbortSignal, now: number, limit: number, leaseMs: number, busyWorkspaces: readonly string[] = []): Promise<{ claimed: DueDelivery[]; nextDue: number | undefined }> {
    const { rows } = await this.db.query<Partial<DueRow> & { next_due: string | number | null }>(
      `WITH RECURSIVE heads AS (
         -- The first pending delivery of every webhook that has one, by a loose index scan over
         -- deliveries_pending_idx: one probe per such webhook, skipping the rest of its queue.
         (SELECT webhook_id, seq FROM deliveries WHERE status = 'pending' ORDER BY webhook_id, seq LIMIT 1)
         UNION ALL
         SELECT n.webhook_id, n.seq FROM heads h CROSS JOIN LATERAL (
           SELECT webhook_id, seq FROM deliveries
            WHERE status = 'pending' AND webhook_id > h.webhook_id ORDER BY webhook_id, seq LIMIT 1) n
       ), ${CLAIM_HEADS}
       SELECT claimed.*, (
         SELECT min(greatest(n.next_attempt_at, coalesce(n.lease_until, 0)))
           FROM heads h JOIN deliveries n ON n.seq = h.seq JOIN webhooks nw ON nw.id = n.webhook_id
          WHERE nw.enabled AND h.seq NOT IN (SELECT seq FROM due) AND NOT (nw.workspace_id = ANY($4::text[]))
       ) AS next_due
       FROM (VALUES (1)) AS one LEFT JOIN claimed ON true`,
      [now, limit, leaseMs, [...busyWorkspaces]],
      signal,
    );
    const nextDue = rows[0]?.next_due;
    return {
      claimed: rows.filter((row) => row.seq !== null && row.seq !== undefined).map((row) => toDue(row as DueRow, now)),
      nextDue: nextDue === null || nextDue === undefined ? undefined : Number(nextDue),
    };
  }

  /**
   * Claims, as `claimDue` does, the due heads of `webhookIds` alone (those with deliveries just
   * queued), skipping `busyWorkspaces`: one index probe per webhook instead of one per webhook
   * with pending work, and no `nextDue`.
   */
  async claimHeads(signal: AbortSignal, now: number, webhookIds: readonly string[], limit: number, leaseMs: number, busyWorkspaces: readonly string[]): Promise<DueDelivery[]> {
    const { rows } = await this.db.query<DueRow>(
      `WITH heads AS (
         SELECT h.webhook_id, h.seq FROM unnest($5::text[]) AS ids (id) CROSS JOIN LATERAL (
           SELECT webhook_id, seq FROM deliveries WHERE status = 'pending' AND webhook_id = ids.id ORDER BY seq LIMIT 1) h
       ), ${CLAIM_HEADS}
       SELECT * FROM claimed`,
      [now, limit, leaseMs, [...busyWorkspaces], [...webhookIds]],
      signal,
    );
    return rows.map((row) => toDue(row, now));
  }

  /** Gives a claimed delivery back unattempted (shutdown), so another worker may send it at once. */
  async releaseLease(signal: AbortSignal, seq: number): Promise<void> {
    await this.db.query('UPDATE deliveries SET lease_until = NULL WHERE seq = $1', [seq], signal);
  }

  /**
   * Records a successful attempt, ends the webhook's failing run, and, with `next`, claims the
   * webhook's new head when it is due: one statement, so a worker going down a webhook's queue
   * makes one round trip per delivery. `undefined` when the delivery is gone (its webhook was
   * deleted while the attempt was in flight); else `next` is the claimed head, if any.
   */
  async recordDelivered(
    signal: AbortSignal,
    delivery: { seq: number },
    attempt: AttemptRecord,
    next: { now: number; leaseMs: number } | undefined,
  ): Promise<{ next: DueDelivery | undefined } | undefined> {
    const { rows } = await this.db.query<{ recorded: number } & Partial<DueRow>>(
      `WITH done AS (
         UPDATE deliveries SET status = 'delivered', next_attempt_at = NULL, lease_until = NULL
          WHERE seq = $1 RETURNING seq, webhook_id
       ), attempt AS (
         INSERT INTO attempts (delivery_seq, at, status_code, latency_ms, error) SELECT seq, $2, $3, $4, '' FROM done
       ), healthy AS (
         UPDATE webhooks SET failing_since = NULL WHERE id = (SELECT webhook_id FROM done) AND failing_since IS NOT NULL
       ), head AS (
         -- The statement sees its own snapshot, where the delivery just recorded is still pending.
         SELECT c.seq FROM deliveries c
          WHERE $5::boolean AND c.seq = (
                  SELECT min(p.seq) FROM deliveries p
                   WHERE p.webhook_id = (SELECT webhook_id FROM done) AND p.status = 'pending' AND p.seq <> $1)
            AND c.status = 'pending' AND c.next_attempt_at <= $6 AND (c.lease_until IS NULL OR c.lease_until <= $6)
          FOR UPDATE SKIP LOCKED
       ), claimed AS (
         UPDATE deliveries d SET lease_until = $6::bigint + $7::bigint
           FROM webhooks w
          WHERE d.seq = (SELECT seq FROM head) AND w.id = d.webhook_id AND w.enabled
          RETURNING ${DUE_COLUMNS}
       )
       SELECT (SELECT count(*) FROM done)::int AS recorded, claimed.* FROM (VALUES (1)) AS one LEFT JOIN claimed ON true`,
      [delivery.seq, attempt.at, attempt.statusCode, attempt.latencyMs, next !== undefined, next?.now ?? 0, next?.leaseMs ?? 0],
      signal,
    );
    const row = rows[0];
    if (!row || row.recorded === 0) return undefined;
    return { next: row.seq === null || row.seq === undefined ? undefined : toDue(row as DueRow, next!.now) };
  }

  /**
   * Records a failed attempt and applies the worker's decision in one transaction. The failure
   * starts (or continues) the webhook's failing run and `decide` gets its start. Disabling fails
   * every pending delivery of the webhook. `undefined` when the delivery is gone.
   */
  async recordFailure(
    signal: AbortSignal,
    delivery: { seq: number; webhookId: string },
    attempt: AttemptRecord,
    decide: (failingSince: number | undefined) => Outcome,
  ): Promise<Outcome | undefined> {
    return this.db.transaction(async (tx) => {
      // The webhook may have been deleted while the attempt was in flight: then nothing is recorded.
      const { rows } = await tx.query<{ failing_since: string | number }>(
        `WITH held AS (
           SELECT seq FROM deliveries WHERE seq = $1 FOR UPDATE
         ), attempt AS (
           INSERT INTO attempts (delivery_seq, at, status_code, latency_ms, error) SELECT seq, $3, $4, $5, $6 FROM held
         )
         UPDATE webhooks SET failing_since = coalesce(failing_since, $3)
          WHERE id = $2 AND EXISTS (SELECT 1 FROM held) RETURNING failing_since`,
        [delivery.seq, delivery.webhookId, attempt.at, attempt.statusCode, attempt.latencyMs, attempt.error],
      );
      if (rows.length === 0) return undefined;
      const outcome = decide(Number(rows[0]!.failing_since));
      switch (outcome.kind) {
        case 'delivered':
        case 'failed':
          await tx.query('UPDATE deliveries SET status = $2, next_attempt_at = NULL, lease_until = NULL WHERE seq = $1', [
            delivery.seq,
            outcome.kind,
          ]);
          break;
        case 'retry':
          await tx.query('UPDATE deliveries SET next_attempt_at = $2, lease_until = NULL, failures = failures + 1 WHERE seq = $1', [
            delivery.seq,
            outcome.at,
          ]);
          break;
        case 'disable':
          await tx.query(
            'UPDATE webhooks SET enabled = false, disabled_reason = $2, disabled_at = $3 WHERE id = $1',
            [delivery.webhookId, outcome.reason, attempt.at],
          );
          await tx.query(
            "UPDATE deliveries SET status = 'failed', next_attempt_at = NULL, lease_until = NULL WHERE webhook_id = $1 AND status = 'pending'",
            [delivery.webhookId],
          );
          break;
      }
      return outcome;
    }, signal);
  }

  /** A delivery sent outside the queue (webhooks.test), stored already finished. */
  async recordTest(signal: AbortSignal, input: { webhookId: string; eventId: string; type: string; payload: string; attempt: AttemptRecord }): Promise<void> {
    await this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ seq: string | number }>(
        `INSERT INTO deliveries (webhook_id, event_id, event_type, payload, status, created_at)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING seq`,
        [input.webhookId, input.eventId, input.type, input.payload, input.attempt.error ? 'failed' : 'delivered', input.attempt.at],
      );
      const { attempt } = input;
      await tx.query('INSERT INTO attempts (delivery_seq, at, status_code, latency_ms, error) VALUES ($1, $2, $3, $4, $5)', [
        rows[0]!.seq,
        attempt.at,
        attempt.statusCode,
        attempt.latencyMs,
        attempt.error,
      ]);
    }, signal);
  }

  /** Newest first, each with its attempts oldest first. */
  async listDeliveries(signal: AbortSignal, webhookId: string, limit: number, status: DeliveryStatusText | undefined): Promise<DeliveryRecord[]> {
    const { rows } = await this.db.query<{
      seq: string | number;
      event_id: string;
      event_type: string;
      status: DeliveryStatusText;
      next_attempt_at: string | number | null;
      created_at: string | number;
    }>(
      `SELECT seq, event_id, event_type, status, next_attempt_at, created_at FROM deliveries
        WHERE webhook_id = $1 AND ($2::text IS NULL OR status = $2) ORDER BY seq DESC LIMIT $3`,
      [webhookId, status ?? null, limit],
      signal,
    );
    if (rows.length === 0) return [];
    const seqs = rows.map((row) => Number(row.seq));
    const attempts = await this.db.query<{ delivery_seq: string | number; at: string | number; status_code: number; latency_ms: number; error: string }>(
      'SELECT delivery_seq, at, status_code, latency_ms, error FROM attempts WHERE delivery_seq = ANY ($1::bigint[]) ORDER BY id',
      [seqs],
      signal,
    );
    const bySeq = new Map<number, AttemptRecord[]>(seqs.map((seq) => [seq, []]));
    for (const a of attempts.rows) {
      bySeq.get(Number(a.delivery_seq))?.push({ at: Number(a.at), statusCode: a.status_code, latencyMs: a.latency_ms, error: a.error });
    }
    return rows.map((row) => ({
      seq: Number(row.seq),
      eventId: row.event_id,
      event: row.event_type,
      status: row.status,
      nextAttemptAt: row.status === 'pending' ? Number(row.next_attempt_at ?? 0) : 0,
      createdAt: Number(row.created_at),
      attempts: bySeq.get(Number(row.seq)) ?? [],
    }));
  }

  /**
   * Queues finished deliveries again from the start of the retry schedule (one event, or every
   * failed one created since a time), keeping their place in event order. Replaying is how an
   * admin brings a disabled endpoint back, so it also re-enables the webhook. Undefined when
   * `eventId` names no delivery of the webhook.
   */
  async replay(signal: AbortSignal, webhookId: string, target: { eventId: string } | { since: number }, now: number): Promise<number | undefined> {
    return this.db.transaction(async (tx) => {
      let rowCount: number;
      if ('eventId' in target) {
        const exists = await tx.query('SELECT 1 FROM deliveries WHERE webhook_id = $1 AND event_id = $2', [webhookId, target.eventId]);
        if (exists.rows.length === 0) return undefined;
        ({ rowCount } = await tx.query(
          `UPDATE deliveries SET status = 'pending', failures = 0, next_attempt_at = $3, lease_until = NULL
            WHERE webhook_id = $1 AND event_id = $2 AND status <> 'pending'`,
          [webhookId, target.eventId, now],
        ));
      } else {
        ({ rowCount } = await tx.query(
          `UPDATE deliveries SET status = 'pending', failures = 0, next_attempt_at = $3, lease_until = NULL
            WHERE webhook_id = $1 AND status = 'failed' AND created_at >= $2`,
          [webhookId, target.since, now],
        ));
      }
      if (rowCount > 0) {
        await tx.query(
          'UPDATE webhooks SET enabled = true, disabled_reason = NULL, disabled_at = NULL, failing_since = NULL WHERE id = $1 AND NOT enabled',
          [webhookId],
        );
      }
      return rowCount;
    }, signal);
  }

  /**
   * Deletes up to `batch` finished deliveries (and, by cascade, their attempts) created before
   * `before`; pending ones stay whatever their age. Returns how many went.
   */
  async pruneFinished(signal: AbortSignal, before: number, batch = 1000): Promise<number> {
    const { rowCount } = await this.db.query(
      `DELETE FROM deliveries WHERE seq IN (
         SELECT seq FROM deliveries WHERE status <> 'pending' AND created_at < $1 LIMIT $2)`,
      [before, batch],
      signal,
    );
    return rowCount;
  }
}
