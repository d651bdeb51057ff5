import type { HubConfig } from '../config.js';
import { embeddedDataDir, openDb } from '../db/index.js';
import type { Kv } from '../kv/index.js';
import type { Logger } from '../logger.js';
import type { Bus } from './bus.js';
import { DbBus } from './db-bus.js';
import { kafkaConnection } from './kafka-connection.js';

/**
 * The one place the event log is chosen: Kafka when KAFKA_BROKERS is set; else the embedded
 * DbBus in schema `bus` of DATABASE_URL (shared by every process using that database), else in
 * PGlite under `HUB_DATA_DIR/bus/pgdata` (one process). `kv` lets a DbBus publish in one process
 * wake consumers in the others at once.
 */
export async function openBus(config: HubConfig, log: Logger, options: { kv?: Kv } = {}): Promise<Bus> {
  const busLog = log.child({ component: 'bus' });
  if (config.KAFKA_BROKERS) {
    const brokers = config.KAFKA_BROKERS.split(',').map((b) => b.trim()).filter(Boolean);
    const { KafkaBus } = await import('./kafka-bus.js');
    return new KafkaBus({ brokers, clientId: config.KAFKA_CLIENT_ID, connection: await kafkaConnection(config), log: busLog });
  }
  const db = await openDb({
    url: config.DATABASE_URL,
    dataDir: embeddedDataDir(config, 'bus'),
    schema: 'bus',
    // Publishes, one consumer loop per subscription and heartbeats: a few connections suffice.
    maxConnections: Math.min(config.DATABASE_POOL_SIZE, 4),
    preparedStatements: config.DATABASE_PREPARED_STATEMENTS,
  });
  try {
    return await DbBus.open({ db, log: busLog, ownsDb: true, kv: options.kv });
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
}
