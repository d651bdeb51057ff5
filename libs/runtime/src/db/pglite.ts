import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { PGlite, types } from '@electric-sql/pglite';
import type { Db, Queryable, QueryResult } from './db.js';
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
 * Embedded PostgreSQL (PGlite, WASM) in a data directory: the same SQL as production with
 * nothing installed. One connection, so statements and transactions are serialised.
 */
export class PgliteDb implements Db {
  readonly engine = 'pglite' as const;
  /** By channel: one process owns the data directory, so notifications never leave it. */
  private readonly listeners = new Map<string, Set<(payload: string) => void>>();

  private constructor(private readonly pg: PGlite) {}

  /** `dataDir` undefined keeps everything in memory (tests). */
  static async open(options: { dataDir?: string; schema: string }): Promise<PgliteDb> {
    const schema = assertIdentifier(options.schema);
    if (options.dataDir) await mkdir(options.dataDir, { recursive: true, mode: 0o700 });
    const pg = await createCluster(options.dataDir);
    if (options.dataDir) await restrictTree(options.dataDir);
    await pg.exec(`CREATE SCHEMA IF NOT EXISTS ${schema}; SET search_path = ${schema}, public;`);
    return new PgliteDb(pg);
  }

  // One connection in this process, so a statement cannot be cancelled without waiting for it:
  // a signal only stops statements that have not started.
  async query<R>(sql: string, params: readonly unknown[] = [], signal?: AbortSignal): Promise<QueryResult<R>> {
    throwIfAborted(signal);
    const result = await traceQuery(sql, () => this.pg.query<R>(sql, params as unknown[]));
    return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
  }

  async exec(sql: string): Promise<void> {
    await this.pg.exec(sql);
  }

  notify(channel: string, payload: string): void {
    for (const onNotify of this.listeners.get(assertIdentifier(channel)) ?? []) onNotify(payload);
  }

  async transaction<T>(work: (tx: Queryable) => Promise<T>, signal?: AbortSignal): Promise<T> {
    throwIfAborted(signal);
    const pending: [string, string][] = [];
    const result = await this.pg.transaction((tx) =>
      work({
        notify: (channel, payload) => void pending.push([channel, payload]),
        async query<R>(sql: string, params: readonly unknown[] = [], querySignal = signal) {
          throwIfAborted(querySignal);
          const result = await traceQuery(sql, () => tx.query<R>(sql, params as unknown[]));
          return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
        },
        async exec(sql: string) {
          await tx.exec(sql);
        },
      }),
    );
    for (const [channel, payload] of pending) this.notify(channel, payload);
    return result;
  }

  async withAdvisoryLock<T>(_name: string, work: (db: Queryable) => Promise<T>): Promise<T> {
    // A data directory has exactly one owner process (PGlite holds it), so nothing can race.
    return work(this);
  }

  async listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    let listeners = this.listeners.get(assertIdentifier(channel));
    if (!listeners) this.listeners.set(channel, (listeners = new Set()));
    // Its own function, so the same callback listening twice is two subscriptions.
    const listener = (payload: string) => onNotify(payload);
    listeners.add(listener);
    return async () => {
      listeners.delete(listener);
    };
  }

  close(): Promise<void> {
    return this.pg.close();
  }
}
