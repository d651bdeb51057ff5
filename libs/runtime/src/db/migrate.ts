import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Db } from './db.js';
import { assertIdentifier } from './db.js';
import type { Logger } from '../logger.js';

/**
 * Applies the service's `migrations/NNN_name.sql` files that have not run yet, in order, each in
 * its own transaction, under an advisory lock so that replicas starting together apply each
 * migration exactly once.
 */
export async function migrate(db: Db, options: { schema: string; dir: URL; log: Logger }): Promise<number> {
  const schema = assertIdentifier(options.schema);
  const files = (await readdir(fileURLToPath(options.dir))).filter((f) => /^\d+_[\w-]+\.sql$/.test(f)).sort();
  return db.withAdvisoryLock(`agenthub:migrate:${schema}`, async (conn) => {
    await conn.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await conn.query(
      `CREATE TABLE IF NOT EXISTS ${schema}.schema_migrations (
         version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const done = new Set(
      (await conn.query<{ version: number }>(`SELECT version FROM ${schema}.schema_migrations`)).rows.map((r) => r.version),
    );
    let applied = 0;
    for (const file of files) {
      const version = Number.parseInt(file, 10);
      if (done.has(version)) continue;
      const sql = await readFile(fileURLToPath(new URL(file, options.dir)), 'utf8');
      await conn.query('BEGIN');
      try {
        await conn.query(`SET LOCAL search_path = ${schema}, public`);
        await conn.exec(sql);
        await conn.query(`INSERT INTO ${schema}.schema_migrations (version, name) VALUES ($1, $2)`, [version, file]);
        await conn.query('COMMIT');
      } catch (err) {
        await conn.query('ROLLBACK');
        throw new Error(`Migration ${schema}/${file} failed: ${(err as Error).message}`, { cause: err });
      }
      options.log.info({ schema, migration: file }, 'migration applied');
      applied += 1;
    }
    return applied;
  });
}
