import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, openBus, type Bus, type ConsumedMessage } from '@agenthub/runtime';
import { skipUnlessRequired, testLogger } from '@agenthub/testing';
import { eventually } from './bus-conformance.js';

/**
 * Issue 20, item 5: the event log's TLS and SASL settings (KAFKA_SSL_CA_FILE, KAFKA_SASL_*) as the
 * hub reads them from its environment, against a real broker's SASL, TLS and SASL-over-TLS
 * listeners. KAFKA_TEST_SECURE_DIR is the directory `KAFKA_SECURE=1 bash .ci/kafka.sh start`
 * fills (CI's broker has them): the listeners' addresses, the user `hub`'s password and the CA.
 */
const dir = process.env.KAFKA_TEST_SECURE_DIR;
const skip = dir && existsSync(join(dir, 'sasl-brokers')) ? undefined : skipUnlessRequired('KAFKA_TEST_SECURE_DIR names no directory with the secure listeners of .ci/kafka.sh');
if (skip) console.warn(`[kafka] secure client settings skipped: ${skip}`);
const read = (file: string) => readFileSync(join(dir!, file), 'utf8').trim();

/** A bus opened from environment variables only, as `openBus` opens it in every service. */
async function busFrom(env: Record<string, string>): Promise<Bus> {
  return openBus(loadConfig({ KAFKA_CLIENT_ID: 'agenthub-secure-test', ...env }), testLogger());
}

/** Publishes one message and consumes it back through a group of its own. */
async function roundTrip(bus: Bus): Promise<ConsumedMessage[]> {
  const topic = `secure-${randomBytes(4).toString('hex')}`;
  await bus.publish(topic, [{ key: 'ws', value: 'over a secured listener', headers: { h: '1' } }]);
  const seen: ConsumedMessage[] = [];
  const subscription = await bus.subscribe(`secure-${randomBytes(4).toString('hex')}`, [topic], async (m) => {
    seen.push(m);
  });
  try {
    await eventually(() => seen.length >= 1, 'the message came back');
  } finally {
    await subscription.stop();
  }
  return seen;
}

(skip ? describe.skip : describe)('Kafka with TLS and SASL from the environment, on a real broker', () => {
  const opened: Bus[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((bus) => bus.close()));
  });

  it.each([
    ['plain', 'sasl-brokers', false],
    ['scram-sha-256', 'sasl-brokers', false],
    ['scram-sha-512', 'sasl-brokers', false],
    ['plain', 'sasl-tls-brokers', true],
    ['scram-sha-512', 'sasl-tls-brokers', true],
  ] as const)('KAFKA_SASL_MECHANISM=%s on %s (TLS: %s) publishes and consumes', async (mechanism, listener, tls) => {
    const bus = await busFrom({
      KAFKA_BROKERS: read(listener),
      KAFKA_SASL_MECHANISM: mechanism,
      KAFKA_SASL_USERNAME: 'hub',
      KAFKA_SASL_PASSWORD: read('sasl-password'),
      ...(tls ? { KAFKA_SSL_CA_FILE: join(dir!, 'ca.pem') } : {}),
    });
    opened.push(bus);
    const seen = await roundTrip(bus);
    expect(seen.map((m) => [m.key, m.value, m.headers.h])).toEqual([['ws', 'over a secured listener', '1']]);
  });

  it('KAFKA_SSL_CA_FILE alone reaches a TLS listener whose certificate that CA signed', async () => {
    const bus = await busFrom({ KAFKA_BROKERS: read('tls-brokers'), KAFKA_SSL_CA_FILE: join(dir!, 'ca.pem') });
    opened.push(bus);
    expect(await roundTrip(bus)).toHaveLength(1);
  });

  it('a wrong password is refused by the broker, for PLAIN and for SCRAM', async () => {
    for (const mechanism of ['plain', 'scram-sha-256'] as const) {
      const bus = await busFrom({ KAFKA_BROKERS: read('sasl-brokers'), KAFKA_SASL_MECHANISM: mechanism, KAFKA_SASL_USERNAME: 'hub', KAFKA_SASL_PASSWORD: 'not-the-password' });
      opened.push(bus);
      await expect(bus.ping()).rejects.toThrow(/SASL .*authentication failed|Authentication failed/i);
    }
  });

  it('KAFKA_SSL with the system CAs refuses the broker\'s self-signed certificate', async () => {
    const bus = await busFrom({ KAFKA_BROKERS: read('tls-brokers'), KAFKA_SSL: 'true' });
    opened.push(bus);
    await expect(bus.ping()).rejects.toThrow(/self[- ]signed|certificate/i);
  });
});
