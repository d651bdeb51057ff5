import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { PGlite, types } from '@electric-sql/pglite';
import type { Db, Queryable, QueryResult } from './db.js';
import { assertIdentifier, traceQuery } from './db.js';
import { restrictTree } from '../private-files.js';

/**
 * An empty cluster, dumped after this process created its first one: initdb in WASM takes
 * seconds, while loading its result takes a fraction, and the all-in-one hub (like every test
 * stack) creates a cluster per service.
 */
let emptyCluster: Promise<Blob> | undefined;

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

  async query<R>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
    const result = await traceQuery(sql, () => this.pg.query<R>(sql, params as unknown[]));
    return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
  }

  async exec(sql: string): Promise<void> {
    await this.pg.exec(sql);
  }

  transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.pg.transaction((tx) =>
      work({
        async query<R>(sql: string, params: readonly unknown[] = []) {
          const result = await traceQuery(sql, () => tx.query<R>(sql, params as unknown[]));
          return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
        },
        async exec(sql: string) {
          await tx.exec(sql);
        },
      }),
    );
  }

  async withAdvisoryLock<T>(_name: string, work: (db: Queryable) => Promise<T>): Promise<T> {
    // A data directory has exactly one owner process (PGlite holds it), so nothing can race.
    return work(this);
  }

  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    // One in-process session: its own notifications reach it, after the statement that committed them.
    return this.pg.listen(assertIdentifier(channel), onNotify);
  }

  close(): Promise<void> {
    return this.pg.close();
  }
}
