// Finds the real PostgreSQL and Redis for the suites that run against them. Without them the
// suites run on the embedded backends only and say so; with AGENTHUB_TEST_REQUIRE_REAL=1 (CI)
// their absence fails the run instead.
import net from 'node:net';

function reachable(host, port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: 1000 });
    socket.once('connect', () => { socket.destroy(); resolve(true); });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => { socket.destroy(); resolve(false); });
  });
}

export default async function globalSetup() {
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
