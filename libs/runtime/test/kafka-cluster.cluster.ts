import { randomBytes } from 'node:crypto';
import kafkajs from 'kafkajs';
import { KafkaBus, type ConsumedMessage } from '@agenthub/runtime';
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

  it('creates topics replicated on the three nodes and publishes to each at once, from several clients together', async () => {
    const admin = new Kafka({ brokers: brokers!, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      for (let round = 0; round < 5; round += 1) {
        // New clients, as hub processes starting together: each one's first publish creates the
        // topics, which the broker it asks next may not know yet.
        const topics = Array.from({ length: 3 }, () => `cluster-${randomBytes(4).toString('hex')}`);
        const buses = Array.from({ length: 3 }, () => new KafkaBus({ brokers: brokers!, clientId: 'agenthub-cluster-test', log: testLogger(), partitions: 6 }));
        open.push(...buses);
        // Settled, not raced: a failure must not leave the other publishes running past the test.
        const published = await Promise.allSettled(buses.flatMap((bus, b) => topics.map((topic) => bus.publish(topic, [{ key: 'ws', value: `${b}`, headers: {} }]))));
        expect(published.flatMap((p) => (p.status === 'rejected' ? [String((p.reason as Error).stack)] : []))).toEqual([]);
        const seen: ConsumedMessage[] = [];
        await buses[0]!.subscribe(`cluster-${randomBytes(4).toString('hex')}`, topics, async (m) => {
          seen.push(m);
        });
        await eventually(() => seen.length === 9, 'every message came back');
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
