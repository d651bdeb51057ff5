import { readFile } from 'node:fs/promises';
import type { KafkaConfig, SASLOptions } from 'kafkajs';
import { ConfigError } from '../config-error.js';
import type { HubConfig } from '../config.js';

/** How the Kafka client reaches the brokers: TLS and SASL, as kafkajs takes them. */
export type KafkaConnection = Pick<KafkaConfig, 'ssl' | 'sasl'>;

type KafkaSettings = Pick<HubConfig, 'KAFKA_SSL' | 'KAFKA_SSL_CA_FILE' | 'KAFKA_SASL_MECHANISM' | 'KAFKA_SASL_USERNAME' | 'KAFKA_SASL_PASSWORD'>;

/**
 * KAFKA_SSL (TLS, verified against the system CAs or KAFKA_SSL_CA_FILE, which implies TLS) and
 * KAFKA_SASL_MECHANISM with KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD. Messages name settings,
 * never their values.
 */
export async function kafkaConnection(config: KafkaSettings): Promise<KafkaConnection> {
  const connection: KafkaConnection = {};
  if (config.KAFKA_SSL_CA_FILE) {
    let ca: Buffer;
    try {
      ca = await readFile(config.KAFKA_SSL_CA_FILE);
    } catch (err) {
      throw new ConfigError(`KAFKA_SSL_CA_FILE: cannot read ${config.KAFKA_SSL_CA_FILE} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    connection.ssl = { ca: [ca], rejectUnauthorized: true };
  } else if (config.KAFKA_SSL) {
    connection.ssl = true;
  }
  const credentials = [config.KAFKA_SASL_USERNAME, config.KAFKA_SASL_PASSWORD];
  if (config.KAFKA_SASL_MECHANISM) {
    const missing = (['KAFKA_SASL_USERNAME', 'KAFKA_SASL_PASSWORD'] as const).filter((name) => !config[name]);
    if (missing.length) throw new ConfigError(`KAFKA_SASL_MECHANISM ${config.KAFKA_SASL_MECHANISM} needs ${missing.join(' and ')}`);
    connection.sasl = { mechanism: config.KAFKA_SASL_MECHANISM, username: config.KAFKA_SASL_USERNAME!, password: config.KAFKA_SASL_PASSWORD! } as SASLOptions;
  } else if (credentials.some(Boolean)) {
    throw new ConfigError('KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD need KAFKA_SASL_MECHANISM (plain, scram-sha-256 or scram-sha-512)');
  }
  return connection;
}
