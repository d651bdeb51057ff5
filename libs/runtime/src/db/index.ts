import { join } from 'node:path';
import type { HubConfig } from '../config.js';
import type { Db } from './db.js';
import { type EmbeddedCluster, PgliteDb } from './pglite.js';
import { PostgresDb } from './postgres.js';

export { type Db, type ListenOptions, type Queryable, type QueryResult, isUniqueViolation } from './db.js';
export { PostgresDb, DEFAULT_CONNECT_TIMEOUT_MS } from './postgres.js';
export { EmbeddedCluster, PgliteDb, dumpEmptyCluster, useEmptyClusterTemplate } from './pglite.js';
export { migrate } from './migrate.js';

/**
 * PostgreSQL when a URL is configured, else embedded PGlite: in `dataDir`, or in memory when it is
 * absent, on `cluster` when one is given (shared with other schemas of this process).
 */
export async function openDb(options: { url?: string; dataDir?: string; schema: string; maxConnections?: number; preparedStatements?: boolean; cluster?: EmbeddedCluster }): Promise<Db> {
  if (options.url) return new PostgresDb({ url: options.url, schema: options.schema, maxConnections: options.maxConnections, preparedStatements: options.preparedStatements });
  if (options.cluster && !options.dataDir) return options.cluster.open(options.schema);
  return PgliteDb.open({ dataDir: options.dataDir, schema: options.schema });
}

/**
 * Where the embedded database `name` keeps its files: `HUB_DATA_DIR/<name>/pgdata`, or nowhere
 * (in memory) with HUB_EMBEDDED_STORAGE=memory or when DATABASE_URL names the database.
 */
export function embeddedDataDir(config: Pick<HubConfig, 'DATABASE_URL' | 'HUB_DATA_DIR' | 'HUB_EMBEDDED_STORAGE'>, name: string): string | undefined {
  return config.DATABASE_URL || config.HUB_EMBEDDED_STORAGE === 'memory' ? undefined : join(config.HUB_DATA_DIR, name, 'pgdata');
}
