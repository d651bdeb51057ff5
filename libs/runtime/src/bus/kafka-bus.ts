import kafkajs from 'kafkajs';
import type { Admin, Consumer, IHeaders, KafkaMessage, logCreator, Producer } from 'kafkajs';
import { throwIfAborted } from '../abort.js';
import type { Logger } from '../logger.js';
import type { Bus, BusMessage, ConsumedMessage, Subscription } from './bus.js';
import type { KafkaConnection } from './kafka-connection.js';

const { Kafka, logLevel, Partitioners } = kafkajs;

export interface KafkaBusOptions {
  brokers: string[];
  clientId: string;
  /** TLS and SASL (kafkaConnection); plaintext without. */
  connection?: KafkaConnection;
  log: Logger;
  /** Partitions of topics this bus creates; more lets more members of a group share the work. */
  partitions?: number;
  /** Pause before a message whose handler failed is handed over again. */
  retryDelayMs?: number;
  /** How long the group waits for a silent member before handing its partitions to others (kafkajs: 30 s). */
  sessionTimeoutMs?: number;
}

/**
 * How long the broker holds a fetch that finds nothing new (the Java consumer's fetch.max.wait.ms;
 * kafkajs waits 5 s). A resumed partition and a stopping consumer both wait for the fetch in
 * flight, so this bounds how late a retry comes after its pause and how long `stop` takes.
 */
const FETCH_MAX_WAIT_MS = 500;

/** How long a topic this bus created may take to have a leader on every partition (kafkajs: 5 s). */
const TOPIC_LEADERS_TIMEOUT_MS = 30_000;

/**
 * Runs `work` again while it fails with an error kafkajs marks retriable (a broker that has not
 * heard of a new topic yet, a partition without a leader), for at most TOPIC_LEADERS_TIMEOUT_MS.
 */
async function untilKnown<T>(what: string, work: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + TOPIC_LEADERS_TIMEOUT_MS;
  for (;;) {
    try {
      return await work();
    } catch (err) {
      if (!(err as { retriable?: boolean }).retriable) throw err;
      if (Date.now() >= deadline) throw new Error(`Kafka: ${what} still failed after ${TOPIC_LEADERS_TIMEOUT_MS} ms: ${(err as Error).message}`, { cause: err });
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** kafkajs logs through its own logger; this sends its warnings and errors to ours. */
function pinoLogCreator(log: Logger): logCreator {
  return () => ({ namespace, level, log: entry }) => {
    const { message, timestamp: _timestamp, ...extra } = entry;
    const fields = { kafka: namespace, ...extra };
    if (level === logLevel.ERROR) log.error(fields, message);
    else if (level === logLevel.WARN) log.warn(fields, message);
    else if (level === logLevel.INFO) log.info(fields, message);
    else log.debug(fields, message);
  };
}

function headerText(headers: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, raw] of Object.entries(headers ?? {})) {
    const value = Array.isArray(raw) ? raw[raw.length - 1] : raw;
    if (value !== undefined) out[name] = value.toString();
  }
  return out;
}

function consumed(topic: string, message: KafkaMessage): ConsumedMessage {
  return {
    topic,
    offset: message.offset,
    key: message.key?.toString() ?? '',
    value: message.value?.toString() ?? '',
    headers: headerText(message.headers),
  };
}

/**
 * The event log on Kafka: an idempotent producer waiting for every in-sync replica, topics
 * created when first used, and consumer groups that commit a message's offset only after its
 * handler resolved. A failed handler pauses its partition and the message comes again.
 */
export class KafkaBus implements Bus {
  private readonly kafka: InstanceType<typeof Kafka>;
  private readonly producer: Producer;
  private readonly admin: Admin;
  private readonly log: Logger;
  private readonly partitions: number;
  private readonly retryDelayMs: number;
  private readonly sessionTimeoutMs: number | undefined;
  private readonly knownTopics = new Set<string>();
  private readonly subscriptions = new Set<Subscription>();
  private connected: Promise<void> | undefined;

  constructor(options: KafkaBusOptions) {
    this.log = options.log;
    this.partitions = options.partitions ?? 6;
    this.retryDelayMs = options.retryDelayMs ?? 1_000;
    this.sessionTimeoutMs = options.sessionTimeoutMs;
    this.kafka = new Kafka({
      clientId: options.clientId,
      brokers: options.brokers,
      ...options.connection,
      logLevel: logLevel.WARN,
      logCreator: pinoLogCreator(options.log),
    });
    this.producer = this.kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    this.admin = this.kafka.admin();
  }

  async publish(topic: string, messages: BusMessage[], signal?: AbortSignal): Promise<void> {
    if (messages.length === 0) return;
    await this.connect();
    await this.ensureTopics([topic]);
    // kafkajs cannot recall a send; a caller that left before it starts sends nothing.
    throwIfAborted(signal);
    await this.producer.send({
      topic,
      acks: -1,
      messages: messages.map((m) => ({ key: m.key, value: m.value, headers: m.headers })),
    });
  }

  async subscribe(group: string, topics: string[], handle: (message: ConsumedMessage) => Promise<void>): Promise<Subscription> {
    await this.connect();
    await this.ensureTopics(topics);
    const log = this.log.child({ group });
    const consumer = this.kafka.consumer({
      groupId: group,
      allowAutoTopicCreation: false,
      maxWaitTimeInMs: FETCH_MAX_WAIT_MS,
      ...(this.sessionTimeoutMs === undefined ? {} : { sessionTimeout: this.sessionTimeoutMs }),
    });
    const retryTimers = new Set<NodeJS.Timeout>();
    let inFlight: Promise<void> = Promise.resolve();
    let stopping = false;

    const handleOne = async (topic: string, partition: number, message: KafkaMessage, pause: () => () => void) => {
      // A message fetched while stopping is left for the member that takes the partition over.
      if (stopping) return;
      try {
        await handle(consumed(topic, message));
      } catch (err) {
        log.warn({ err, topic, partition, offset: message.offset }, 'bus handler failed; the message will come again');
        // Rewind to this message and hold the partition back for a while, without failing the
        // consumer (a thrown error would make kafkajs restart it).
        consumer.seek({ topic, partition, offset: message.offset });
        const resume = pause();
        const timer = setTimeout(() => {
          retryTimers.delete(timer);
          resume();
        }, this.retryDelayMs);
        retryTimers.add(timer);
        return;
      }
      try {
        await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
      } catch (err) {
        log.warn({ err, topic, partition, offset: message.offset }, 'bus offset not committed; the message will come again');
        // The group's coordinator is gone (its broker died): kafkajs gave up after its retries and
        // would keep asking the dead broker, each later commit taking as long. Thrown, the error
        // makes kafkajs restart the consumer, which finds the new coordinator and rejoins; the
        // message comes again (at least once). Seen on a three-node cluster: without this, a
        // SIGKILL of the coordinator's broker slowed the consumer to one message per ~10 s.
        if ((err as Error).name === 'KafkaJSNumberOfRetriesExceeded') throw err;
        // Otherwise the group went on without this member (a rebalance, or its session expired
        // while the handler ran), so the message comes again to the partition's owner. Thrown,
        // such an error would stop the consumer for good: kafkajs restarts one only after
        // retriable errors.
      }
    };

    await consumer.connect();
    try {
      // The broker the consumer asks may not know a topic another broker just created yet.
      await untilKnown(`subscribing to ${topics.join(', ')}`, () => consumer.subscribe({ topics, fromBeginning: true }));
      // Resolves once the member joined the group, so the caller knows it is consuming.
      await consumer.run({
        autoCommit: false,
        eachMessage: ({ topic, partition, message, pause }) => {
          inFlight = handleOne(topic, partition, message, pause);
          return inFlight;
        },
      });
    } catch (err) {
      await consumer.disconnect().catch(() => undefined);
      throw err;
    }

    const subscription: Subscription = {
      stop: async () => {
        if (stopping) return;
        stopping = true;
        for (const timer of retryTimers) clearTimeout(timer);
        // Let the handler in flight finish and commit before the member leaves: kafkajs stops
        // committing once it is told to stop.
        try {
          consumer.pause(topics.map((topic) => ({ topic })));
        } catch {
          // kafkajs throws while it waits to restart a crashed consumer (the brokers down, the
          // topic deleted): it has no group then, so nothing is fetched to pause, and `stopping`
          // turns away whatever a restart fetches before the disconnect.
        }
        await inFlight.catch(() => undefined);
        await consumer.disconnect();
        this.subscriptions.delete(subscription);
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  async ping(signal?: AbortSignal): Promise<void> {
    throwIfAborted(signal);
    await this.connect();
    await this.admin.describeCluster();
  }

  /** Per topic, the sum over partitions of the newest offset minus the group's committed one. */
  async consumerLag(group: string, topics: string[]): Promise<{ topic: string; messages: number }[]> {
    await this.connect();
    return Promise.all(
      topics.map(async (topic) => {
        const [ends, committed] = await Promise.all([this.admin.fetchTopicOffsets(topic), this.admin.fetchOffsets({ groupId: group, topics: [topic] })]);
        // -1: the group committed nothing on that partition yet, so all of it from the start is due.
        const done = new Map((committed[0]?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
        let messages = 0;
        for (const end of ends) {
          const from = done.get(end.partition) ?? -1;
          messages += Math.max(0, Number(end.high) - (from < 0 ? Number(end.low) : from));
        }
        return { topic, messages };
      }),
    );
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    await Promise.allSettled([this.producer.disconnect(), this.admin.disconnect()]);
    this.connected = undefined;
  }

  /** Connects the producer and the admin client once; a failed attempt is retried on the next call. */
  private connect(): Promise<void> {
    // Settled together, so that no connect is still retrying in the background after a failure.
    this.connected ??= Promise.allSettled([this.producer.connect(), this.admin.connect()]).then((results) => {
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) {
        this.connected = undefined;
        throw failed.reason;
      }
    });
    return this.connected;
  }

  private async ensureTopics(topics: string[]): Promise<void> {
    const unknown = topics.filter((t) => !this.knownTopics.has(t));
    if (unknown.length === 0) return;
    const existing = new Set(await this.admin.listTopics());
    for (const topic of unknown) {
      // Another process may create it between the listing and here; kafkajs then returns false.
      // kafkajs would wait for the leaders itself (waitForLeaders defaults to true), and fail:
      // see waitForLeaders, which also covers a topic another client created a moment ago.
      if (!existing.has(topic)) await this.admin.createTopics({ topics: [{ topic, numPartitions: this.partitions }], waitForLeaders: false });
      await this.waitForLeaders(topic);
      this.knownTopics.add(topic);
    }
  }

  /**
   * Returns once every partition of a topic this bus has not used yet has a leader. Not kafkajs's
   * `waitForLeaders`: it retries only LEADER_NOT_AVAILABLE, while on a cluster the broker it asks
   * often has not heard of the new topic yet and answers UNKNOWN_TOPIC_OR_PARTITION, which it
   * threw (the hub then failed to start on a fresh three-node cluster).
   */
  private async waitForLeaders(topic: string): Promise<void> {
    await untilKnown(`waiting for the leaders of ${topic}`, async () => {
      const { topics } = await this.admin.fetchTopicMetadata({ topics: [topic] });
      const partitions = topics[0]?.partitions ?? [];
      if (partitions.length === 0 || partitions.some((p) => p.leader < 0)) throw Object.assign(new Error(`Kafka topic ${topic} has partitions without a leader`), { retriable: true });
    });
  }
}
