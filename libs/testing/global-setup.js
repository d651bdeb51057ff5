// Finds the real PostgreSQL and Redis for the suites that run against them. Without them the
// suites run on the embedded backends only and say so; with AGENTHUB_TEST_REQUIRE_REAL=1 (CI)
// their absence fails the run instead.
import { existsSync, readFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

function reachable(host, port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: 1000 });
    socket.once('connect', () => { socket.destroy(); resolve(true); });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => { socket.destroy(); resolve(false); });
  });
}

// KAFKA_TEST_BROKERS (`host:port,…`; .ci/kafka.sh starts one) runs the Kafka suites on a real
// broker. One that does not answer is dropped with a warning (the suites then skip), or fails the
// run under AGENTHUB_TEST_REQUIRE_REAL=1.
async function checkKafka() {
  const brokers = process.env.KAFKA_TEST_BROKERS;
  if (!brokers) return;
  const first = new URL(`kafka://${brokers.split(',')[0].trim()}`);
  if (await reachable(first.hostname, Number(first.port || 9092))) return;
  if (process.env.AGENTHUB_TEST_REQUIRE_REAL === '1') {
    throw new Error(`AGENTHUB_TEST_REQUIRE_REAL=1 but Kafka at ${first.host} (KAFKA_TEST_BROKERS) is not reachable`);
  }
  console.warn(`\n[agenthub tests] Kafka at ${first.host} (KAFKA_TEST_BROKERS) not reachable: the Kafka suites skip.\n`);
  delete process.env.KAFKA_TEST_BROKERS;
}

/**
 * An empty PGlite cluster dumped once for the whole run (and kept in the temporary directory for
 * later runs on the same PGlite version): each test file that opens an embedded database loads it
 * (see libs/testing's embedded backend) instead of running initdb, seconds of CPU, itself.
 */
async function pgliteTemplate() {
  const runtime = createRequire(new URL('../runtime/package.json', import.meta.url));
  const pglite = JSON.parse(readFileSync(join(dirname(runtime.resolve('@electric-sql/pglite')), '..', 'package.json'), 'utf8'));
  const path = join(tmpdir(), `agenthub-test-pglite-${pglite.version}.tar`);
  if (!existsSync(path)) {
    const { dumpEmptyCluster } = await import('@agenthub/runtime');
    const partial = `${path}.${process.pid}`;
    await writeFile(partial, Buffer.from(await (await dumpEmptyCluster()).arrayBuffer()));
    // Whole or absent: another run may be reading or writing the same file.
    await rename(partial, path);
  }
  process.env.AGENTHUB_TEST_PGLITE_TEMPLATE = path;
}

export default async function globalSetup() {
  await checkKafka();
  await pgliteTemplate();
  // The suites start a few hundred node processes (split-mode stacks, `agenthub serve`, CLI
  // commands), each compiling the same modules; with V8's code cache on disk, which they inherit
  // through the environment, each spends about a sixth less CPU starting.
  process.env.NODE_COMPILE_CACHE ??= join(tmpdir(), 'agenthub-test-compile-cache');
  const pgUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const pg = new URL(pgUrl);
  const redis = new URL(redisUrl);
  const [pgUp, redisUp] = await Promise.all([
    reachable(pg.hostname, Number(pg.port || 5432)),
    reachable(redis.hostname, Number(redis.port || 6379)),
  ]);
  if (pgUp && redisUp) {
    process.env.AGENTHUB_TEST_PG_URL = pgUrl;
    process.env.AGENTHUB_TEST_REDIS_URL = redisUrl;
    return;
  }
  const missing = [!pgUp && `PostgreSQL at ${pg.host}`, !redisUp && `Redis at ${redis.host}`].filter(Boolean).join(' and ');
  if (process.env.AGENTHUB_TEST_REQUIRE_REAL === '1') {
    throw new Error(`AGENTHUB_TEST_REQUIRE_REAL=1 but ${missing} is not reachable`);
  }
  console.warn(`\n[agenthub tests] ${missing} not reachable: running on embedded backends only.\n`);
}
