import { EVENT_ID_HEADER, EVENT_TYPE_HEADER, type Bus, type BusMessage } from './bus/bus.js';
import type { Db, Queryable } from './db/index.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';
import { OUTBOX_CHANNEL } from './outbox.js';
import { contextOf, openSpan, SpanKind, TRACEPARENT } from './tracing.js';

export interface RelayOptions {
  /** The service's database; its search path starts with the schema holding `outbox`. */
  db: Db;
  bus: Bus;
  log: Logger;
  /** How often unpublished rows are looked for when nothing woke the relay (a missed notification). */
  pollMs?: number;
  /**
   * Least time from one pass's start to the next that a commit's wake-up starts: commits closer
   * together than this share a pass (one batch, one bus write) and their events wait up to this
   * much longer. A backlog, a flush() and a commit after a quiet spell are not held.
   */
  passIntervalMs?: number;
  batchSize?: number;
  /** A publish that has not finished by then counts as failed (its rows are published again). */
  publishTimeoutMs?: number;
  /** Longest pause between attempts while the bus fails. */
  maxBackoffMs?: number;
  /** Published rows are deleted once older than this, checked every `pruneIntervalMs`. */
  retainPublishedMs?: number;
  pruneIntervalMs?: number;
  /** Longest wait of `flush()` (the call then answers without it; the event follows later). */
  flushTimeoutMs?: number;
}

export interface Relay {
  /** Looks for unpublished rows now (call it after committing a transaction that wrote some). */
  wake(): void;
  /**
   * Resolves once every row committed before the call is on the bus: after a pass that began
   * later found nothing more to publish, or (given the `seq` of the caller's last committed row,
   * sooner) once that row was published. It resolves early, without that, while the bus fails,
   * when stopping, or after `flushTimeoutMs` (logged).
   */
  flush(seq?: string): Promise<void>;
  /** Stops polling; resolves once the batch in flight is published and marked, or rolled back. */
  stop(): Promise<void>;
}

interface OutboxRow {
  seq: number;
  event_id: string;
  topic: string;
  partition_key: string;
  type: string;
  payload: unknown;
  traceparent: string | null;
}

type Nullable<T> = { [K in keyof T]: T[K] | null };

/**
 * Takes the schema's relay lock and, only when it got it, selects and locks the next batch: one
 * round trip where a lock, then a select, were two (a pass runs for every commit that wrote
 * events, several per blocking send). A row with `locked` and no `seq` says the outbox holds
 * nothing unpublished; `locked` false, that another replica is publishing. The lock's CTE is
 * materialized so the function runs once, not once per reference.
 */
const SELECT_BATCH_SQL = `WITH relay_lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(hashtext('agenthub:relay:' || current_schema())) AS locked)
SELECT relay_lock.locked, batch.seq, batch.event_id, batch.topic, batch.partition_key, batch.type, batch.payload, batch.traceparent
  FROM relay_lock
  LEFT JOIN LATERAL (
    SELECT seq, event_id, topic, partition_key, type, payload, traceparent FROM outbox
     WHERE relay_lock.locked AND published_at IS NULL ORDER BY seq LIMIT $1 FOR UPDATE
  ) AS batch ON true
 ORDER BY batch.seq`;

function toMessage(row: OutboxRow, traceparent: string | null): BusMessage {
  return {
    key: row.partition_key,
    value: JSON.stringify(row.payload),
    // The writer's trace rides along, so the consumer's work (webhook deliveries) continues it.
    headers: { [EVENT_ID_HEADER]: row.event_id, [EVENT_TYPE_HEADER]: row.type, ...(traceparent ? { [TRACEPARENT]: traceparent } : {}) },
  };
}

/**
 * Publishes one topic's rows; each row written in a traced call gets a producer span in that
 * call's trace for this attempt, and its message carries that span as the consumer's parent.
 */
async function publishRun(bus: Bus, topic: string, rows: OutboxRow[], timeoutMs: number): Promise<void> {
  const spans = rows.map((row) =>
    openSpan(`publish ${topic}`, {
      kind: SpanKind.PRODUCER,
      parent: contextOf(row.traceparent),
      attributes: { 'messaging.operation.type': 'send', 'messaging.destination.name': topic, 'messaging.message.id': row.event_id },
    }),
  );
  try {
    await withTimeout(bus.publish(topic, rows.map((row, i) => toMessage(row, spans[i]?.traceparent ?? row.traceparent))), timeoutMs);
  } catch (err) {
    for (const span of spans) span?.end(err);
    throw err;
  }
  for (const span of spans) span?.end();
}

/** Consecutive rows of one topic go in one publish; order across topics stays that of `seq`. */
function runsByTopic(rows: OutboxRow[]): { topic: string; rows: OutboxRow[] }[] {
  const runs: { topic: string; rows: OutboxRow[] }[] = [];
  for (const row of rows) {
    const last = runs[runs.length - 1];
    if (last?.topic === row.topic) last.rows.push(row);
    else runs.push({ topic: row.topic, rows: [row] });
  }
  return runs;
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`bus publish did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Publishes one service's outbox to the bus, at least once and in `seq` order: a batch is
 * selected, published and marked in one transaction holding a per-schema advisory lock, so among
 * replicas one publishes at a time and a row is marked only after the bus stored it. A bus
 * failure rolls the batch back and the relay retries with a growing pause. Each committed outbox
 * write to its schema (appendEvent's notification on OUTBOX_CHANNEL, from any process) wakes it at once.
 */
export function startRelay(options: RelayOptions): Relay {
  const { db, bus, log } = options;
  const pollMs = options.pollMs ?? 200;
  const passIntervalMs = options.passIntervalMs ?? 0;
  const batchSize = options.batchSize ?? 100;
  const publishTimeoutMs = options.publishTimeoutMs ?? 10_000;
  const maxBackoffMs = options.maxBackoffMs ?? 30_000;
  const retainPublishedMs = options.retainPublishedMs ?? 24 * 3_600_000;
  const pruneIntervalMs = options.pruneIntervalMs ?? 10 * 60_000;

  let stopped = false;
  // Stopping cancels the prune; a batch in flight finishes (bounded by publishTimeoutMs), so its
  // published rows are marked instead of being published again by the next relay.
  const stopping = new AbortController();
  let woken = false;
  let interrupt: (() => void) | undefined;
  let lastPrune = 0;

  const wake = () => {
    woken = true;
    interrupt?.();
  };

  // flush(): each waiter is released by the first drained pass numbered above `after`, the
  // number of passes begun when it asked (so that pass selected after the waiter's commit), or
  // by the publication of its row: the pass a commit's wake-up starts usually began already.
  const flushTimeoutMs = options.flushTimeoutMs ?? 5_000;
  let passesBegun = 0;
  let failing = false;
  const flushWaiters = new Set<{ after: number; seq: string | undefined; release: () => void }>();
  const releaseFlushes = (drainedPass: number) => {
    for (const waiter of flushWaiters) if (waiter.after < drainedPass) waiter.release();
  };
  const releasePublished = (rows: OutboxRow[]) => {
    if (flushWaiters.size === 0) return;
    const seqs = new Set(rows.map((row) => String(row.seq)));
    for (const waiter of flushWaiters) if (waiter.seq !== undefined && seqs.has(waiter.seq)) waiter.release();
  };
  const flush = (seq?: string) =>
    new Promise<void>((resolve) => {
      if (stopped || failing) return resolve();
      const waiter = {
        seq,
        after: passesBegun,
        release: () => {
          clearTimeout(timer);
          flushWaiters.delete(waiter);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        log.warn({ waitedMs: flushTimeoutMs }, 'outbox relay did not publish in time; answering without waiting');
        waiter.release();
      }, flushTimeoutMs);
      flushWaiters.add(waiter);
      wake();
    });

  /**
   * Publishes one batch; `busy` when another replica holds the outbox right now. `peek`: first
   * looks, in one statement and no transaction, whether there is anything to publish (a pass no
   * write woke usually finds nothing).
   */
  const publishBatch = async (peek: boolean): Promise<'busy' | 'drained' | 'more'> => {
    if (peek) {
      const { rows } = await db.query<{ pending: boolean }>('SELECT EXISTS (SELECT 1 FROM outbox WHERE published_at IS NULL) AS pending');
      if (!rows[0]?.pending) return 'drained';
    }
    return db.transaction(async (tx): Promise<'busy' | 'drained' | 'more'> => {
      const selected = await tx.query<{ locked: boolean } & Nullable<OutboxRow>>(SELECT_BATCH_SQL, [batchSize]);
      if (!selected.rows[0]?.locked) return 'busy';
      const rows = selected.rows.filter((row): row is { locked: boolean } & OutboxRow => row.seq !== null);
      if (rows.length === 0) return 'drained';
      for (const run of runsByTopic(rows)) await publishRun(bus, run.topic, run.rows, publishTimeoutMs);
      releasePublished(rows);
      // The exact rows: one with a lower seq may have committed since the select and is not published yet.
      const seqs = rows.map((r) => r.seq);
      await tx.query(`UPDATE outbox SET published_at = $1 WHERE seq IN (${seqs.map((_, i) => `$${i + 2}`).join(', ')})`, [Date.now(), ...seqs]);
      return rows.length === batchSize ? 'more' : 'drained';
    });
  };

  const prune = async () => {
    if (Date.now() - lastPrune < pruneIntervalMs) return;
    lastPrune = Date.now();
    const { rowCount } = await db.query(
      'DELETE FROM outbox WHERE published_at IS NOT NULL AND published_at < $1',
      [Date.now() - retainPublishedMs],
      stopping.signal,
    );
    if (rowCount > 0) log.debug({ rows: rowCount }, 'outbox pruned');
  };

  /**
   * Sleeps `ms`; stopping ends the sleep, and so does a wake-up (even one that came since the last
   * pass) when `wakeable`: at once when a flush() waits, else no sooner than `holdUntil`. Resolves
   * true when the sleep ran its course with no wake-up (a poll).
   */
  const sleep = (ms: number, wakeable: boolean, holdUntil: number) =>
    new Promise<boolean>((resolve) => {
      if (stopped) return resolve(false);
      let timer: NodeJS.Timeout | undefined;
      const finish = (polled: boolean) => {
        clearTimeout(timer);
        interrupt = undefined;
        resolve(polled);
      };
      const woke = () => {
        const hold = holdUntil - performance.now();
        if (stopped || hold <= 0 || flushWaiters.size > 0) return finish(false);
        clearTimeout(timer);
        timer = setTimeout(() => finish(false), hold);
      };
      timer = setTimeout(() => finish(true), ms);
      interrupt = wakeable ? woke : () => stopped && finish(false);
      if (wakeable && woken) woke();
    });

  const run = async () => {
    let failures = 0;
    // A poll after a drained pass, with no write since to wake the relay, peeks first: idle, a
    // pass is then one statement instead of a transaction of three (lock and select, mark, commit).
    let peek = false;
    while (!stopped) {
      woken = false;
      let delay = pollMs;
      let wakeable = true;
      let drained = false;
      const pass = ++passesBegun;
      const holdUntil = performance.now() + passIntervalMs;
      try {
        const outcome = await publishBatch(peek);
        peek = false;
        if (failures > 0) log.info({ failures }, 'outbox relay publishing again');
        failures = 0;
        failing = false;
        drained = outcome === 'drained';
        if (drained) releaseFlushes(pass);
        if (outcome === 'more') continue;
        // Another replica is publishing; ask again soon in case it selected its batch before our rows committed.
        if (outcome === 'busy') delay = Math.min(pollMs, 25);
        else await prune().catch((err: unknown) => log.warn({ err }, 'outbox prune failed'));
      } catch (err) {
        failures += 1;
        failing = true;
        releaseFlushes(Infinity);
        delay = Math.min(pollMs * 2 ** failures, maxBackoffMs);
        wakeable = false;
        log.warn({ err, failures, retryInMs: delay }, 'outbox relay cannot publish; rows stay in the outbox');
      }
      if (!stopped) peek = (await sleep(delay, wakeable, holdUntil)) && drained;
    }
  };

  const listening = listenForWrites(db, wake).catch((err: unknown) => {
    log.warn({ err }, 'outbox relay cannot listen for writes; it polls only');
    return undefined;
  });
  const done = run();
  return {
    wake,
    flush,
    async stop() {
      stopped = true;
      stopping.abort();
      interrupt?.();
      // A handle closed first (a failed start) has stopped listening already.
      await (await listening)?.().catch(() => undefined);
      await done;
      releaseFlushes(Infinity);
    },
  };
}

/** Wakes the relay for each committed write to the outbox of `db`'s schema; returns how to stop. */
async function listenForWrites(db: Db, wake: () => void): Promise<() => Promise<void>> {
  const { rows } = await db.query<{ schema: string }>('SELECT current_schema() AS schema');
  const schema = rows[0]?.schema;
  // This relay publishes every row of its schema, whichever replica wrote it: this process's
  // writes need not wake other replicas' relays (a pg_notify each), which would find them taken.
  const unlisten = await db.listen(
    OUTBOX_CHANNEL,
    (payload) => {
      if (payload === schema) wake();
    },
    { standsInForOthers: true },
  );
  // A write that committed before the listening began would otherwise wait for the next poll.
  wake();
  return unlisten;
}

/** Whether the schema first on `db`'s search path has an outbox (services without events have none). */
export async function hasOutbox(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ present: boolean }>("SELECT to_regclass('outbox') IS NOT NULL AS present");
  return rows[0]?.present === true;
}

/**
 * The outbox's lag as gauges read when Prometheus scrapes (through the unpublished partial
 * index): agenthub_outbox_pending{service} and its _oldest_age_seconds. Returns how to stop.
 */
export function reportOutboxLag(metrics: Metrics, service: string, db: Db): () => void {
  return metrics.backlog('agenthub_outbox_pending', 'Outbox events written but not yet on the event log, per service', ['service'], async () => {
    const { rows } = await db.query<{ n: number; oldest: string | number | null }>('SELECT count(*)::int AS n, min(created_at) AS oldest FROM outbox WHERE published_at IS NULL');
    const row = rows[0];
    return [{ labels: { service }, count: row?.n ?? 0, oldestMs: row?.oldest === null || row?.oldest === undefined ? null : Number(row.oldest) }];
  });
}
