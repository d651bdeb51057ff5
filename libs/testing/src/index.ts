import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createLogger, type Logger } from '@agenthub/runtime';

/**
 * Where a suite's data lives. Every suite runs on the embedded backends (PGlite in memory,
 * in-process Kv) and, when jest's global setup found them, again on real PostgreSQL and Redis.
 */
export interface Backend {
  readonly name: 'embedded' | 'postgres+redis';
  /** Creates an isolated database (its own PostgreSQL database) and Redis key prefix. */
  provision(): Promise<ProvisionedBackend>;
}

export interface ProvisionedBackend {
  /** Undefined on the embedded backend. */
  readonly databaseUrl: string | undefined;
  readonly redisUrl: string | undefined;
  readonly redisPrefix: string;
  /** Drops the database; safe to call once everything using it is closed. */
  dispose(): Promise<void>;
}

const embedded: Backend = {
  name: 'embedded',
  async provision() {
    return { databaseUrl: undefined, redisUrl: undefined, redisPrefix: 'agenthub:', dispose: async () => undefined };
  },
};

function real(adminUrl: string, redisUrl: string): Backend {
  return {
    name: 'postgres+redis',
    async provision() {
      const name = `agenthub_test_${randomBytes(6).toString('hex')}`;
      const admin = new pg.Client({ connectionString: adminUrl });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${name}`);
      } finally {
        await admin.end();
      }
      const url = new URL(adminUrl);
      url.pathname = `/${name}`;
      return {
        databaseUrl: url.toString(),
        redisUrl,
        redisPrefix: `${name}:`,
        async dispose() {
          const client = new pg.Client({ connectionString: adminUrl });
          await client.connect();
          try {
            await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
          } finally {
            await client.end();
          }
        },
      };
    },
  };
}

/** The backends this run covers: embedded always, real ones when reachable. */
export function backends(): Backend[] {
  const pgUrl = process.env.AGENTHUB_TEST_PG_URL;
  const redisUrl = process.env.AGENTHUB_TEST_REDIS_URL;
  return pgUrl && redisUrl ? [embedded, real(pgUrl, redisUrl)] : [embedded];
}

/** A logger for tests: silent unless AGENTHUB_TEST_LOG names a level. */
export function testLogger(): Logger {
  return createLogger({ level: process.env.AGENTHUB_TEST_LOG ?? 'silent' });
}
