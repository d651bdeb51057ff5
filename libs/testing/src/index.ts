import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createLogger, EmbeddedCluster, HubError, InternalKey, Metrics, openDb, openKv, useEmptyClusterTemplate, type Db, type Kv, type Logger, type Reason, type RunningService } from '@agenthub/runtime';

/**
 * Where a suite's data lives. Every suite runs on the embedded backends (PGlite in memory,
 * in-process Kv) and, when jest's global setup found them, again on real PostgreSQL and Redis.
 */
export interface Backend {
  readonly name: 'embedded' | 'postgres+redis';
  /** Creates an isolated database (its own PostgreSQL database) and Redis key prefix. */
  provision(): Promise<ProvisionedBackend>;
}

/** One suite's isolated database and key prefix; dispose only after everything using them closed. */
export interface ProvisionedBackend {
  /** Undefined on the embedded backend. */
  readonly databaseUrl: string | undefined;
  readonly redisUrl: string | undefined;
  readonly redisPrefix: string;
  /** Drops the database; safe to call once everything using it is closed. */
  dispose(): Promise<void>;
}

let clusterTemplate: Promise<void> | undefined;

/**
 * The empty PGlite cluster that jest's global setup dumped (AGENTHUB_TEST_PGLITE_TEMPLATE), made
 * this test file's template: every file would otherwise pay one initdb (seconds of CPU) itself.
 */
function useSharedClusterTemplate(): Promise<void> {
  const path = process.env.AGENTHUB_TEST_PGLITE_TEMPLATE;
  if (!path) return Promise.resolve();
  return (clusterTemplate ??= readFile(path).then((bytes) => useEmptyClusterTemplate(new Blob([bytes]))));
}

const embedded: Backend = {
  name: 'embedded',
  async provision() {
    await useSharedClusterTemplate();
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
        // A test database need not survive a crash of the PostgreSQL server, so its commits do not
        // wait for the WAL flush (5 to 8 ms each on this machine's disk); what a commit makes
        // visible, and what survives a killed hub process, is the same.
        await admin.query(`ALTER DATABASE ${name} SET synchronous_commit = off`);
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

/** The brokers of the real Kafka that jest's global setup found (KAFKA_TEST_BROKERS), if any. */
export function kafkaTestBrokers(): string[] | undefined {
  const brokers = process.env.KAFKA_TEST_BROKERS?.split(',').map((b) => b.trim()).filter(Boolean);
  return brokers?.length ? brokers : undefined;
}

/**
 * Why a suite whose real backend is missing skips; under AGENTHUB_TEST_REQUIRE_REAL=1 (CI) it
 * throws instead, so that the suite fails as the PostgreSQL and Redis ones do.
 */
export function skipUnlessRequired(reason: string): string {
  if (process.env.AGENTHUB_TEST_REQUIRE_REAL === '1') throw new Error(`AGENTHUB_TEST_REQUIRE_REAL=1 but ${reason}`);
  return reason;
}

/** A logger for tests: silent unless AGENTHUB_TEST_LOG names a level. */
export function testLogger(): Logger {
  return createLogger({ level: process.env.AGENTHUB_TEST_LOG ?? 'silent' });
}

/** What one service of a test stack is started with: its own pool and Kv connection. */
export interface TestServiceDeps {
  db: Db;
  kv: Kv;
  log: Logger;
  metrics: Metrics;
  listen: string;
  grpcTimeoutMs: number;
  /** The stack's one key: its services and the test's clients sign with it. */
  internalKey: InternalKey;
}

/**
 * The plumbing of a multi-service test stack on one provisioned backend: `deps(schema)` opens a
 * service's pool and Kv, `started(service)` records it, and `close()` stops the services (last
 * started first, so callers go before what they call), closes every pool and Kv and drops the
 * database.
 */
export class TestStackBackends {
  private readonly dbs: Db[] = [];
  private readonly kvs: Kv[] = [];
  private readonly services: RunningService[] = [];
  /** Signs the calls of every service of the stack and of the test's own clients. */
  readonly internalKey = InternalKey.generate();
  private readonly dataDirs: string[] = [];
  private readonly opened = new Map<Db, { schema: string; dataDir: string | undefined }>();
  /** On the embedded backend, the in-memory services share one cluster, as an in-memory hub's do. */
  private cluster: Promise<EmbeddedCluster> | undefined;

  private constructor(readonly provisioned: ProvisionedBackend, private readonly log: Logger) {}

  static async open(backend: Backend, log: Logger): Promise<TestStackBackends> {
    return new TestStackBackends(await backend.provision(), log);
  }

  /**
   * A service's pool and Kv. `durable` keeps an embedded database on disk (a temporary data
   * directory) instead of in memory, so that `reopen` can reach the same data.
   */
  async deps(schema: string, options: { durable?: boolean } = {}): Promise<TestServiceDeps> {
    let dataDir: string | undefined;
    if (options.durable && !this.provisioned.databaseUrl) {
      dataDir = await mkdtemp(join(tmpdir(), `agenthub-${schema}-`));
      this.dataDirs.push(dataDir);
    }
    return this.openDeps(schema, dataDir);
  }

  /**
   * Closes `deps`' pool and Kv and opens new ones on the same data, as a restarted process would
   * (`deps` must be durable on the embedded backend). An in-process Kv starts empty, like a
   * restarted embedded hub's.
   */
  async reopen(deps: TestServiceDeps): Promise<TestServiceDeps> {
    const opened = this.opened.get(deps.db);
    if (!opened) throw new Error('reopen takes what deps() returned');
    this.dbs.splice(this.dbs.indexOf(deps.db), 1);
    this.kvs.splice(this.kvs.indexOf(deps.kv), 1);
    await Promise.all([deps.db.close(), deps.kv.close()]);
    return this.openDeps(opened.schema, opened.dataDir);
  }

  private async openDeps(schema: string, dataDir: string | undefined): Promise<TestServiceDeps> {
    const cluster = this.provisioned.databaseUrl || dataDir ? undefined : await (this.cluster ??= EmbeddedCluster.create());
    const db = await openDb({ url: this.provisioned.databaseUrl, dataDir, schema, cluster });
    const kv = await openKv({ url: this.provisioned.redisUrl, prefix: this.provisioned.redisPrefix });
    this.dbs.push(db);
    this.kvs.push(kv);
    this.opened.set(db, { schema, dataDir });
    return { db, kv, log: this.log, metrics: new Metrics(), listen: '127.0.0.1:0', grpcTimeoutMs: 5000, internalKey: this.internalKey };
  }

  started<T extends RunningService>(service: T): T {
    this.services.push(service);
    return service;
  }

  async close(): Promise<void> {
    for (const service of this.services.splice(0).reverse()) await service.stop(1000);
    await Promise.all([...this.dbs.map((db) => db.close()), ...this.kvs.map((kv) => kv.close())]);
    await (await this.cluster)?.close();
    await this.provisioned.dispose();
    await Promise.all(this.dataDirs.map((dir) => rm(dir, { recursive: true, force: true })));
  }
}

/** The HubError a call failed with, reduced to what the gateway shows. */
export async function failure(call: Promise<unknown>): Promise<{ reason: Reason; message: string; field: string }> {
  try {
    await call;
  } catch (err) {
    if (!(err instanceof HubError)) throw err;
    return { reason: err.reason, message: err.message, field: err.field };
  }
  throw new Error('Expected the call to fail');
}

/** Calls forged as an attacker would make them (bad or missing signatures), resolving with the gRPC status they ended with. */
export { forgedCall, forgeSignature, methodPaths, type ForgedCall, type ForgedPrincipal } from './forged-calls.js';
/** A throwaway CA and certificates (openssl CLI) for mutual TLS tests, with one from a foreign CA the hub must refuse. */
export { makeTestCertificates, type TestCertificates } from './certificates.js';

/** A fake server's slow answer, dropped when its caller gives up first. */
export { answerAfter } from './answers.js';
/** A free loopback port outside the ephemeral range, so a test can restart a process on it. */
export { freePort } from './ports.js';
/** A seeded random source for generated inputs (property and fuzz tests): the same seed, the same inputs. */
export { seededRandom } from './random.js';
