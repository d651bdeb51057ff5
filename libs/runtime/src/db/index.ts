import type { Db } from './db.js';
import { PgliteDb } from './pglite.js';
import { PostgresDb } from './postgres.js';

export { type Db, type Queryable, type QueryResult, isUniqueViolation } from './db.js';
export { PostgresDb, DEFAULT_CONNECT_TIMEOUT_MS } from './postgres.js';
export { PgliteDb, dumpEmptyCluster, useEmptyClusterTemplate } from './pglite.js';
export { migrate } from './migrate.js';

/** PostgreSQL when a URL is configured, else embedded PGlite in `dataDir` (in memory if absent). */
export async function openDb(options: { url?: string; dataDir?: string; schema: string; maxConnections?: number }): Promise<Db> {
  if (options.url) return new PostgresDb({ url: options.url, schema: options.schema, maxConnections: options.maxConnections });
  return PgliteDb.open({ dataDir: options.dataDir, schema: options.schema });
}
