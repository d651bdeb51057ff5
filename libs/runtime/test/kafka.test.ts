import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import kafkajs from 'kafkajs';
import { createLogger } from '@agenthub/runtime';
import { KafkaBus, type KafkaBusOptions } from '@agenthub/runtime/kafka';
import { freePort, kafkaTestBrokers, skipUnlessRequired, testLogger } from '@agenthub/testing';
import { describeBusConformance, eventually, type BusSubject } from './bus-conformance.js';

/**
 * KafkaBus against a real broker: KAFKA_TEST_BROKERS when set (CI starts one with .ci/kafka.sh),
 * else a single-node KRaft Kafka started with testcontainers when a container runtime exists;
 * skipped, saying why, otherwise (failed under AGENTHUB_TEST_REQUIRE_REAL=1).
 */
const log = testLogger();
const { Kafka, logLevel } = kafkajs;
const IMAGE = 'apache/kafka:3.9.1';

/** A broker the suites share: its addresses, and how to stop it when this file is done. */
interface Broker {
  brokers: string[];
  stop(): Promise<void>;
}

// Three partitions per topic so that order per key is kept across partitions, not by accident.
const kafkaBus = (brokers: string[], options: Partial<KafkaBusOptions> = {}) =>
  new KafkaBus({ brokers, clientId: 'agenthub-test', log, partitions: 3, retryDelayMs: 100, ...options });

async function kafka(): Promise<{ start: () => Promise<Broker>; skip?: string }> {
  const brokers = kafkaTestBrokers();
  if (brokers) return { start: async () => ({ brokers, stop: async () => undefined }) };
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
      return {
        brokers: [`${host}:${port}`],
        stop: async () => {
          await container.stop();
        },
      };
    },
  };
}

const broker = await kafka();
if (broker.skip) console.warn(`[bus] KafkaBus conformance skipped: ${broker.skip}`);
describeBusConformance(
  'KafkaBus',
  async (): Promise<BusSubject> => {
    const started = await broker.start();
    return { connect: async () => kafkaBus(started.brokers), teardown: started.stop };
  },
  { skip: broker.skip },
);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const unique = (what: string) => `${what}-${randomBytes(4).toString('hex')}`;

(broker.skip ? describe.skip : describe)('KafkaBus on a real broker', () => {
  let started: Broker;
  const open: KafkaBus[] = [];
  const connect = (options: Partial<KafkaBusOptions> = {}) => {
    const bus = kafkaBus(started.brokers, options);
    open.push(bus);
    return bus;
  };

  beforeAll(async () => {
    started = await broker.start();
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((bus) => bus.close()));
  });
  afterAll(async () => {
    await started?.stop();
  });

  it('keeps consuming after a handler outlasted its group session, and the message it handled comes again', async () => {
    // The broker's shortest session (group.min.session.timeout.ms); kafkajs sends no heartbeat while a handler runs.
    const bus = connect({ sessionTimeoutMs: 6_000 });
    const topic = unique('session');
    await bus.publish(topic, [{ key: 'ws', value: '1', headers: {} }]);
    const handled: string[] = [];
    let first = true;
    await bus.subscribe(unique('group'), [topic], async (m) => {
      if (first) {
        first = false;
        // Slower than the session: the broker expels the member meanwhile, and refuses its commit.
        await sleep(9_000);
      }
      handled.push(m.value);
    });
    await eventually(() => handled.length >= 1, 'the slow handler finished', 30_000);
    await bus.publish(topic, [{ key: 'ws', value: '2', headers: {} }]);
    await eventually(() => handled.includes('2'), 'the subscription consumed a later message', 60_000);

    expect(handled).toEqual(['1', '1', '2']);
  });

  it('stops a subscription while kafkajs waits to restart its crashed consumer', async () => {
    let restarting = false;
    const destination = new Writable({
      write(chunk, _encoding, done) {
        const entry = JSON.parse(String(chunk)) as { kafka?: string; retryTime?: number };
        // kafkajs's "Restarting the consumer in <retryTime> ms", logged as it schedules the restart.
        if (entry.kafka === 'Consumer' && entry.retryTime !== undefined) restarting = true;
        done();
      },
    });
    const bus = connect({ log: createLogger({ level: 'error', destination }) });
    const topic = unique('deleted');
    await bus.publish(topic, [{ key: 'ws', value: '1', headers: {} }]);
    const handled: string[] = [];
    const subscription = await bus.subscribe(unique('group'), [topic], async (m) => {
      handled.push(m.value);
    });
    await eventually(() => handled.length >= 1, 'the message was handled');
    // Its topic gone, the consumer's fetches fail and kafkajs restarts it after a pause, as it
    // does while the brokers are down; in that pause the consumer has no group to pause.
    const admin = new Kafka({ brokers: started.brokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      await admin.deleteTopics({ topics: [topic] });
    } finally {
      await admin.disconnect();
    }
    await eventually(() => restarting, 'kafkajs scheduled a restart of the consumer');

    await expect(subscription.stop()).resolves.toBeUndefined();
  });
});
