import { randomUUID } from 'node:crypto';
import { migrate, type Db } from '../db/index.js';
import { LocalFirstKv, type Kv } from '../kv/index.js';
import type { Logger } from '../logger.js';
import type { Bus, BusMessage, ConsumedMessage, Subscription } from './bus.js';

const SCHEMA = 'bus';
const MIGRATIONS = new URL('../../migrations/bus/', import.meta.url);
/** Every process reads the time from the database, so leases and retention ignore clock skew. */
const NOW_MS = '(extract(epoch from clock_timestamp()) * 1000)::bigint';
/**
 * Messages `m` of topic `t.topic` after the group's committed offset `o.committed`, as a range of
 * the (topic, offset) index. Written as `m.topic = t.topic AND m."offset" > …`, PostgreSQL walks
 * the primary key from that offset instead, filtering out every later message of the other
 * topics: most of a long log, for a quiet topic behind a busy one.
 */
const AFTER_COMMITTED = '(m.topic, m."offset") > (t.topic, COALESCE(o.committed, 0)) AND m.topic <= t.topic';
/**
 * How far apart an idle member's polls may grow when a Kv carries wake-ups between processes:
 * then a poll only catches a wake-up that was lost, and an idle hub need not read the log twenty
 * times a second per group.
 */
const IDLE_POLL_MAX_MS = 1_000;

/** Kv channel on which a publish wakes consumers in other processes sharing the log. */
const WAKE_CHANNEL = 'bus:published';

export interface DbBusOptions {
  /** Any handle on the database holding schema `bus`; every statement names the schema. */
  db: Db;
  log: Logger;
  /** Closes `db` with the bus (when the bus opened it). */
  ownsDb?: boolean;
  /** Lets a publish in one process wake consumers in the others at once instead of at their next poll. */
  kv?: Kv;
  /** How often an active member looks for new messages when nothing woke it. */
  pollMs?: number;
  /** Pause before a message whose handler failed is handed over again. */
  retryDelayMs?: number;
  /** How long a member's claim on its group outlives its last heartbeat (a dead member's successor waits this long). */
  leaseMs?: number;
  /** Messages every group has handled are deleted once older than this. */
  retentionMs?: number;
  /** How often expired messages are deleted. */
  retentionIntervalMs?: number;
  batchSize?: number;
}

/**
 * The embedded event log: a PostgreSQL (or PGlite) schema `bus`, so it works in one process and
 * across processes sharing a database. One member per consumer group consumes at a time (a lease
 * with heartbeats; another member takes over when it expires or is released), in offset order,
 * committing the offsets of handled messages once per batch. Offsets are global, and a
 * topic's messages become visible in offset order because publishers of a topic take turns.
 * The lease is per group, so every member of a group subscribes to the same topics.
 */
export class DbBus implements Bus {
  private readonly db: Db;
  private readonly log: Logger;
  private readonly consumers = new Set<GroupMember>();
  private readonly retentionMs: number;
  private readonly retentionTimer: NodeJS.Timeout;
  /**
   * Wake-ups reach this process's consumers at once and the other processes through the Kv; a
   * consumer does not hear its own process's wake-up a second time, which cost it an empty read.
   */
  private readonly wakes: LocalFirstKv | undefined;
  private unsubscribeWake: (() => Promise<void>) | undefined;
  private closed = false;

  private constructor(private readonly options: DbBusOptions) {
    this.db = options.db;
    this.log = options.log;
    this.retentionMs = options.retentionMs ?? 7 * 24 * 3_600_000;
    this.wakes = options.kv ? new LocalFirstKv(options.kv) : undefined;
    this.retentionTimer = setInterval(() => {
      this.deleteExpired().catch((err: unknown) => this.log.warn({ err }, 'bus retention failed'));
    }, options.retentionIntervalMs ?? 3_600_000);
    this.retentionTimer.unref();
  }

  /** Creates or upgrades schema `bus`, then returns a bus over it. */
  static async open(options: DbBusOptions): Promise<DbBus> {
    await migrate(options.db, { schema: SCHEMA, dir: MIGRATIONS, log: options.log });
    const bus = new DbBus(options);
    if (bus.wakes) bus.unsubscribeWake = await bus.wakes.subscribe(WAKE_CHANNEL, (topic) => bus.wakeLocal(topic));
    return bus;
  }

  async publish(topic: string, messages: BusMessage[], signal?: AbortSignal): Promise<void> {
    if (messages.length === 0) return;
    const params: unknown[] = [topic, `agenthub:bus:${topic}`];
    const rows = messages.map((m, position) => {
      params.push(m.key, m.value, JSON.stringify(m.headers));
      const n = params.length;
      return `(${position}, $${n - 2}::text, $${n - 1}::text, $${n}::jsonb)`;
    });
    // Offsets are drawn when rows are inserted but seen when committed: publishers of one topic
    // take turns (the lock, held until the statement's own transaction commits) so that no
    // consumer sees offset n+1 and commits past an n that appears later. One statement, not a
    // transaction of four: a row to insert exists only once the lock was taken, and only then is
    // its offset drawn, in the messages' order (volatile defaults are computed after the sort).
    await this.db.query(
      `WITH turn AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtext($2)))
       INSERT INTO bus.messages (topic, key, value, headers, created_at)
       SELECT $1::text, m.key, m.value, m.headers, ${NOW_MS}
         FROM turn, (VALUES ${rows.join(', ')}) AS m (position, key, value, headers)
        ORDER BY m.position`,
      params,
      signal,
    );
    if (!this.wakes) this.wakeLocal(topic);
    else this.wakes.publish(WAKE_CHANNEL, topic).catch((err: unknown) => this.log.debug({ err }, 'bus wake-up not sent'));
  }

  async subscribe(group: string, topics: string[], handle: (message: ConsumedMessage) => Promise<void>): Promise<Subscription> {
    if (this.closed) throw new Error('The bus is closed');
    const pollMs = this.options.pollMs ?? 50;
    const member = new GroupMember({
      db: this.db,
      log: this.log.child({ group }),
      group,
      topics: [...new Set(topics)],
      handle,
      pollMs,
      idlePollMaxMs: this.wakes ? Math.max(IDLE_POLL_MAX_MS, pollMs) : pollMs,
      retryDelayMs: this.options.retryDelayMs ?? 1_000,
      leaseMs: this.options.leaseMs ?? 10_000,
      batchSize: this.options.batchSize ?? 100,
    });
    this.consumers.add(member);
    return {
      stop: async () => {
        await member.stop();
        this.consumers.delete(member);
      },
    };
  }

  async ping(signal?: AbortSignal): Promise<void> {
    await this.db.query('SELECT 1', [], signal);
  }

  async consumerLag(group: string, topics: string[]): Promise<{ topic: string; messages: number }[]> {
    const { rows } = await this.db.query<{ topic: string; n: number }>(
      `SELECT t.topic, (SELECT count(*)::int FROM bus.messages m WHERE ${AFTER_COMMITTED}) AS n
         FROM unnest($2::text[]) AS t (topic)
         LEFT JOIN bus.group_offsets o ON o.group_id = $1 AND o.topic = t.topic`,
      [group, topics],
    );
    const lag = new Map(rows.map((row) => [row.topic, row.n]));
    return topics.map((topic) => ({ topic, messages: lag.get(topic) ?? 0 }));
  }

  /** Deletes messages older than the retention that every group reading their topic has handled. */
  async deleteExpired(): Promise<number> {
    const { rowCount } = await this.db.query(
      `DELETE FROM bus.messages m
        WHERE m.created_at < ${NOW_MS} - $1
          AND NOT EXISTS (SELECT 1 FROM bus.group_offsets o WHERE o.topic = m.topic AND o.committed < m."offset")`,
      [this.retentionMs],
    );
    return rowCount;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.retentionTimer);
    await Promise.all([...this.consumers].map((member) => member.stop()));
    this.consumers.clear();
    await this.unsubscribeWake?.();
    if (this.options.ownsDb) await this.db.close();
  }

  private wakeLocal(topic: string): void {
    for (const member of this.consumers) if (member.topics.includes(topic)) member.wake();
  }
}

interface MemberOptions {
  db: Db;
  log: Logger;
  group: string;
  topics: string[];
  handle: (message: ConsumedMessage) => Promise<void>;
  pollMs: number;
  /** The longest pause between polls that keep finding nothing (pollMs: they never grow apart). */
  idlePollMaxMs: number;
  retryDelayMs: number;
  leaseMs: number;
  batchSize: number;
}

interface Row {
  offset: number | string;
  topic: string;
  key: string;
  value: string;
  headers: Record<string, string>;
}

/** One subscription: waits for its group's lease, then consumes while it holds it. */
class GroupMember {
  readonly topics: string[];
  private readonly id = randomUUID();
  private readonly done: Promise<void>;
  private stopped = false;
  private holding = false;
  private woken = false;
  private interrupt: (() => void) | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  /** Cancels the member's reads (polls, lease attempts) on stop; commits and the release finish. */
  private readonly stopping = new AbortController();

  constructor(private readonly o: MemberOptions) {
    this.topics = o.topics;
    this.done = this.run();
  }

  wake(): void {
    this.woken = true;
    this.interrupt?.();
  }

  async stop(): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      this.stopping.abort();
      this.interrupt?.();
    }
    await this.done;
  }

  private async run(): Promise<void> {
    let failures = 0;
    // Reads in a row that found nothing: each doubles the pause before the next poll.
    let empty = 0;
    while (!this.stopped) {
      let delay = this.o.pollMs;
      let wakeable = true;
      try {
        if (!this.holding) {
          this.holding = await this.acquire();
          if (!this.holding) {
            // A graceful stop releases the lease, so a waiting member asks again soon.
            await this.sleep(Math.min(1_000, this.o.leaseMs / 2), false);
            continue;
          }
          this.o.log.debug('consuming for the group');
          this.startHeartbeat();
        }
        this.woken = false;
        const outcome = await this.consumeBatch();
        failures = 0;
        empty = outcome === 'empty' ? empty + 1 : 0;
        if (empty > 0) delay = Math.min(this.o.pollMs * 2 ** (empty - 1), this.o.idlePollMaxMs);
        if (outcome === 'failed') {
          delay = this.o.retryDelayMs;
          wakeable = false;
        } else if (outcome === 'full') {
          continue;
        }
      } catch (err) {
        if (this.stopped) break;
        failures += 1;
        this.o.log.warn({ err, failures }, 'bus consumer cannot reach its database; retrying');
        delay = Math.min(this.o.retryDelayMs * 2 ** (failures - 1), 30_000);
        wakeable = false;
      }
      await this.sleep(delay, wakeable);
    }
    await this.release();
  }

  /** Handles the next messages in offset order; stops at the first failure or when the lease is lost. */
  private async consumeBatch(): Promise<'full' | 'drained' | 'empty' | 'failed'> {
    // Each topic's next messages in (topic, offset) order, merged in offset order.
    const { rows } = await this.o.db.query<Row>(
      `SELECT m."offset", m.topic, m.key, m.value, m.headers
         FROM unnest($3::text[]) AS t (topic)
         LEFT JOIN bus.group_offsets o ON o.group_id = $1 AND o.topic = t.topic
         CROSS JOIN LATERAL (
           SELECT m."offset", m.topic, m.key, m.value, m.headers FROM bus.messages m
            WHERE ${AFTER_COMMITTED} ORDER BY m.topic, m."offset" LIMIT $2) m
        ORDER BY m."offset" LIMIT $2`,
      [this.o.group, this.o.batchSize, this.o.topics],
      this.stopping.signal,
    );
    if (rows.length === 0) return 'empty';
    // Offsets are committed once per batch (and before leaving it early): a crash re-delivers at
    // most the batch's handled messages, which at-least-once allows, for one write instead of one
    // per message.
    const handled = new Map<string, number | string>();
    const commitHandled = async (): Promise<boolean> => {
      for (const [topic, offset] of handled) {
        if (!(await this.commit(topic, offset))) {
          this.lostLease();
          return false;
        }
      }
      handled.clear();
      return true;
    };
    for (const row of rows) {
      if (this.stopped || !this.holding) {
        await commitHandled();
        return 'drained';
      }
      const message: ConsumedMessage = {
        topic: row.topic,
        offset: String(row.offset),
        key: row.key,
        value: row.value,
        headers: row.headers,
      };
      try {
        await this.o.handle(message);
      } catch (err) {
        this.o.log.warn({ err, topic: row.topic, offset: message.offset }, 'bus handler failed; the message will come again');
        await commitHandled();
        return 'failed';
      }
      handled.set(row.topic, row.offset);
    }
    if (!(await commitHandled())) return 'drained';
    return rows.length === this.o.batchSize ? 'full' : 'drained';
  }

  private async acquire(): Promise<boolean> {
    const { rowCount } = await this.o.db.query(
      `INSERT INTO bus.group_leases AS l (group_id, member_id, expires_at) VALUES ($1, $2, ${NOW_MS} + $3)
       ON CONFLICT (group_id) DO UPDATE SET member_id = EXCLUDED.member_id, expires_at = EXCLUDED.expires_at
        WHERE l.member_id = EXCLUDED.member_id OR l.expires_at < ${NOW_MS}`,
      [this.o.group, this.id, this.o.leaseMs],
      this.stopping.signal,
    );
    return rowCount > 0;
  }

  /** Records the offset only while this member still holds the lease (a successor may have taken it). */
  private async commit(topic: string, offset: number | string): Promise<boolean> {
    const { rowCount } = await this.o.db.query(
      `WITH lease AS (SELECT 1 FROM bus.group_leases WHERE group_id = $1 AND member_id = $2 FOR SHARE)
       INSERT INTO bus.group_offsets AS g (group_id, topic, committed) SELECT $1::text, $3::text, $4::bigint FROM lease
       ON CONFLICT (group_id, topic) DO UPDATE SET committed = GREATEST(g.committed, EXCLUDED.committed)`,
      [this.o.group, this.id, topic, offset],
    );
    return rowCount > 0;
  }

  private startHeartbeat(): void {
    clearInterval(this.heartbeat);
    this.heartbeat = setInterval(() => {
      this.o.db
        .query(`UPDATE bus.group_leases SET expires_at = ${NOW_MS} + $3 WHERE group_id = $1 AND member_id = $2`, [
          this.o.group,
          this.id,
          this.o.leaseMs,
        ])
        .then(
          ({ rowCount }) => {
            if (rowCount === 0) this.lostLease();
          },
          (err: unknown) => this.o.log.warn({ err }, 'bus consumer heartbeat failed'),
        );
    }, Math.max(10, Math.floor(this.o.leaseMs / 3)));
    this.heartbeat.unref();
  }

  private lostLease(): void {
    if (!this.holding) return;
    this.holding = false;
    clearInterval(this.heartbeat);
    this.o.log.warn('bus consumer lost its group lease to another member');
  }

  private async release(): Promise<void> {
    clearInterval(this.heartbeat);
    if (!this.holding) return;
    this.holding = false;
    await this.o.db
      .query('DELETE FROM bus.group_leases WHERE group_id = $1 AND member_id = $2', [this.o.group, this.id])
      .catch((err: unknown) => this.o.log.warn({ err }, 'bus consumer could not release its lease; it will expire'));
  }

  /** Sleeps `ms`; stopping always ends the sleep, a wake-up (even one that came since the last fetch) only when `wakeable`. */
  private sleep(ms: number, wakeable: boolean): Promise<void> {
    if (this.stopped || (wakeable && this.woken)) return Promise.resolve();
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        this.interrupt = undefined;
        resolve();
      };
      const timer = setTimeout(finish, ms);
      this.interrupt = wakeable ? finish : () => this.stopped && finish();
    });
  }
}
