import net from 'node:net';
import { KafkaBus } from '@agenthub/runtime';
import { kafkaTestBrokers, skipUnlessRequired, testLogger } from '@agenthub/testing';
import { describeBusConformance, type BusSubject } from './bus-conformance.js';

/**
 * KafkaBus against a real broker: KAFKA_TEST_BROKERS when set (CI starts one with .ci/kafka.sh),
 * else a single-node KRaft Kafka started with testcontainers when a container runtime exists;
 * skipped, saying why, otherwise (failed under AGENTHUB_TEST_REQUIRE_REAL=1).
 */
const log = testLogger();
const IMAGE = 'apache/kafka:3.9.1';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const subject = (brokers: string[], stop: () => Promise<void>): BusSubject => ({
  // Three partitions per topic so that order per key is kept across partitions, not by accident.
  connect: async () => new KafkaBus({ brokers, clientId: 'agenthub-test', log, partitions: 3, retryDelayMs: 100 }),
  teardown: stop,
});

async function kafka(): Promise<{ start: () => Promise<BusSubject>; skip?: string }> {
  const brokers = kafkaTestBrokers();
  if (brokers) return { start: async () => subject(brokers, async () => undefined) };
  const { getContainerRuntimeClient, GenericContainer, Wait } = await import('testcontainers');
  let host: string;
  try {
    host = (await getContainerRuntimeClient()).info.containerRuntime.host;
  } catch (err) {
    return {
      skip: skipUnlessRequired(`no container runtime (${(err as Error).message.split('\n')[0]}) and KAFKA_TEST_BROKERS is not set`),
      start: async () => {
        throw new Error('skipped');
      },
    };
  }
  return {
    async start() {
      // Kafka tells clients the address to reconnect to, so the host port is chosen up front.
      const port = await freePort();
      const container = await new GenericContainer(IMAGE)
        .withExposedPorts({ container: 9092, host: port })
        .withEnvironment({
          KAFKA_NODE_ID: '1',
          KAFKA_PROCESS_ROLES: 'broker,controller',
          KAFKA_LISTENERS: 'PLAINTEXT://:9092,CONTROLLER://:9093',
          KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://${host}:${port}`,
          KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
          KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
          KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
          KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
          KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
          KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
          KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
        })
        .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
        .withStartupTimeout(120_000)
        .start();
      return subject([`${host}:${port}`], async () => {
        await container.stop();
      });
    },
  };
}

const broker = await kafka();
if (broker.skip) console.warn(`[bus] KafkaBus conformance skipped: ${broker.skip}`);
describeBusConformance('KafkaBus', broker.start, { skip: broker.skip });
