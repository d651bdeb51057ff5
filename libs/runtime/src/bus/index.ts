export { type Bus, type BusMessage, type ConsumedMessage, type Subscription, EVENT_ID_HEADER, EVENT_TYPE_HEADER, MAX_BUS_MESSAGE_BYTES } from './bus.js';
export { DbBus, type DbBusOptions } from './db-bus.js';
// The Kafka client loads only where Kafka is configured (openBus), or from `@agenthub/runtime/kafka`.
export type { KafkaBus, KafkaBusOptions } from './kafka-bus.js';
export { openBus } from './open.js';
export { kafkaConnection, type KafkaConnection } from './kafka-connection.js';
