import { randomBytes } from 'node:crypto';
import kafkajs from 'kafkajs';
import type { ConsumedMessage } from '@agenthub/runtime';
import { KafkaBus } from '@agenthub/runtime/kafka';
import { testLogger } from '@agenthub/testing';
import { eventually } from './bus-conformance.js';

/**
 * KafkaBus on a three-node cluster (KAFKA_TEST_CLUSTER_BROKERS; `bash .ci/kafka-suites.sh cluster`
 * starts one and runs this file, which CI's run does not: its name is outside jest's testMatch).
 */
const brokers = process.env.KAFKA_TEST_CLUSTER_BROKERS?.split(',').filter(Boolean);
if (!brokers || brokers.length < 3) throw new Error('KAFKA_TEST_CLUSTER_BROKERS must name the three nodes of a cluster (bash .ci/kafka-suites.sh cluster)');
const { Kafka, logLevel } = kafkajs;

describe('KafkaBus on a three-node cluster', () => {
  const open: KafkaBus[] = [];
  afterAll(async () => {
    await Promise.all(open.map((bus) => bus.close()));
  });

  it('creates topics replicated on the three nodes, published to and subscribed to at once by several clients', async () => {
    const admin = new Kafka({ brokers: brokers!, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      for (let round = 0; round < 5; round += 1) {
        // New clients, as hub processes starting together: each one's first publish creates the
        // topics, which the broker it asks next may not know yet.
        const topics = Array.from({ length: 3 }, () => `cluster-${randomBytes(4).toString('hex')}`);
        const buses = Array.from({ length: 3 }, () => new KafkaBus({ brokers: brokers!, clientId: 'agenthub-cluster-test', log: testLogger(), partitions: 6 }));
        open.push(...buses);
        // Each client publishes to the topics and subscribes to them at once, as the services of
        // a starting hub do, its own group each. Settled, not raced: a failure must not leave the
        // others running past the test.
        const seen = buses.map(() => [] as ConsumedMessage[]);
        const started = await Promise.allSettled([
          ...buses.flatMap((bus, b) => topics.map((topic) => bus.publish(topic, [{ key: 'ws', value: `${b}`, headers: {} }]))),
          ...buses.map((bus, b) =>
            bus.subscribe(`cluster-${randomBytes(4).toString('hex')}`, topics, async (m) => {
              seen[b]!.push(m);
            }),
          ),
        ]);
        expect(started.flatMap((p) => (p.status === 'rejected' ? [String((p.reason as Error).stack)] : []))).toEqual([]);
        // A consumer that asked a broker without the topic yet restarts (kafkajs, after a pause).
        await eventually(() => seen.every((s) => s.length === 9), 'every group got every message', 90_000);
        const metadata = await admin.fetchTopicMetadata({ topics });
        for (const topic of metadata.topics) {
          expect(topic.partitions).toHaveLength(6);
          for (const partition of topic.partitions) expect([...partition.replicas].sort()).toEqual([1, 2, 3]);
        }
      }
    } finally {
      await admin.disconnect();
    }
  });
});
