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

export default async function globalSetup() {
  await checkKafka();
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
