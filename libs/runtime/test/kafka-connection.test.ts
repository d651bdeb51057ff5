import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, kafkaConnection, loadConfig } from '@agenthub/runtime';

/** Issue 12, item 9: Kafka's TLS and SASL settings reach kafkajs; the password reaches nothing else. */

const PASSWORD = 'kafka-password-that-must-not-leak';
const connectionOf = (env: Record<string, string>) => kafkaConnection(loadConfig({ KAFKA_BROKERS: 'kafka:9093', ...env }));

describe('kafkaConnection', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'agenthub-kafka-'));
    writeFileSync(join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is plaintext without settings', async () => {
    expect(await connectionOf({})).toEqual({});
  });

  it('maps KAFKA_SSL to TLS verified against the system CAs, and KAFKA_SSL_CA_FILE to TLS verified against that CA', async () => {
    expect(await connectionOf({ KAFKA_SSL: 'true' })).toEqual({ ssl: true });
    const withCa = await connectionOf({ KAFKA_SSL_CA_FILE: join(dir, 'ca.pem') });
    expect(withCa.ssl).toEqual({ ca: [Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n')], rejectUnauthorized: true });
  });

  it.each(['plain', 'scram-sha-256', 'scram-sha-512'])('maps KAFKA_SASL_MECHANISM=%s with its username and password to kafkajs sasl', async (mechanism) => {
    expect(await connectionOf({ KAFKA_SSL: 'true', KAFKA_SASL_MECHANISM: mechanism, KAFKA_SASL_USERNAME: 'hub', KAFKA_SASL_PASSWORD: PASSWORD })).toEqual({
      ssl: true,
      sasl: { mechanism, username: 'hub', password: PASSWORD },
    });
  });

  it('refuses incomplete or unknown settings by name, never echoing the password', async () => {
    const refused = async (env: Record<string, string>) => {
      try {
        await connectionOf(env);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        expect((err as Error).message).not.toContain(PASSWORD);
        return (err as Error).message;
      }
      throw new Error('expected a ConfigError');
    };
    expect(await refused({ KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_PASSWORD: PASSWORD })).toMatch(/needs KAFKA_SASL_USERNAME$/);
    expect(await refused({ KAFKA_SASL_USERNAME: 'hub', KAFKA_SASL_PASSWORD: PASSWORD })).toMatch(/need KAFKA_SASL_MECHANISM/);
    expect(await refused({ KAFKA_SASL_MECHANISM: 'gssapi', KAFKA_SASL_USERNAME: 'hub', KAFKA_SASL_PASSWORD: PASSWORD })).toMatch(/KAFKA_SASL_MECHANISM/);
    expect(await refused({ KAFKA_SSL_CA_FILE: join(dir, 'missing.pem') })).toMatch(/KAFKA_SSL_CA_FILE: cannot read/);
  });
});
