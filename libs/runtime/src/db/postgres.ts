import pg from 'pg';
import type { Db, ListenOptions, Queryable, QueryResult } from './db.js';
import { assertIdentifier, traceQuery } from './db.js';
import { PgNotifications } from './pg-listen.js';
import { abortError, throwIfAborted } from '../abort.js';

const INT8_OID = 20;

/** How long a caller waits for a pool connection (a new one or a free one) before failing. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

export interface PostgresDbOptions {
  url: string;
  schema: string;
  maxConnections?: number;
  /** Server-side limit for one statement, so a stuck query cannot hold a connection forever. */
  statementTimeoutMs?: number;
  /** Bound on waiting for a connection from the pool, signal or not. */
  connectTimeoutMs?: number;
  /** Run statements with parameters as named prepared statements (see PreparedStatements); default true. */
  preparedStatements?: boolean;
}

/**
 * PostgreSQL through a `pg` pool. int8 columns come back as numbers (epoch milliseconds fit).
 *
 * A statement given a signal is cancelled on the server when the signal aborts (a cancel through
 * `pg_cancel_backend` on a separate connection, opened on the first abort): the caller's deadline
 * becomes the statement's, at no cost to statements that finish in time (no `SET` per call).
 */
export class PostgresDb implements Db {
  readonly engine = 'postgres' as const;
  private readonly pool: pg.Pool;
  private readonly notifications: PgNotifications;
  private readonly url: string;
  private readonly connectTimeoutMs: number;
  private canceller: Promise<pg.Client> | undefined;
  /** The cancels sent so far, each after the one before. */
  private cancels: Promise<unknown> = Promise.resolve();
  readonly prepared: PreparedStatements | undefined;

  constructor(options: PostgresDbOptions) {
    const schema = assertIdentifier(options.schema);
    this.url = options.url;
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.prepared = options.preparedStatements === false ? undefined : new PreparedStatements();
    this.pool = new pg.Pool({
      connectionString: options.url,
      max: options.maxConnections ?? 10,
      connectionTimeoutMillis: this.connectTimeoutMs,
      options: `-c search_path=${schema},public -c statement_timeout=${options.statementTimeoutMs ?? 30_000}`,
      types: {
        getTypeParser: ((oid: number, format?: string) =>
          oid === INT8_OID ? Number : pg.types.getTypeParser(oid, format as never)) as typeof pg.types.getTypeParser,
      },
    });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    this.pool.on('error', () => undefined);
    // Named per schema, so an operator (or a test) can tell whose listening connection it is.
    // The pool's backends, whose notifications this handle's listeners heard when they were sent.
    const backends = new Set<number>();
    const pid = (client: pg.PoolClient) => (client as unknown as { processID: number | null }).processID;
    this.pool.on('connect', (client) => void backends.add(pid(client) ?? 0));
    this.pool.on('remove', (client) => void backends.delete(pid(client) ?? 0));
    this.notifications = new PgNotifications(
      { connectionString: options.url, application_name: `agenthub-listen:${schema}` },
      // Its own tiny transaction, which need not wait for its commit to reach the disk: nothing
      // but the notification depends on it, and that is sent at commit either way.
      (channel, payload) => this.pool.query("SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)", [channel, payload]),
      (backend) => backends.has(backend),
    );
  }

  async query<R>(sql: string, params: readonly unknown[] = [], signal?: AbortSignal): Promise<QueryResult<R>> {
    if (!signal) {
      const result = await traceQuery(sql, () => run(this.pool, this.prepared, sql, params));
      return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
    }
    throwIfAborted(signal);
    const session = new Session(this, await this.connect(signal), signal);
    try {
      return await session.query<R>(sql, params);
    } finally {
      session.release();
    }
  }

  async exec(sql: string): Promise<void> {
    await this.pool.query(sql);
  }

  notify(channel: string, payload: string): void {
    this.notifications.notify(assertIdentifier(channel), payload);
  }

  async transaction<T>(work: (tx: Queryable) => Promise<T>, signal?: AbortSignal): Promise<T> {
    throwIfAborted(signal);
    const pending: [string, string][] = [];
    const session = new Session(this, await this.connect(signal), signal, (channel, payload) => void pending.push([assertIdentifier(channel), payload]));
    const client = session.client;
    try {
      await client.query('BEGIN');
      const result = await work(session);
      await client.query('COMMIT');
      for (const [channel, payload] of pending) this.notifications.notify(channel, payload);
      return result;
    } catch (err) {
      // A cancelled connection is dropped instead (the server rolls back when it goes).
      if (!session.cancelled) await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      session.release();
    }
  }

  async withAdvisoryLock<T>(name: string, work: (db: Queryable) => Promise<T>): Promise<T> {
    const session = new Session(this, await this.pool.connect(), undefined);
    const client = session.client;
    try {
      await client.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
      try {
        return await work(session);
      } finally {
        await client.query('SELECT pg_advisory_unlock(hashtext($1))', [name]);
      }
    } finally {
      session.release();
    }
  }

  listen(channel: string, onNotify: (payload: string) => void, options: ListenOptions = {}): Promise<() => Promise<void>> {
    return this.notifications.listen(assertIdentifier(channel), onNotify, options.standsInForOthers === true);
  }

  async close(): Promise<void> {
    const canceller = this.canceller;
    this.canceller = undefined;
    await canceller?.then((client) => client.end()).catch(() => undefined);
    await this.notifications.close();
    await this.pool.end();
  }

  /** A pool connection; a caller whose signal aborts stops waiting (the connection, once there, goes back). */
  private async connect(signal: AbortSignal | undefined): Promise<pg.PoolClient> {
    if (!signal) return this.pool.connect();
    const pending = this.pool.connect();
    let onAbort = (): void => undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(abortError(signal));
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([pending, aborted]);
    } catch (err) {
      if (signal.aborted) pending.then((client) => client.release(), () => undefined);
      throw err;
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Asks the server to cancel whatever backend `pid` runs (a no-op when it runs nothing). */
  cancelBackend(pid: number): void {
    const canceller = (this.canceller ??= this.openCanceller());
    // One at a time on that connection: pg only queues a statement sent while another runs
    // (deprecated, refused from pg 9), and callers leaving together cancel together.
    this.cancels = this.cancels
      .then(() => canceller)
      .then((client) => client.query('SELECT pg_cancel_backend($1)', [pid]))
      .catch(() => {
        // The next cancel opens a fresh connection; this statement ends at statement_timeout.
        if (this.canceller === canceller) this.canceller = undefined;
      });
  }

  private async openCanceller(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: this.connectTimeoutMs });
    client.on('error', () => undefined);
    await client.connect();
    return client;
  }
}

/** One pool connection used on behalf of one caller, whose signal cancels its statements. */
class Session implements Queryable {
  /** A cancel was sent; it may land after the statement ended, so the connection must not be reused. */
  cancelled = false;

  constructor(
    private readonly db: PostgresDb,
    readonly client: pg.PoolClient,
    private readonly signal: AbortSignal | undefined,
    /** Outside a transaction, at once; inside one, queued until its commit. */
    readonly notify: Queryable['notify'] = (channel, payload) => db.notify(channel, payload),
  ) {}

  async query<R>(sql: string, params: readonly unknown[] = [], signal = this.signal): Promise<QueryResult<R>> {
    if (!signal) {
      const result = await traceQuery(sql, () => run(this.client, this.db.prepared, sql, params));
      return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
    }
    throwIfAborted(signal);
    const cancel = () => {
      this.cancelled = true;
      this.db.cancelBackend((this.client as unknown as { processID: number }).processID);
    };
    signal.addEventListener('abort', cancel, { once: true });
    try {
      const result = await traceQuery(sql, () => run(this.client, this.db.prepared, sql, params));
      return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
    } catch (err) {
      if (signal.aborted) throw abortError(signal);
      throw err;
    } finally {
      signal.removeEventListener('abort', cancel);
    }
  }

  async exec(sql: string): Promise<void> {
    await this.client.query(sql);
  }

  release(): void {
    this.client.release(this.cancelled || undefined);
  }
}

/**
 * Names for the statements a pool runs with parameters, so each is parsed and planned once per
 * connection rather than on every call (the floor's unnamed statements pay that in PostgreSQL's
 * CPU every time). A statement whose text selects or returns `*` stays unnamed: a column added by
 * a newer replica's migration would change its result type, which a prepared statement cannot
 * follow. A named statement that fails that way anyway (a column's type changed, SQLSTATE 0A000)
 * loses its name, so the next call plans it afresh. At most MAX_PREPARED texts get names, so
 * statements built with a varying number of parameters cannot fill the server's memory.
 */
class PreparedStatements {
  /** Each text ever seen; never deleted, so its size numbers new names uniquely. */
  readonly #names = new Map<string, string | null>();

  nameOf(sql: string): string | undefined {
    let name = this.#names.get(sql);
    if (name === undefined) {
      if (this.#names.size >= MAX_PREPARED) return undefined;
      name = WHOLE_ROW.test(sql) ? null : `agenthub_${this.#names.size + 1}`;
      this.#names.set(sql, name);
    }
    return name ?? undefined;
  }

  forget(sql: string): void {
    this.#names.set(sql, null);
  }
}

const MAX_PREPARED = 1000;
/** `*` after a space, a comma or a table name's dot: a column list that follows the table's columns. */
const WHOLE_ROW = /[\s,.]\*/;
const FEATURE_NOT_SUPPORTED = '0A000';

async function run(target: pg.Pool | pg.PoolClient, prepared: PreparedStatements | undefined, sql: string, params: readonly unknown[]): Promise<pg.QueryResult> {
  const name = params.length > 0 ? prepared?.nameOf(sql) : undefined;
  if (!name) return target.query(sql, params as unknown[]);
  try {
    return await target.query({ name, text: sql, values: params as unknown[] });
  } catch (err) {
    if ((err as { code?: string }).code === FEATURE_NOT_SUPPORTED) prepared!.forget(sql);
    throw err;
  }
}
