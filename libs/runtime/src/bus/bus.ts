/**
 * The event log between services: Kafka in production, an embedded adapter otherwise. Outbox
 * relays publish to it; the events service consumes it as a consumer group.
 */
export interface BusMessage {
  /** Messages with the same key keep their order (one Kafka partition). */
  key: string;
  /** The JSON payload as written to the outbox (`{ event, timestamp, data }`). */
  value: string;
  /** At least `event-id` (the outbox event id) and `event-type`. */
  headers: Record<string, string>;
}

export interface ConsumedMessage extends BusMessage {
  topic: string;
  /** Position in the topic (Kafka offset within its partition, embedded: global sequence). */
  offset: string;
}

export interface Subscription {
  /** Stops consuming; resolves once the handler in flight (if any) finished and its offset is committed. */
  stop(): Promise<void>;
}

export interface Bus {
  /**
   * Publishes messages in the given order. Resolves once they are durable in the log (Kafka acks
   * from all in-sync replicas; embedded: stored), so an outbox row may be marked published then.
   * `signal` is the caller's: aborted, nothing is sent (Kafka) or the insert is cancelled
   * (embedded), and the call rejects with `abortError`; a Kafka send under way is not recalled.
   * Every adapter carries a message of up to MAX_BUS_MESSAGE_BYTES (value, key and headers) whole.
   */
  publish(topic: string, messages: BusMessage[], signal?: AbortSignal): Promise<void>;
  /**
   * Consumes `topics` as consumer group `group`: each message reaches one member of the group,
   * in order per key, at least once. The offset is committed only after `handle` resolves; a
   * rejection makes the message come again (after a pause) instead of being skipped.
   */
  subscribe(group: string, topics: string[], handle: (message: ConsumedMessage) => Promise<void>): Promise<Subscription>;
  /** Throws when the backend cannot be reached (readiness). */
  ping(signal?: AbortSignal): Promise<void>;
  /** Messages of each topic that `group` has not handled yet (a metric, read at scrape time). */
  consumerLag?(group: string, topics: string[]): Promise<{ topic: string; messages: number }[]>;
  close(): Promise<void>;
}

/**
 * The largest message every adapter carries: under Kafka's default limit per record batch
 * (`message.max.bytes`, 1,048,588 bytes) with room for the batch's own overhead. The hub's events
 * are far smaller (ids and names); a larger one would be refused by a default broker.
 */
export const MAX_BUS_MESSAGE_BYTES = 1_000_000;

/** Header names every published message carries. */
export const EVENT_ID_HEADER = 'event-id';
export const EVENT_TYPE_HEADER = 'event-type';
