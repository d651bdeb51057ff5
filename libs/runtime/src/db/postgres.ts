import pg from 'pg';
import type { Db, Queryable, QueryResult } from './db.js';
import { assertIdentifier, traceQuery } from './db.js';
import { PgNotifications } from './pg-listen.js';

const INT8_OID = 20;

export interface PostgresDbOptions {
  url: string;
  schema: string;
  maxConnections?: number;
  /** Server-side limit for one statement, so a stuck query cannot hold a connection forever. */
  statementTimeoutMs?: number;
}

/** PostgreSQL through a `pg` pool. int8 columns come back as numbers (epoch milliseconds fit). */
export class PostgresDb implements Db {
  readonly engine = 'postgres' as const;
  private readonly pool: pg.Pool;
  private readonly notifications: PgNotifications;

  constructor(options: PostgresDbOptions) {
    const schema = assertIdentifier(options.schema);
    this.pool = new pg.Pool({
      connectionString: options.url,
      max: options.maxConnections ?? 10,
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

  async query<R>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
    const result = await traceQuery(sql, () => this.pool.query(sql, params as unknown[]));
    return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
  }

  async exec(sql: string): Promise<void> {
    await this.pool.query(sql);
  }

  notify(channel: string, payload: string): void {
    this.notifications.notify(assertIdentifier(channel), payload);
  }

  async transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const pending: [string, string][] = [];
      const result = await work(clientQueryable(client, (channel, payload) => void pending.push([assertIdentifier(channel), payload])));
      await client.query('COMMIT');
      for (const [channel, payload] of pending) this.notifications.notify(channel, payload);
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  async withAdvisoryLock<T>(name: string, work: (db: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
      try {
        return await work(clientQueryable(client, (channel, payload) => this.notify(channel, payload)));
      } finally {
        await client.query('SELECT pg_advisory_unlock(hashtext($1))', [name]);
      }
    } finally {
      client.release();
    }
  }

  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    return this.notifications.listen(assertIdentifier(channel), onNotify);
  }

  async close(): Promise<void> {
    await this.notifications.close();
    await this.pool.end();
  }
}

function clientQueryable(client: pg.PoolClient, notify: Queryable['notify']): Queryable {
  return {
    notify,
    async query<R>(sql: string, params: readonly unknown[] = []) {
      const result = await traceQuery(sql, () => client.query(sql, params as unknown[]));
      return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
    },
    async exec(sql: string) {
      await client.query(sql);
    },
  };
}
