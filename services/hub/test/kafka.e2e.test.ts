import { randomBytes } from 'node:crypto';
import { CONSUMER_GROUP } from '@agenthub/events';
import { WORKSPACE_EVENTS_TOPIC, type Bus, type ConsumedMessage } from '@agenthub/runtime';
import { KafkaBus } from '@agenthub/runtime/kafka';
import { backends, kafkaTestBrokers, skipUnlessRequired, testLogger } from '@agenthub/testing';
import { startTestHub, type HubMode, type TestHub } from './harness.js';
import { splitMode } from './split-hub.js';
import { verifySignature, WebhookReceiver } from './webhook-receiver.js';

/**
 * The hub with its event log on a real Kafka (KAFKA_BROKERS, as deployed): workspace and secrets
 * events go outbox → relay → Kafka → events service → webhook, all-in-one and in split mode (one
 * process per service, both writers' relays publishing to the one broker). KAFKA_TEST_BROKERS
 * names the broker (CI starts one with .ci/kafka.sh); without it the suite skips, or fails under
 * AGENTHUB_TEST_REQUIRE_REAL=1.
 */
const brokers = kafkaTestBrokers();
const skip = brokers ? undefined : skipUnlessRequired('KAFKA_TEST_BROKERS is not set');
if (skip) console.warn(`[kafka] the hub on Kafka skipped: ${skip}`);

// Production's shape: real PostgreSQL and Redis when they are there (split mode unless
// AGENTHUB_TEST_SPLIT=0), else the embedded backend.
const real = backends().find((backend) => backend.name === 'postgres+redis');
const modes: HubMode[] = real ? (process.env.AGENTHUB_TEST_SPLIT === '0' ? [real] : [real, splitMode(real)]) : backends();

/** Every message of `topic` from the start of the log, read as a consumer group of its own. */
async function readLog(bus: Bus, topic: string) {
  const seen: ConsumedMessage[] = [];
  const subscription = await bus.subscribe(`kafka-e2e-${randomBytes(4).toString('hex')}`, [topic], async (m) => {
    seen.push(m);
  });
  return { seen, stop: () => subscription.stop() };
}

(skip ? describe.skip : describe).each(modes.map((m) => [m.name, m] as const))('the hub on Kafka (%s)', (_name, mode) => {
  let hub: TestHub;
  let receiver: WebhookReceiver;
  let bus: KafkaBus;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    bus = new KafkaBus({ brokers: brokers!, clientId: 'agenthub-e2e', log: testLogger() });
    hub = await startTestHub(mode, { KAFKA_BROKERS: brokers!.join(','), HUB_EGRESS_ALLOW_PRIVATE: 'true', EMBEDDINGS_THREADS: '1' });
  });
  afterAll(async () => {
    await hub?.stop();
    await bus?.close();
    await receiver?.close();
  });

  it('delivers workspace events to a webhook through Kafka, in order, and the events service commits them there', async () => {
    const owner = await hub.agent('acme', 'owner');
    const key = owner.api_key;
    const { workspace } = await hub.ok(key, 'x-hub/workspace.create', { name: 'On Kafka' });
    const { webhook } = await hub.ok(key, 'x-hub/webhooks.create', { workspace_id: workspace.id, url: receiver.url('/kafka') });
    const { memory } = await hub.ok(key, 'x-hub/workspace.store', { workspace_id: workspace.id, content: 'Events travel through Kafka.', type: 'decision' });
    await hub.ok(key, 'x-hub/workspace.secrets.set', { workspace_id: workspace.id, key: 'TOKEN', value: 'kafka-secret' });
    await hub.ok(key, 'x-hub/workspace.secrets.delete', { workspace_id: workspace.id, key: 'TOKEN' });

    const expected = [
      ['workspace.memory.stored', { workspace_id: workspace.id, memory_id: memory.id, type: 'decision', stored_by: owner.agent_id }],
      ['workspace.secret.set', { workspace_id: workspace.id, key: 'TOKEN', set_by: owner.agent_id }],
      ['workspace.secret.deleted', { workspace_id: workspace.id, key: 'TOKEN', deleted_by: owner.agent_id }],
    ] as const;
    // workspace.created may come too (the webhook was created right after it): not counted here.
    const requests = await receiver.waitFor('three deliveries', () => {
      const got = receiver.on('/kafka').filter((r) => r.body?.event !== 'workspace.created');
      return got.length >= expected.length && got;
    });
    expect(requests.map((r) => [r.body.event, r.body.data])).toEqual(expected);
    for (const request of requests) expect(verifySignature(webhook.secret, request)).toBe(true);

    // The events are in the Kafka topic, keyed by workspace, as the workspace and secrets services published them.
    const log = await readLog(bus, WORKSPACE_EVENTS_TOPIC);
    try {
      const ours = await receiver.waitFor('the workspace\'s events in the Kafka topic', () => {
        const found = log.seen.filter((m) => m.key === workspace.id && JSON.parse(m.value).event !== 'workspace.created');
        return found.length >= expected.length && found;
      });
      expect(ours.map((m) => JSON.parse(m.value).event)).toEqual(expected.map(([event]) => event));
    } finally {
      await log.stop();
    }
    // The events service's group committed past them in Kafka, so a restart does not send them again.
    await receiver.waitFor('the events service to have committed the topic', async () => {
      const lag = await bus.consumerLag(CONSUMER_GROUP, [WORKSPACE_EVENTS_TOPIC]);
      return lag[0]?.messages === 0;
    });
  });
});
