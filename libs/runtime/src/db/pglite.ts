import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { PGlite, types } from '@electric-sql/pglite';
import type { Db, ListenOptions, Queryable, QueryResult } from './db.js';
import { assertIdentifier, traceQuery } from './db.js';
import { restrictTree } from '../private-files.js';
import { throwIfAborted } from '../abort.js';

/**
 * An empty cluster, dumped after this process created its first one: initdb in WASM takes
 * seconds, while loading its result takes a fraction, and the all-in-one hub (like every test
 * stack) creates a cluster per service.
 */
let emptyCluster: Promise<Blob> | undefined;

/**
 * A dump of a new empty cluster, for `useEmptyClusterTemplate` in other processes: the test
 * suites make one per PGlite version instead of one initdb per test file.
 */
export async function dumpEmptyCluster(): Promise<Blob> {
  const pg = await PGlite.create();
  try {
    return await pg.dumpDataDir('none');
  } finally {
    await pg.close();
  }
}

/** Makes `template` (from dumpEmptyCluster) this process's empty cluster, so that even its first new cluster skips initdb. */
export function useEmptyClusterTemplate(template: Blob): void {
  emptyCluster = Promise.resolve(template);
}

async function createCluster(dataDir: string | undefined): Promise<PGlite> {
  const options = {
    ...(dataDir ? { dataDir } : {}),
    parsers: { [types.INT8]: (value: string) => Number(value) },
  };
  const isNew = !dataDir || !existsSync(join(dataDir, 'PG_VERSION'));
  if (!isNew) return PGlite.create(options);
  if (emptyCluster) {
    const template = await emptyCluster.catch(() => undefined);
    if (template) return PGlite.create({ ...options, loadDataDir: template });
  }
  const pg = await PGlite.create(options);
  emptyCluster ??= pg.dumpDataDir('none');
  await emptyCluster.catch(() => undefined);
  return pg;
}

/**
 * The one connection of a PGlite cluster, used by every schema opened on it. Each use has it
 * alone (statements of a transaction are never interleaved with another schema's) with that
 * schema first on the search path, set only when the schema changes.
 */
export class PgliteConnection {
  private tail: Promise<unknown> = Promise.resolve();
  private searchPath: string | undefined;
  private readonly schemas = new Set<string>();

  constructor(readonly pg: PGlite) {}

  exclusive<T>(schema: string, work: (pg: PGlite) => Promise<T>, signal?: AbortSignal): Promise<T> {
    const run = async () => {
      // Checked again after the wait: the caller may have given up behind other work.
      throwIfAborted(signal);
      if (this.searchPath !== schema) {
        const create = this.schemas.has(schema) ? '' : `CREATE SCHEMA IF NOT EXISTS ${schema};`;
        await this.pg.exec(`${create} SET search_path = ${schema}, public;`);
        this.schemas.add(schema);
        this.searchPath = schema;
      }
      return work(this.pg);
    };
    const result = this.tail.then(run, run);
    this.tail = result.catch(() => undefined);
    return result;
  }
}

/**
 * One in-memory PGlite holding the schemas of several services of one process, as one PostgreSQL
 * database does in production: one cluster to start instead of one per service, each of which
 * costs about a second of CPU. Its statements are serialised across the services, so a service
 * must not wait, inside a transaction, for another service of the same cluster.
 */
export class EmbeddedCluster {
  private constructor(private readonly connection: PgliteConnection) {}

  static async create(): Promise<EmbeddedCluster> {
    return new EmbeddedCluster(new PgliteConnection(await createCluster(undefined)));
  }

  /** A Db on `schema` of this cluster; closing it leaves the cluster open. */
  open(schema: string): Promise<PgliteDb> {
    return PgliteDb.on(this.connection, schema, false);
  }

  close(): Promise<void> {
    return this.connection.pg.close();
  }
}

/**
 * Embedded PostgreSQL (PGlite, WASM) in a data directory, or in memory: the same SQL as
 * production with nothing installed. One connection, so statements and transactions are
 * serialised.
 */
export class PgliteDb implements Db {
  readonly engine = 'pglite' as const;
  /** By channel: one process owns the data directory, so notifications never leave it. */
  private readonly listeners = new Map<string, Set<(payload: string) => void>>();

  private constructor(
    private readonly connection: PgliteConnection,
    private readonly schema: string,
    private readonly ownsCluster: boolean,
  ) {}

  /** A cluster of its own in `dataDir`, or in memory when it is undefined. */
  static async open(options: { dataDir?: string; schema: string }): Promise<PgliteDb> {
    if (options.dataDir) await mkdir(options.dataDir, { recursive: true, mode: 0o700 });
    const pg = await createCluster(options.dataDir);
    if (options.dataDir) await restrictTree(options.dataDir);
    return PgliteDb.on(new PgliteConnection(pg), options.schema, true);
  }

  /** `schema` on `connection`, created now so that a failure shows at open. */
  static async on(connection: PgliteConnection, schema: string, ownsCluster: boolean): Promise<PgliteDb> {
    const db = new PgliteDb(connection, assertIdentifier(schema), ownsCluster);
    await db.exec('SELECT 1');
    return db;
  }

  // One connection in this process, so a statement cannot be cancelled without waiting for it:
  // a signal only stops statements that have not started.
  async query<R>(sql: string, params: readonly unknown[] = [], signal?: AbortSignal): Promise<QueryResult<R>> {
    throwIfAborted(signal);
    return this.connection.exclusive(this.schema, (pg) => run(pg, sql, params), signal);
  }

  async exec(sql: string): Promise<void> {
    await this.connection.exclusive(this.schema, (pg) => pg.exec(sql));
  }

  notify(channel: string, payload: string): void {
    for (const onNotify of this.listeners.get(assertIdentifier(channel)) ?? []) onNotify(payload);
  }

  async transaction<T>(work: (tx: Queryable) => Promise<T>, signal?: AbortSignal): Promise<T> {
    throwIfAborted(signal);
    const pending: [string, string][] = [];
    const result = await this.connection.exclusive(this.schema, (pg) => pg.transaction((tx) =>
      work({
        notify: (channel, payload) => void pending.push([channel, payload]),
        async query<R>(sql: string, params: readonly unknown[] = [], querySignal = signal) {
          throwIfAborted(querySignal);
          return run(tx, sql, params);
        },
        async exec(sql: string) {
          await tx.exec(sql);
        },
      }),
    ), signal);
    for (const [channel, payload] of pending) this.notify(channel, payload);
    return result;
  }

  async withAdvisoryLock<T>(_name: string, work: (db: Queryable) => Promise<T>): Promise<T> {
    // A data directory has exactly one owner process (PGlite holds it), so only the other schemas
    // of this process could race: `work` (migrations, with their own BEGIN and COMMIT) has the
    // connection to itself.
    return this.connection.exclusive(this.schema, (pg) =>
      work({
        notify: (channel, payload) => this.notify(channel, payload),
        query: (sql, params = [], signal) => {
          throwIfAborted(signal);
          return run(pg, sql, params);
        },
        exec: async (sql) => void (await pg.exec(sql)),
      }),
    );
  }

  /** PGlite has one process: `standsInForOthers` changes nothing here. */
  async listen(channel: string, onNotify: (payload: string) => void, _options?: ListenOptions): Promise<() => Promise<void>> {
    let listeners = this.listeners.get(assertIdentifier(channel));
    if (!listeners) this.listeners.set(channel, (listeners = new Set()));
    // Its own function, so the same callback listening twice is two subscriptions.
    const listener = (payload: string) => onNotify(payload);
    listeners.add(listener);
    return async () => {
      listeners.delete(listener);
    };
  }

  async close(): Promise<void> {
    if (this.ownsCluster) await this.connection.pg.close();
  }
}

async function run<R>(pg: Pick<PGlite, 'query'>, sql: string, params: readonly unknown[]): Promise<QueryResult<R>> {
  const result = await traceQuery(sql, () => pg.query<R>(sql, params as unknown[]));
  // PGlite reports 0 affected rows for a SELECT; PostgreSQL counts the rows it returned.
  return { rows: result.rows, rowCount: result.fields.length > 0 ? result.rows.length : (result.affectedRows ?? 0) };
}
